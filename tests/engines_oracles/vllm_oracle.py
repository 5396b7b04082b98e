"""Call the vLLM oracle (vllm_check.py) from the test venv: find .venv-vllm, send cases, read JSON.

vLLM lives in its own venv (.ci/setup-vllm.sh, `make vllm-setup`); tests that need it skip with
that instruction when it is missing. VLLM_VENV overrides the venv's location.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CHECK = Path(__file__).with_name("vllm_check.py")


def vllm_python() -> Path | None:
    """The vLLM venv's interpreter, or None when vLLM is not installed here."""
    venv = Path(os.environ.get("VLLM_VENV", REPO / ".venv-vllm"))
    python = venv / "bin" / "python"
    return python if (venv / ".installed").is_file() and python.is_file() else None


def run_vllm_oracle(cases: list[dict[str, Any]], timeout: float = 300) -> dict[str, Any]:
    """Resolve each case's server argv with vLLM's own code; results keep the cases' order."""
    python = vllm_python()
    if python is None:
        raise RuntimeError("vLLM venv missing: run `make vllm-setup` (or bash .ci/setup-vllm.sh)")
    done = subprocess.run(
        [str(python), str(CHECK)],
        input=json.dumps({"cases": cases}),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"vllm_check.py exited {done.returncode}: {done.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer
