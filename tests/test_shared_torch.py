"""The shared torch folder (.ci/shared_torch.py, Makefile `use_shared_torch`): put on a venv's path
only when it holds the pinned torch; a damaged one stops set-up in one line naming it, through
`make` as set-up runs it. A stand-in torch distribution plays the wheel."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIN = "torch==2.13.0"


def _folder(tmp_path: Path, version: str | None) -> Path:
    """A torch folder as `make torch` leaves it (stamp and all), holding `version` or nothing."""
    site = tmp_path / "torch-dir" / "site-packages"
    site.mkdir(parents=True)
    (tmp_path / "torch-dir" / ".installed").touch()
    if version is not None:
        (site / "torch").mkdir()
        (site / "torch" / "__init__.py").write_text(f"__version__ = {version!r}\n")
        info = site / f"torch-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    return site


def _venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv


def _pth(venv: Path) -> list[Path]:
    return list(venv.glob("lib/python*/site-packages/zz-shared-torch.pth"))


def test_the_pinned_torch_is_put_on_the_venvs_path(tmp_path: Path) -> None:
    site, venv = _folder(tmp_path, "2.13.0+cpu"), _venv(tmp_path)
    done = _shared_torch(site, venv, PIN)
    assert done.returncode == 0, done.stderr
    seen = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import torch; print(torch.__file__)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert seen.stdout.strip() == str(site / "torch" / "__init__.py")


@pytest.mark.parametrize("version", [None, "2.14.1"])
def test_a_damaged_folder_stops_set_up_in_one_line(tmp_path: Path, version: str | None) -> None:
    """Its stamp survived but its torch did not (emptied, or another version in its place)."""
    site, venv = _folder(tmp_path, version), _venv(tmp_path)
    done = _shared_torch(site, venv, PIN)
    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    have = "no torch" if version is None else version
    assert said == [
        f"error: {site}: {have} where {PIN} belongs; remove {site.parent} and run make again"
    ], done.stderr
    assert "Traceback" not in done.stderr and _pth(venv) == []


def test_clean_removes_the_folder_only_under_its_lock(tmp_path: Path) -> None:
    """`make clean` while another set-up holds the folder's lock (installing torch there) waits
    for it, as `make torch` does, rather than pull the folder from under it."""
    shutil.copy(ROOT / "Makefile", tmp_path)
    (tmp_path / ".venv-torch" / "site-packages").mkdir(parents=True)
    with open(tmp_path / ".venv-torch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        clean = subprocess.Popen(["make", "-s", "clean"], cwd=tmp_path)
        with pytest.raises(subprocess.TimeoutExpired):
            clean.wait(timeout=0.5)
        assert (tmp_path / ".venv-torch" / "site-packages").is_dir()
    assert clean.wait(timeout=30) == 0
    assert not (tmp_path / ".venv-torch").exists()


def test_a_kept_dist_info_without_its_package_stops_set_up(tmp_path: Path) -> None:
    """torch's metadata at the pinned version, its `torch/` package folder gone."""
    site, venv = _folder(tmp_path, "2.13.0+cpu"), _venv(tmp_path)
    shutil.rmtree(site / "torch")
    done = _shared_torch(site, venv, PIN)
    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert said == [
        f"error: {site / 'torch'}: missing, though torch 2.13.0+cpu's metadata is there; "
        f"remove {site.parent} and run make again"
    ], done.stderr
    assert "Traceback" not in done.stderr and _pth(venv) == []


@pytest.mark.parametrize("installed", [True, False], ids=["installed", "before-installing"])
@pytest.mark.parametrize("pin", ["torch>=2.13", "torch"])
def test_a_pin_that_names_no_one_version_is_refused_in_one_line(
    tmp_path: Path, pin: str, installed: bool
) -> None:
    """The folder is installed once for every venv, so its pin names one version: refused
    before pip installs anything, and where a folder is already there."""
    site, venv = _folder(tmp_path, "2.13.0+cpu"), _venv(tmp_path)
    if not installed:
        shutil.rmtree(site.parent)
    done = _shared_torch(site, venv, pin)
    assert installed or not site.parent.exists()
    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert said == [
        f"error: TORCH={pin}: the shared torch folder takes one version, torch==VERSION"
    ], done.stderr
    assert "Traceback" not in done.stderr and _pth(venv) == []


def _shared_torch(site: Path, venv: Path, pin: str) -> subprocess.CompletedProcess[str]:
    """`make shared-torch` as .ci/setup-vllm.sh runs it: the folder put on `venv`'s path."""
    return subprocess.run(
        ["make", "-s", "shared-torch", f"INTO={venv}", f"TORCH_DIR={site.parent}", f"TORCH={pin}"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
