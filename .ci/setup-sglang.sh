#!/bin/bash
# setup-sglang.sh - build .venv-sglang (SGLang 0.5.23) and .venv-sglang-0.5.15 (idempotent).
#
# tests/engines_oracles run SGLang's own argument parser, resolver and HTTP apps to check the
# sweeper's SGLang side, against 0.5.23 and 0.5.15 (the newest release before 2026-07-12), and
# serve smollm2-135m with a real SGLang 0.5.15 on this CPU (test_sglang_cpu.py). SGLang needs its
# CUDA torch build and its transformers pin, which would break the runtime's CPU torch, so it
# gets its own venv (`make sglang-venv`, ~4 min fresh); 0.5.15 is a ~30 MB layer over it (`make
# sglang-0.5.15-venv`: its own sglang, transformers and tokenizers). Both are no-ops once their
# stamps exist. .ci/run sets SWEEPER_REQUIRE_SGLANG=1 so those tests fail instead of skipping if
# either venv is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
make sglang-venv
echo "setup-sglang: .venv-sglang ready ($(( $(date +%s) - start )) s)"
layer=$(date +%s)
make sglang-0.5.15-venv
echo "setup-sglang: .venv-sglang-0.5.15 ready ($(( $(date +%s) - layer )) s; $(( $(date +%s) - start )) s in all)"
