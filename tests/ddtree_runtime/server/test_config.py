"""The server config fingerprint: which flags it covers, and that it is reproducible."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import ddtree_runtime
from ddtree_runtime.server.config import (
    FINGERPRINT_KEYS,
    ServeConfig,
    canonical_json,
    fingerprint,
    fingerprint_inputs,
    source_hash,
)

# A different value for every fingerprinted flag.
CHANGED = {
    "model": "tiny-random",
    "draft": "dflash:/models/drafter",
    "speculative": "none",
    "budget": 32,
    "topk": 1,
    "block_size": 4,
    "cuda_graph": True,
    "dtype": "bfloat16",
    "device": "cuda",
    "max_batch": 4,
    "max_model_len": 4096,
    "seed": 7,
    "accept_threshold": 0.5,
}


def fp(config: ServeConfig, weights: str = "w" * 64, source: str = "s" * 64) -> str:
    return fingerprint(fingerprint_inputs(config, weights, source))


def test_every_fingerprint_key_has_a_change_case() -> None:
    assert set(CHANGED) == set(FINGERPRINT_KEYS)


@pytest.mark.parametrize("key", FINGERPRINT_KEYS)
def test_fingerprint_changes_with_each_output_relevant_flag(key: str) -> None:
    base = ServeConfig()
    changed = base.model_copy(update={key: CHANGED[key]})
    assert getattr(changed, key) != getattr(base, key)
    assert fp(changed) != fp(base)


@pytest.mark.parametrize(
    "update",
    [{"host": "0.0.0.0"}, {"port": 9123}, {"served_model_name": "alias"}, {"launch_id": "abc"}],
)
def test_fingerprint_ignores_where_and_what_name(update: dict[str, object]) -> None:
    base = ServeConfig()
    assert fp(base.model_copy(update=update)) == fp(base)


def test_fingerprint_covers_weights_and_source() -> None:
    base = ServeConfig()
    assert fp(base, weights="a" * 64) != fp(base, weights="b" * 64)
    assert fp(base, source="a" * 64) != fp(base, source="b" * 64)


def test_fingerprint_is_sha256_of_canonical_inputs_and_stable() -> None:
    inputs = fingerprint_inputs(ServeConfig(budget=8), "w", "s")
    again = fingerprint_inputs(ServeConfig(budget=8), "w", "s")
    expected = hashlib.sha256(
        json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    assert fingerprint(inputs) == fingerprint(again) == expected
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert set(inputs) == {"config", "weights_hash", "source_hash"}
    assert set(inputs["config"]) == set(FINGERPRINT_KEYS)


def test_source_hash_covers_paths_and_contents(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    (tmp_path / "notes.txt").write_text("not code")
    first = source_hash(tmp_path)
    assert source_hash(tmp_path) == first
    (tmp_path / "notes.txt").write_text("still not code")
    assert source_hash(tmp_path) == first
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")
    changed = source_hash(tmp_path)
    assert changed != first
    (tmp_path / "sub" / "b.py").rename(tmp_path / "b.py")
    assert source_hash(tmp_path) != changed


def test_real_package_source_hash_is_hex() -> None:
    value = source_hash()
    assert len(value) == 64 and int(value, 16) >= 0


def test_real_package_source_hash_follows_the_readme_recipe_over_subpackages() -> None:
    """The sweeper recomputes this without importing the runtime: every .py file under the
    package (subpackages included), sorted by relative posix path, each fed as
    path + NUL + bytes + NUL."""
    package = Path(ddtree_runtime.__file__).parent
    files = sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    names = [p.relative_to(package).as_posix() for p in files]
    assert {"algo/mask.py", "server/config.py", "engine.py"} <= set(names)
    digest = hashlib.sha256()
    for path, name in zip(files, names, strict=True):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    assert source_hash() == digest.hexdigest()
