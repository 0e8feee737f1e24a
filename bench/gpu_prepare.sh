#!/usr/bin/env bash
# Run HERE (a machine with the package registries; .gpu/ is in .gitignore), before bench/gpu_check.sh runs on a
# machine with an NVIDIA GPU and no network. Fills .gpu/ (git-ignored) with what must travel:
#   .gpu/a/  llama-cpp-python's sdist, slimmed (no .git, vocab test files, docs: ~10 MB),
#            wheels of the packages the GPU machine's Python lacks, and the model file's first
#            part, with the whole file's SHA-256 (~55 MB in all)
#   .gpu/b/  the rest of the model file (~55 MB)
# Two parts because a carried tree is limited to 64 MiB a call and the default model is
# 94 MiB. Usage: bash bench/gpu_prepare.sh [PYTHON_VERSION (3.12)]
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${1:-3.12}
PIP=${PIP:-.venv/bin/pip}
[ -x "$PIP" ] || PIP="python3 -m pip"
VPY=${VPY:-.venv/bin/python}
MODEL=${CHATDB_MODEL:-$(PYTHONPATH=$PWD $VPY -c 'from engine.llama.model_path import resolve_model_path; print(resolve_model_path())')}
rm -rf .gpu && mkdir -p .gpu/a/wheels .gpu/b .gpu/tmp

$PIP download --quiet --no-deps --no-binary :all: -d .gpu/tmp llama-cpp-python==0.3.36
tar xzf .gpu/tmp/llama_cpp_python-0.3.36.tar.gz -C .gpu/tmp
src=.gpu/tmp/llama_cpp_python-0.3.36
rm -rf "$src/.git" "$src/vendor/llama.cpp/models/"*.gguf "$src/vendor/llama.cpp/docs" \
       "$src/vendor/llama.cpp/tools/ui" "$src/vendor/llama.cpp/benches" "$src/vendor/llama.cpp/examples/"*/*.gguf
tar czf .gpu/a/llama_cpp_python-0.3.36.tar.gz -C .gpu/tmp llama_cpp_python-0.3.36

# The GPU image has numpy, jinja2, pytest, scikit-build-core, cmake, ninja, click, anyio, httpx,
# pyyaml, requests, tqdm, tabulate and python-dateutil; not these (the archive's SQLCipher and
# sqlite-utils, the embedding conversion's gguf, the server's starlette and uvicorn).
platforms="--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64"
$PIP download --quiet --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
     $platforms -d .gpu/a/wheels zstandard prompt_toolkit wcwidth diskcache \
     starlette uvicorn h11 sniffio sqlcipher3 sqlite-utils sqlite-fts4 click-default-group gguf==0.19.0

sha256sum "$MODEL" | awk '{print $1}' > .gpu/a/model.sha256
basename "$MODEL" > .gpu/a/model.name
# Each call's tree (the repository, ~2 MB, included) must stay under 64 MiB: the first
# part is what leaves .gpu/a and .gpu/b the same size.
extra=$(du -cb .gpu/a/*.tar.gz .gpu/a/wheels/* | tail -1 | cut -f1)
half=$(( ($(stat -c %s "$MODEL") - extra + 1) / 2 ))
head -c "$half" "$MODEL" > .gpu/a/model.part0
tail -c +$((half + 1)) "$MODEL" > .gpu/b/model.part1
rm -rf .gpu/tmp
du -sh .gpu/a .gpu/b
