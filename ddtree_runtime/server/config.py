"""The server's effective configuration and its fingerprint.

Pure functions only (no torch): the fingerprint is what the sweeper checks after a restart or a
switch to prove which configuration is answering, so it must be reproducible from `/server_info`
alone: `fingerprint == sha256(canonical_json(fingerprint_inputs))`. `switched` is the config a
`POST /admin/switch` body asks for, or the one line that refuses it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ddtree_runtime.knobs import TREE_KNOBS, accept_threshold_problem, knob_problem

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
    "accept_threshold",
)

#: What `POST /admin/switch` changes in place: the speculative config. Every other field of the
#: config needs a restart (the weights, where they live, the cache's shape, the base seed) or
#: changes no output (where the server listens, what it is called).
SWITCHABLE: tuple[str, ...] = (
    "speculative",
    "draft",
    "budget",
    "topk",
    "block_size",
    "cuda_graph",
    "accept_threshold",
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
    # Lossy below 1 (`ddtree_runtime.knobs.accept_threshold_problem` says why a value is refused).
    accept_threshold: float = Field(default=1.0, gt=0, le=1)
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


class SwitchRefused(ValueError):
    """A switch body that cannot be taken; `field` is the one it names (None: the body)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _value_problem(name: str, value: object) -> str | None:
    """Why `value` cannot be switchable field `name`'s, in the words the flags are refused in."""
    if name in TREE_KNOBS:
        return knob_problem(name, value)
    if name == "accept_threshold":
        return accept_threshold_problem(value)
    if name == "speculative" and value not in ("ddtree", "none"):
        return f"speculative must be 'ddtree' or 'none', got {value!r}"
    if name == "cuda_graph" and not isinstance(value, bool):
        return f"cuda_graph must be true or false, got {value!r}"
    if name == "draft" and not isinstance(value, str):
        return f"draft must be a string (ngram | dflash:PATH), got {value!r}"
    return None


def switched(config: ServeConfig, changes: object) -> ServeConfig:
    """The config after a switch: `config` with the fields `changes` gives replaced. Refuses
    (SwitchRefused naming the field) a body that is not an object, an unknown field, a field
    that needs a restart, and a value out of range; whether a drafter loads is the build's."""
    if not isinstance(changes, dict):
        raise SwitchRefused("a switch body is a JSON object of config fields")
    for name, value in changes.items():
        if name not in ServeConfig.model_fields:
            raise SwitchRefused(
                f"unknown field {name!r}; a switch takes {', '.join(SWITCHABLE)}", name
            )
        if name not in SWITCHABLE:
            raise SwitchRefused(
                f"{name!r} cannot be switched in place: it needs a restart (a switch takes "
                f"{', '.join(SWITCHABLE)})",
                name,
            )
        problem = _value_problem(name, value)
        if problem is not None:
            raise SwitchRefused(problem, name)
    # Validated again, so a value is stored as a fresh start stores it (threshold 1 as 1.0).
    return ServeConfig.model_validate({**config.model_dump(), **changes})
