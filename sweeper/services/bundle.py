"""The bundled runtime as a content-hashed artifact, deployed to a host once per content.

`pack_runtime()` writes the `ddtree_runtime` package (its source files, no caches) plus the
project's pyproject.toml into a reproducible tar (sorted names, zero mtimes and owners), so equal
sources give equal bytes and the sha256 of the tar is the release name. `deploy()` uploads it by
SFTP to `<remote root>/releases/<hash>/` only when that directory is absent: the tar is unpacked
into a temporary directory beside it and renamed into place, so a release directory is complete
or absent, never half-written. The host's Python then runs it with PYTHONPATH=<release dir>.
The controller never imports `ddtree_runtime`: the package is located with importlib's finder
(`sweeper.services.runtime_package`).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from sweeper.hosts import Host
from sweeper.services.runtime_package import runtime_package_dir

#: Files of the package that go into the bundle (source and data, never caches).
INCLUDE_SUFFIXES = (".py", ".json", ".txt", ".j2", ".html")
HASH_CHARS = 16


@dataclass(frozen=True)
class Bundle:
    """A packed runtime: the tar bytes and their content hash."""

    data: bytes
    sha256: str

    @property
    def name(self) -> str:
        """Short release name (the first HASH_CHARS hex digits of the sha256)."""
        return self.sha256[:HASH_CHARS]


@dataclass(frozen=True)
class Release:
    """Where a bundle lives on a host, and whether this deploy had to upload it."""

    path: str
    bundle_hash: str
    uploaded: bool


def pack_runtime(package_dir: Path | None = None, pyproject: Path | None = None) -> Bundle:
    """A reproducible tar of the runtime package (+ pyproject.toml when found)."""
    package_dir = package_dir or runtime_package_dir()
    if pyproject is None:
        candidate = package_dir.parent / "pyproject.toml"
        pyproject = candidate if candidate.exists() else None
    files = sorted(
        p
        for p in package_dir.rglob("*")
        if p.is_file() and p.suffix in INCLUDE_SUFFIXES and "__pycache__" not in p.parts
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in files:
            _add(tar, f"{package_dir.name}/{path.relative_to(package_dir).as_posix()}", path)
        if pyproject is not None:
            _add(tar, "pyproject.toml", pyproject)
    data = buffer.getvalue()
    return Bundle(data=data, sha256=hashlib.sha256(data).hexdigest())


def _add(tar: tarfile.TarFile, name: str, path: Path) -> None:
    content = path.read_bytes()
    info = tarfile.TarInfo(name)
    info.size = len(content)
    info.mode = 0o644
    info.mtime = 0  # reproducible: the hash depends on content only
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(content))


def release_dir(remote_root: str, bundle: Bundle) -> str:
    return f"{remote_root.rstrip('/')}/releases/{bundle.name}"


def deploy(host: Host, remote_root: str, bundle: Bundle) -> Release:
    """Make `<remote_root>/releases/<hash>/` hold the bundle; upload only when it is absent."""
    target = release_dir(remote_root, bundle)
    if host.run(["test", "-f", f"{target}/BUNDLE_SHA256"], check=False).ok:
        return Release(path=target, bundle_hash=bundle.sha256, uploaded=False)
    releases = f"{remote_root.rstrip('/')}/releases"
    token = uuid.uuid4().hex[:8]
    tar_path = f"{releases}/.{bundle.name}.{token}.tar"
    staging = f"{releases}/.{bundle.name}.{token}.tmp"
    host.run(["mkdir", "-p", staging])
    try:
        host.put_file(tar_path, bundle.data, mode=0o600)
        host.run(["tar", "-xf", tar_path, "-C", staging, "--no-same-owner"])
        host.put_file(f"{staging}/BUNDLE_SHA256", f"{bundle.sha256}\n".encode())
        # mv -T onto an absent name is one rename(2); when a parallel deploy won the race the
        # target exists already with the same content, and ours is dropped.
        moved = host.run(["mv", "-T", staging, target], check=False)
        if not moved.ok and not host.run(["test", "-f", f"{target}/BUNDLE_SHA256"], check=False).ok:
            raise RuntimeError(f"{host.name}: cannot install release {target}: {moved.stderr}")
    finally:
        host.run(["rm", "-rf", staging, tar_path], check=False)
    return Release(path=target, bundle_hash=bundle.sha256, uploaded=True)
