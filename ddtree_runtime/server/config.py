"""The server's effective configuration and its fingerprint.

Pure functions only (no torch): the fingerprint is what the sweeper checks after a restart to prove
which configuration is answering, so it must be reproducible from `/server_info` alone:
`fingerprint == sha256(canonical_json(fingerprint_inputs))`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# Flags that change outputs or speed. host, port, served_model_name and launch_id do not: the same
# weights and settings answer identically whatever they are called or wherever they listen.
FINGERPRINT_KEYS: tuple[str, ...] = (
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

# The whole runtime package (this file lives in its server/ subpackage).
PACKAGE_DIR = Path(__file__).resolve().parents[1]


class ServeConfig(BaseModel):
    """Every effective flag of one server instance (after defaults and device/dtype resolution)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "smollm2-135m"
    served_model_name: str = "smollm2-135m"
    draft: str = "ngram"
    speculative: Literal["ddtree", "none"] = "ddtree"
    # The tree knobs' ranges are checked where the flags are read (`ddtree_runtime.knobs`).
    budget: int = 16
    topk: int = 4
    block_size: int = 8
    cuda_graph: bool = False
    dtype: str = "float32"
    device: str = "cpu"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    max_batch: int = Field(default=8, ge=1)
    max_model_len: int = Field(default=2048, ge=2)
    seed: int = 0
    launch_id: str = ""


def canonical_json(value: Any) -> str:
    """The one JSON spelling that is hashed: sorted keys, no whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def fingerprint_inputs(config: ServeConfig, weights_hash: str, source_hash: str) -> dict[str, Any]:
    """What the fingerprint covers: output/speed-relevant flags, the weights and the code."""
    flags = config.model_dump()
    return {
        "config": {key: flags[key] for key in FINGERPRINT_KEYS},
        "weights_hash": weights_hash,
        "source_hash": source_hash,
    }


def fingerprint(inputs: dict[str, Any]) -> str:
    """sha256 hex of the canonical JSON of `fingerprint_inputs(...)`."""
    return hashlib.sha256(canonical_json(inputs).encode()).hexdigest()


def source_hash(package_dir: Path = PACKAGE_DIR) -> str:
    """sha256 over the package's .py files: sorted relative paths, each with its contents."""
    digest = hashlib.sha256()
    files = sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)
    for path in files:
        relative = path.relative_to(package_dir).as_posix()
        digest.update(relative.encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
