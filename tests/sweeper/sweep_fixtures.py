"""Helpers for sweep tests: a spec file and a `python` that runs the fake runtime.

The spec's `runtime.python` is the interpreter the runner launches `-m ddtree_runtime serve`
with; pointing it at a tiny wrapper that drops `-m ddtree_runtime` and runs the fake runtime
instead exercises the real launch path, process service and HTTP end to end.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from tests.sweeper.conftest import FAKE_RUNTIME


def fake_python(tmp: Path, env: dict[str, str] | None = None) -> Path:
    """An executable that behaves like `python -m ddtree_runtime ...` but starts the fake."""
    exports = "".join(f"export {k}='{v}'\n" for k, v in (env or {}).items())
    path = tmp / "fake-python"
    path.write_text(f'#!/bin/sh\n{exports}shift 2\nexec "{sys.executable}" "{FAKE_RUNTIME}" "$@"\n')
    path.chmod(0o755)
    return path


def write_spec(
    tmp: Path,
    port: int,
    *,
    python: Path | str | None,
    name: str = "t",
    topk: tuple[int, ...] = (1, 4),
    temperature: tuple[float, ...] = (0.0,),
    prompts: int = 2,
    max_tokens: int = 8,
    repeats: int = 2,
    ready_timeout_s: float = 30,
    extra_runtime: dict | None = None,
) -> Path:
    spec = {
        "name": name,
        "hosts": ["local"],
        "runtime": {
            "model": "fake" if python else "tiny-random",
            "port": port,
            "ready_timeout_s": ready_timeout_s,
            **({"python": str(python)} if python else {}),
            **(extra_runtime or {}),
        },
        "grid": {
            "budget": [8],
            "topk": list(topk),
            "block_size": [4],
            "cuda_graph": [False],
            "temperature": list(temperature),
        },
        "baseline": True,
        "workload": {
            "api": "completions",
            "prompts": [{"id": f"p{i}", "text": f"prompt number {i}:"} for i in range(prompts)],
            "max_tokens": max_tokens,
            "repeats": repeats,
            "concurrency": [1],
            "warmup": 1,
            "seed": 7,
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
