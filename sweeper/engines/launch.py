"""Building the `Launch` for one server config, and what its /server_info must then report.

The argv is `python -m ddtree_runtime serve <runtime_flags> --host --port --launch-id` (from
`sweeper.plan.serve_argv`); a fresh random launch id per start lets readiness prove that the
instance answering is the one just started. `expected_config` lists the fingerprinted settings
the server must report for this config. `runtime_source_hash` hashes the runtime package's files
the same way the runtime does (sorted relative paths and contents of its .py files), located
without importing it: the controller never imports `ddtree_runtime`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import secrets
from pathlib import Path
from typing import Any

from sweeper.engines.argv import serve_argv
from sweeper.plan import SPECULATIVE_KEYS, ServerConfig
from sweeper.services import Launch
from sweeper.spec import RuntimeSpec, resolve_secrets

#: Keys of /server_info's fingerprint_inputs.config (README's contract).
FINGERPRINTED_KEYS = (
    "model",
    "draft",
    "speculative",
    "budget",
    "topk",
    "block_size",
    "cuda_graph",
    "dtype",
    "device",
    "max_batch",
    "max_model_len",
    "seed",
)


def new_launch_id() -> str:
    return secrets.token_hex(8)


def build_launch(
    server_config: ServerConfig,
    runtime: RuntimeSpec,
    *,
    python: str,
    listen_host: str = "127.0.0.1",
    workdir: str | None = None,
) -> Launch:
    """The command, env and identity of one start of `server_config`."""
    launch_id = new_launch_id()
    argv = serve_argv(
        server_config,
        runtime,
        python=python,
        host=listen_host,
        port=runtime.port,
        launch_id=launch_id,
    )
    return Launch(
        argv=tuple(argv),
        port=runtime.port,
        launch_id=launch_id,
        env=dict(runtime.env),
        secret_env=resolve_secrets(runtime),
        workdir=workdir,
    )


def expected_config(server_config: ServerConfig, runtime: RuntimeSpec) -> dict[str, Any]:
    """Fingerprinted settings /server_info must report for this server config."""
    want: dict[str, Any] = {"model": runtime.model, "draft": runtime.draft}
    for key in ("device", "dtype", "max_batch", "max_model_len"):
        if getattr(runtime, key) is not None:
            want[key] = getattr(runtime, key)
    want["speculative"] = "none" if server_config.engine_mode == "ar" else "ddtree"
    for key, value in server_config.params.items():
        if key in SPECULATIVE_KEYS and server_config.engine_mode == "ar":
            continue
        if key in FINGERPRINTED_KEYS:
            want[key] = value
    return want


def runtime_source_hash(package_dir: Path | None = None) -> str:
    """sha256 over the runtime package's .py files (sorted relative path + NUL + bytes + NUL)."""
    if package_dir is None:
        found = importlib.util.find_spec("ddtree_runtime")
        if found is None or not found.submodule_search_locations:
            return ""
        package_dir = Path(next(iter(found.submodule_search_locations)))
    digest = hashlib.sha256()
    files = sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)
    for path in files:
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
