"""Where the runtime's source is: the `ddtree_runtime` package a run deploys and proves.

Beside the services that deploy it (the bundle) and the workers that pack it, below every engine
adapter: locating the package and hashing its source need no engine. The controller never
imports `ddtree_runtime` (it may be a patched copy, and torch is not the controller's); it finds
and reads the package's files.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path


def runtime_package_dir(package: str | Path | None = None) -> Path:
    """The `ddtree_runtime` package directory: the one inside `package` (a spec's
    `runtime.package`, a patched copy), else the installed one, located without importing it
    (the controller never imports `ddtree_runtime`). The one place either is looked up: the
    manifest's source hash, the bundle deployed to hosts and the run command all ask here."""
    if package is not None:
        return Path(package) / "ddtree_runtime"
    found = importlib.util.find_spec("ddtree_runtime")
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError("the ddtree_runtime package is not installed next to sweeper")
    return Path(next(iter(found.submodule_search_locations)))


def runtime_source_hash(package_dir: Path | None = None) -> str:
    """sha256 over the runtime package's .py files (sorted relative path + NUL + bytes + NUL)
    of `package_dir`, else of the installed package; "" when none is installed."""
    if package_dir is None:
        try:
            package_dir = runtime_package_dir()
        except FileNotFoundError:
            return ""
    digest = hashlib.sha256()
    files = sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)
    for path in files:
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
