"""Helpers for sweep tests: a spec file, and an environment under which the runner's real
launch (`python -m ddtree_runtime serve ...`) starts the fake runtime.

`fake_runtime_env` writes a shim package named `ddtree_runtime` whose `__main__` runs the fake,
and returns the environment that makes Python import it: `PYTHONSAFEPATH=1` (the working
directory is not put first on sys.path) and `PYTHONPATH=<shim>`. The spec carries that
environment as `runtime.env`, so the process's cmdline and environment are exactly what was
launched and the /proc identity proof holds, while the real launch path, process service and
HTTP run end to end.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from sweeper.services.runtime_package import runtime_source_hash
from tests.sweeper.conftest import FAKE_RUNTIME


def shim_files(fake: Path = FAKE_RUNTIME, preamble: str = "") -> dict[str, str]:
    """The shim package's files (relative path -> text); `preamble` runs before the fake."""
    main = (
        "import runpy, sys\n"
        f"{preamble}\n"
        f"sys.argv[0] = {str(fake)!r}\n"
        f"runpy.run_path({str(fake)!r}, run_name='__main__')\n"
    )
    return {"ddtree_runtime/__init__.py": "", "ddtree_runtime/__main__.py": main}


def shim_env(shim_dir: str) -> dict[str, str]:
    """The environment that makes `python -m ddtree_runtime` import the shim in `shim_dir`."""
    return {
        "PYTHONSAFEPATH": "1",
        "PYTHONPATH": shim_dir,
        "FAKE_SOURCE_HASH": runtime_source_hash(),
    }


def fake_runtime_env(tmp: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """Write the shim under `tmp`; the spec environment that starts the fake (plus `env`)."""
    shim = tmp / "fake-shim"
    for name, text in shim_files().items():
        (shim / name).parent.mkdir(parents=True, exist_ok=True)
        (shim / name).write_text(text)
    return {**shim_env(str(shim)), **(env or {})}


def write_spec(
    tmp: Path,
    port: int,
    *,
    fake_env: dict[str, str] | None,
    name: str = "t",
    topk: tuple[int, ...] = (1, 4),
    temperature: tuple[float, ...] = (0.0,),
    prompts: int = 2,
    max_tokens: int = 8,
    repeats: int = 2,
    ready_timeout_s: float = 30,
    extra_runtime: dict | None = None,
    extra_workload: dict | None = None,
    extra: dict | None = None,
) -> Path:
    spec = {
        "name": name,
        "hosts": ["local"],
        "runtime": {
            "model": "fake" if fake_env is not None else "tiny-random",
            "port": port,
            "ready_timeout_s": ready_timeout_s,
            **({"env": fake_env} if fake_env is not None else {}),
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
            **(extra_workload or {}),
        },
        **(extra or {}),
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
