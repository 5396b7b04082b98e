"""The runtime bundle: reproducible content hash; deployed once, atomically, and runnable.

Packing runs everywhere; deploying needs the root-only test hosts.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from sweeper.hosts.ssh import SSHHost
from sweeper.services.bundle import deploy, pack_runtime, release_dir
from sweeper.services.runtime_package import runtime_package_dir


def _fake_package(root: Path) -> Path:
    package = root / "ddtree_runtime"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("VERSION = '0.1.0'\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"junk")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    return package


def test_pack_is_reproducible_and_content_addressed(tmp_path: Path) -> None:
    package = _fake_package(tmp_path)
    first = pack_runtime(package)
    assert pack_runtime(package).sha256 == first.sha256  # same content, same bytes
    (package / "__init__.py").touch()  # a new mtime alone changes nothing
    assert pack_runtime(package).sha256 == first.sha256
    (package / "__init__.py").write_text("VERSION = '0.1.1'\n")
    assert pack_runtime(package).sha256 != first.sha256
    with tarfile.open(fileobj=io.BytesIO(first.data)) as tar:
        names = tar.getnames()
    assert names == [
        "ddtree_runtime/__init__.py",
        "ddtree_runtime/sub/__init__.py",
        "pyproject.toml",
    ]


def test_real_runtime_bundle_holds_the_package() -> None:
    bundle = pack_runtime()
    with tarfile.open(fileobj=io.BytesIO(bundle.data)) as tar:
        names = set(tar.getnames())
    assert "ddtree_runtime/__init__.py" in names and "pyproject.toml" in names
    assert not any("__pycache__" in n for n in names)
    assert len(bundle.name) == 16 and bundle.sha256.startswith(bundle.name)
    assert runtime_package_dir().name == "ddtree_runtime"


def test_deploy_uploads_once_and_the_host_python_runs_it(host_a: SSHHost, tmp_path: Path) -> None:
    package = _fake_package(tmp_path)
    (package / "__init__.py").write_text(f"VERSION = {str(tmp_path)!r}\n")  # unique per test run
    bundle = pack_runtime(package)
    root = "/opt/sweeper-bundle-test"
    first = deploy(host_a, root, bundle)
    assert first.uploaded and first.path == release_dir(root, bundle)
    assert host_a.read_file(f"{first.path}/BUNDLE_SHA256").decode().strip() == bundle.sha256
    mtime = host_a.run(["stat", "-c", "%Y.%i", f"{first.path}/ddtree_runtime/__init__.py"]).stdout
    second = deploy(host_a, root, bundle)
    assert not second.uploaded  # present already: nothing sent
    assert (
        host_a.run(["stat", "-c", "%Y.%i", f"{first.path}/ddtree_runtime/__init__.py"]).stdout
        == mtime
    )
    # nothing half-written left beside the release
    assert host_a.run(["ls", "-A", f"{root}/releases"]).stdout.split() == [bundle.name]
    ran = host_a.run(
        ["python3", "-c", "import ddtree_runtime as r; print(r.__file__, r.VERSION)"],
        env={"PYTHONPATH": first.path},
    )
    assert ran.stdout.split() == [f"{first.path}/ddtree_runtime/__init__.py", str(tmp_path)]
