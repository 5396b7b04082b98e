"""Run an SGLang oracle script under the SGLang Python and return its JSON answer.

The SGLang Python is `$SWEEPER_SGLANG_PYTHON`, else `<repo>/.venv-sglang/bin/python` (made by
`make sglang-venv`); for the older release (0.5.15) `$SWEEPER_SGLANG_0515_PYTHON`, else
`<repo>/.venv-sglang-0.5.15/bin/python` (`make sglang-0.5.15-venv`). Without it the oracle tests
skip and say how to get it, unless `SWEEPER_REQUIRE_SGLANG=1` (CI sets it), which turns that
skip into a failure: a CI run must not pass by silently skipping the checks against SGLang's own
code.
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
DEFAULT_PYTHON = REPO / ".venv-sglang" / "bin" / "python"
#: The SGLang release the oracles and tests/engines_oracles/requirements-sglang.txt are written for.
SGLANG_VERSION = "0.5.23"
#: The newest SGLang release published before 2026-07-12 (0.5.15, 2026-07-10; 0.5.15.post1 came
#: on 07-14): the builds of mid-2026, PR #29907's branch among them, have its OpenAI surface.
OLD_SGLANG_VERSION = "0.5.15"
#: Each release's venv (Makefile targets), and the variable that points elsewhere.
BUILDS = {
    SGLANG_VERSION: (".venv-sglang", "SWEEPER_SGLANG_PYTHON", "make sglang-venv"),
    OLD_SGLANG_VERSION: (
        ".venv-sglang-0.5.15",
        "SWEEPER_SGLANG_0515_PYTHON",
        "make sglang-0.5.15-venv",
    ),
}


class OracleError(RuntimeError):
    """The oracle process failed before it could answer (not a rejection it reported)."""


def sglang_python(version: str = SGLANG_VERSION) -> Path | None:
    """The release's Python from its variable if set, else its venv's once its make target
    finished (its stamp file exists: a half-installed venv is absent, not broken); else None."""
    venv, variable, _ = BUILDS[version]
    configured = os.environ.get(variable)
    if configured:
        return Path(configured) if Path(configured).exists() else None
    python = REPO / venv / "bin" / "python"
    if not (python.parents[1] / ".installed").exists():
        return None
    return python


def require_sglang(version: str = SGLANG_VERSION) -> Path:
    """The release's Python, or skip (fail under SWEEPER_REQUIRE_SGLANG=1) with how to get one."""
    python = sglang_python(version)
    if python is not None:
        return python
    venv, variable, make = BUILDS[version]
    reason = (
        f"no SGLang {version} Python at {os.environ.get(variable) or REPO / venv}: "
        f"run `{make}` (or set {variable}) to check against SGLang's own code"
    )
    if os.environ.get("SWEEPER_REQUIRE_SGLANG") == "1":
        pytest.fail(f"SWEEPER_REQUIRE_SGLANG=1 but {reason}", pytrace=False)
    pytest.skip(reason)


#: Keep SGLang off the network and quiet: configs are local, nothing may be downloaded.
ORACLE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}


def run_oracle(
    script: str, payload: dict[str, Any], *, timeout: float = 300, version: str = SGLANG_VERSION
) -> dict[str, Any]:
    """Run tests/engines_oracles/<script> under the release's Python with `payload` as JSON on
    stdin; return its JSON."""
    python = require_sglang(version)
    done = subprocess.run(
        [str(python), str(HERE / script)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **ORACLE_ENV},
        check=False,
    )
    if done.returncode != 0:
        raise OracleError(f"{script} exited {done.returncode}:\n{done.stderr[-4000:]}")
    answer: dict[str, Any] = json.loads(done.stdout)
    if answer.get("sglang_version") != version:
        raise OracleError(f"{script} ran SGLang {answer.get('sglang_version')}, expected {version}")
    return answer


def sglang_resolve(cases: list[dict[str, Any]], *, draft_block_size: int | None = 16) -> list[dict]:
    """sglang_args_oracle.py on `cases` ({"name", "argv", "env"}); one answer per case."""
    payload = {"cases": cases, "draft_block_size": draft_block_size}
    answers: list[dict[str, Any]] = run_oracle("sglang_args_oracle.py", payload)["cases"]
    return answers


def sglang_serve(
    payload: dict[str, Any], version: str = SGLANG_VERSION
) -> dict[str, dict[str, Any]]:
    """sglang_serve_oracle.py on `payload`; its responses by request name."""
    answer = run_oracle("sglang_serve_oracle.py", payload, version=version)
    if answer["scheduler_errors"]:
        raise OracleError(f"scripted scheduler failed: {answer['scheduler_errors']}")
    return {response["name"]: response for response in answer["responses"]}


def sse_events(body: str) -> list[tuple[str | None, Any]]:
    """(event name or None, decoded data) per SSE event of a response body; "[DONE]" stays text."""
    events: list[tuple[str | None, Any]] = []
    for block in body.split("\n\n"):
        name, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                data.append(line.removeprefix("data:").strip())
        if data:
            text = "\n".join(data)
            events.append((name, text if text == "[DONE]" else json.loads(text)))
    return events
