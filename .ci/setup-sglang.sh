#!/bin/bash
# setup-sglang.sh - build .venv-sglang, SGLang 0.5.23 for the oracle tests (idempotent).
#
# tests/engines_oracles run SGLang's own argument parser, resolver and OpenAI routes to check the
# sweeper's SGLang side. SGLang needs its CUDA torch build and its transformers pin, which would
# break the runtime's CPU torch, so it gets its own venv (`make sglang-venv`, ~4 min fresh, a
# no-op once its stamp exists). .ci/run sets SWEEPER_REQUIRE_SGLANG=1 so those tests fail
# instead of skipping if this venv is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
make sglang-venv
echo "setup-sglang: .venv-sglang ready ($(( $(date +%s) - start )) s)"
