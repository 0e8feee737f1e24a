#!/usr/bin/env bash
# chatdb on a machine with a GPU: `chatdb doctor`, the GPU suite (tests/gpu, as `make test-gpu`
# runs it), the resume, speculative, archive-drafting, KV-layout, slot, serve-batching and
# drafting, KV-budget and embedding tests, and the resume, decode, speculative (plain and from
# the archive, and prompt lookup's vote), serve (the server's drafting among it)
# and KV-type benches (what q8_0 KV costs where flash attention is on anyway), and the device
# against the CPU (bench/gpu_figures.py), ending with one table.
#
# Where the GPU build is installed (Vulkan, CUDA or Metal: `make install GPU=vulkan`):
#   PYTHON=.venv-vulkan/bin/python CPU_PYTHON=.venv/bin/python bash bench/gpu_check.sh here
# On an offline machine with an NVIDIA GPU, building CUDA from the carried sdist (prepare
# first with bench/gpu_prepare.sh):
#   bash bench/gpu_check.sh build   # with .gpu/a carried: install wheels, build (minutes)
#   bash bench/gpu_check.sh run     # with .gpu/b carried too (same warm machine): the checks
#   bash bench/gpu_check.sh core    # the same, cut to doctor, the GPU suite and the figures
#   bash bench/gpu_check.sh         # both, when .gpu/a and .gpu/b travel together
#
# Outputs go to $OUT (the device tool's folder) or .gpu/out.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STAGE=${1:-all}
OUTDIR=${OUT:-$ROOT/.gpu/out}
SITE=$ROOT/.gpu/site
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR" "$SITE"
export PYTHONPATH=$ROOT:$SITE PYTHONUNBUFFERED=1
ROWS=()
row() { ROWS+=("$(printf '%-34s %-6s %s' "$1" "$2" "$3")"); }

build() {
    if [ -f "$SITE/.built" ]; then row "build (kept from an earlier call)" ok "$(cat "$SITE/.built")"; return; fi
    sdist=$(ls .gpu/a/llama_cpp_python-*.tar.gz 2>/dev/null | head -1)
    [ -n "$sdist" ] || { row build FAIL ".gpu/a missing: run bench/gpu_prepare.sh here, carry .gpu/a"; return 1; }
    $PY -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .gpu/a/wheels/*.whl || return 1
    local t0=$SECONDS arch
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
    # Flags as the Makefile's (no llamafile kernels: batches sum as single steps do; no AMX,
    # which virtual machines report without enabling), CUDA on, for this GPU only (faster),
    # without the multimodal library chatdb does not load.
    local no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=${arch:-90} -DGGML_LLAMAFILE=OFF -DLLAVA_BUILD=OFF \
-DCMAKE_C_FLAGS='$no_amx' -DCMAKE_CXX_FLAGS='$no_amx'" \
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
        $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir \
            --target "$SITE" "$sdist" > "$OUTDIR/build.log" 2>&1 \
        || { row build FAIL "see build.log"; tail -30 "$OUTDIR/build.log"; return 1; }
    echo "CUDA sm_${arch:-90}, $((SECONDS - t0)) s" > "$SITE/.built"
    row build ok "$(cat "$SITE/.built")"
}

model() {
    local name target
    name=$(cat .gpu/a/model.name 2>/dev/null) || { row model FAIL "no .gpu/a/model.name"; return 1; }
    target=$ROOT/.gpu/model/$name
    if [ ! -f "$target" ]; then
        [ -f .gpu/b/model.part1 ] || { row model FAIL "carry .gpu/b (the model's second half)"; return 1; }
        mkdir -p .gpu/model && cat .gpu/a/model.part0 .gpu/b/model.part1 > "$target"
    fi
    [ "$(sha256sum "$target" | awk '{print $1}')" = "$(cat .gpu/a/model.sha256)" ] \
        || { row model FAIL "SHA-256 differs"; rm -f "$target"; return 1; }
    export CHATDB_MODEL=$target
    row model ok "$name"
}

step() {  # step NAME LOGFILE COMMAND...: run, keep its output, one row with its last line
    local name=$1 log=$OUTDIR/$2 t0=$SECONDS; shift 2
    if "$@" > "$log" 2>&1; then row "$name" ok "$(($SECONDS - t0)) s: $(tail -1 "$log" | cut -c1-90)"
    else row "$name" FAIL "$(($SECONDS - t0)) s: $(tail -1 "$log" | cut -c1-90)"; fi
}

checks() {
    step "tests: GPU suite (tests/gpu)" gpu_suite.txt $PY -m pytest -q -p no:cacheprovider tests/gpu
    step "figures: device vs CPU" gpu_figures.txt $PY bench/gpu_figures.py --repeat 3 \
        ${CPU_PYTHON:+--cpu-python "$CPU_PYTHON"}
    step doctor doctor.txt $PY -m cli.main --db "$OUTDIR/doctor.db" doctor
    $PY -m cli.main --db "$OUTDIR/doctor.db" doctor --json > "$OUTDIR/doctor.json" 2>&1
    offload=$($PY -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['settings']['offload'])" \
              "$OUTDIR/doctor.json" 2>/dev/null)
    row "offload planned" "$([ "${offload:-CPU only}" != "CPU only" ] && echo ok || echo FAIL)" "${offload:-?}"
    step "tests: resume, speculative, KV" tests.txt $PY -m pytest -q -p no:cacheprovider \
        tests/engine/test_resume.py tests/engine/test_speculative.py tests/engine/test_kvlayout.py \
        tests/engine/test_offload.py tests/engine/test_cost_model.py tests/engine/test_slot_states.py \
        tests/engine/test_cancel.py
    step "bench: resume" resume.txt $PY bench/resume.py --repeat 3
    step "bench: decode" decode.txt $PY bench/decode.py --repeat 3 --cases idle
    step "bench: speculative" speculative.txt $PY bench/speculative.py --repeat 3
    # Drafting from the archive where a verified guess costs little: its `best` column (a
    # drafter guessing the model's likeliest tokens) bounds a retry at 0.7 on the device.
    step "tests: archive drafting" archive_tests.txt $PY -m pytest -q -p no:cacheprovider \
        tests/engine/test_archive_drafting.py
    step "bench: archive drafting" archive_drafting.txt $PY bench/speculative.py --archive \
        --repeat 2 --max-tokens 300 --questions 10
    # Prompt lookup's vote against the latest occurrence alone, under the device's costs.
    step "bench: lookup vote" lookup_vote.txt $PY bench/lookup_vote.py --seeds 2
    # chatdb serve: batching where it pays (a GPU), against the bare batched loop; drafting in
    # every slot, verified in the batched pass (a one-slot step costs little more per token
    # there, so the decode bench's 0.98x and the editing task's 1.3x are what to read).
    step "tests: serve batching, drafting" serve_tests.txt $PY -m pytest -q -p no:cacheprovider \
        tests/server/test_concurrency.py tests/server/test_bench_pieces.py \
        tests/server/test_drafting.py
    step "bench: serve" serve.txt $PY bench/serve.py --quick --only 1456
    # What a drafted row costs inside a pass shared by four sequences (on a CPU a guess
    # there pays only when it is accepted about eight times in ten).
    step "bench: shared pass" shared_pass.txt $PY bench/shared_pass.py
    # The KV budget (drops, partial KV, a server and processes on one archive) and q8_0 KV,
    # then what q8_0 saves and costs with every layer on the GPU.
    step "tests: KV budget, q8_0" kv_tests.txt $PY -m pytest -q -p no:cacheprovider \
        tests/engine/test_kv_budget.py tests/engine/test_kv_type.py tests/chatdb/test_kv_budget.py
    step "bench: KV types" kv_types.txt $PY bench/kv_types.py --gpu --repeat 3
    # Search by meaning: the embedding mode with every layer on the GPU computes what the
    # weights do (a tiny BERT converted here: no embedding model needs carrying).
    step "tests: embeddings on the GPU" embed_tests.txt $PY -m pytest -q -p no:cacheprovider \
        tests/embed/test_embedding_model.py -k "converted or wordpiece or not_bert"
}

core() {  # what a short lease holds after the build: doctor and the plan, the GPU suite
    # (four workers: one device, many processes), the device against the CPU
    step doctor doctor.txt $PY -m cli.main --db "$OUTDIR/doctor.db" doctor
    $PY -m cli.main --db "$OUTDIR/doctor.db" doctor --json > "$OUTDIR/doctor.json" 2>&1
    offload=$($PY -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['settings']['offload'])" \
              "$OUTDIR/doctor.json" 2>/dev/null)
    row "offload planned" "$([ "${offload:-CPU only}" != "CPU only" ] && echo ok || echo FAIL)" "${offload:-?}"
    step "tests: GPU suite (tests/gpu)" gpu_suite.txt timeout "${SUITE_S:-300}" $PY -m pytest -q \
        -p no:cacheprovider -n 4 --dist loadfile --timeout 150 tests/gpu
    step "figures: device vs CPU" gpu_figures.txt timeout "${FIGURES_S:-120}" $PY bench/gpu_figures.py \
        --repeat 1 ${CPU_PYTHON:+--cpu-python "$CPU_PYTHON"}
}

quick() {  # a dry run of the script itself: doctor and the offload tests only
    step doctor doctor.txt $PY -m cli.main --db "$OUTDIR/doctor.db" doctor
    step "tests: offload" tests.txt $PY -m pytest -q -p no:cacheprovider tests/engine/test_offload.py
}

case $STAGE in
    build) build ;;
    run|all) build && model && checks ;;
    quick) build && model && quick ;;
    core) build && model && core ;;
    here) checks ;;
    *) echo "usage: bash bench/gpu_check.sh [build|run|all|core|quick|here]" >&2; exit 2 ;;
esac
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
printf '\n%-34s %-6s %s\n' check result detail
printf '%s\n' "${ROWS[@]}"
for f in gpu_figures.txt decode.txt speculative.txt archive_drafting.txt lookup_vote.txt resume.txt kv_types.txt serve.txt shared_pass.txt; do
    [ -f "$OUTDIR/$f" ] && { echo; echo "== $f"; grep -v '^\s*$' "$OUTDIR/$f" | tail -14; }
done
! printf '%s\n' "${ROWS[@]}" | grep -q ' FAIL '
