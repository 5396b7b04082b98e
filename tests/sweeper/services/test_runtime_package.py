"""`runtime.package`: a patched copy of the runtime as THE runtime of a run. Locally it is what
`python -m ddtree_runtime` imports, remotely the bundle, and the manifest names its source hash,
so the identity gate holds for it, and still fails when another runtime answers."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sweeper.services.runtime_package import runtime_package_dir, runtime_source_hash
from sweeper.spec import SpecError, load_spec
from sweeper.workers.backends import open_backend, runtime_bundle
from tests.sweeper.planted import plant_fault
from tests.sweeper.sweep_fixtures import shim_files, write_spec


def _write_package(root: Path, marker: str) -> Path:
    """A directory holding a `ddtree_runtime` package (the fake behind the shim), made
    distinct by `marker` so two copies hash differently."""
    for name, text in shim_files().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "ddtree_runtime" / "variant.py").write_text(f"MARKER = {marker!r}\n")
    return root


def _spec(tmp: Path, port: int, package: str, env: dict[str, str]) -> Path:
    path = write_spec(tmp, port, fake_env=env, topk=(1,), prompts=1, repeats=1, max_tokens=4)
    data = yaml.safe_load(path.read_text())
    data["runtime"]["package"] = package
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run(spec: Path, results: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(spec), "--results", str(results)]
    done = subprocess.run([*argv, "--plain"], capture_output=True, text=True, timeout=180)
    return done, Path(done.stdout.strip().splitlines()[-1])


def test_the_package_is_resolved_against_the_spec_and_must_hold_a_runtime(tmp_path: Path) -> None:
    _write_package(tmp_path / "patched", "a")
    path = _spec(tmp_path, 8000, "patched", {})
    assert load_spec(path).runtime.package == str((tmp_path / "patched").resolve())
    bad = _spec(tmp_path, 8000, "nowhere", {})
    with pytest.raises(SpecError) as caught:
        load_spec(bad)
    issue = caught.value.issues[0]
    assert issue.line is not None and "holds no ddtree_runtime package" in issue.message
    data = yaml.safe_load(path.read_text())
    data["runtime"] |= {"engine": "vllm", "preset": "vllm-ngram"}
    data["grid"].pop("topk")
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match="package is the bundled runtime's"):
        load_spec(path)


def test_a_patched_copy_is_the_bundle_and_the_local_import(tmp_path: Path) -> None:
    # The real runtime, copied and patched the way the issue plants a fault.
    package = str(plant_fault(tmp_path / "patched", "pad_visible"))
    copy = Path(package) / "ddtree_runtime"
    installed = runtime_package_dir()

    bundle = runtime_bundle(package)
    assert bundle.sha256 != runtime_bundle().sha256
    with tarfile.open(fileobj=io.BytesIO(bundle.data)) as tar:
        member = tar.extractfile("ddtree_runtime/algo/mask.py")
        assert member is not None and b'{"pad_visible"}' in member.read()
    assert runtime_source_hash(copy) != runtime_source_hash(installed)

    spec_path = _spec(tmp_path, 8000, package, {})
    backend = open_backend(load_spec(spec_path).hosts[0], load_spec(spec_path), tmp_path / "s")
    assert backend.workdir == package and backend.service_env == {"PYTHONPATH": package}
    # `python -m` from that working directory, with that path, imports the copy.
    probe = subprocess.run(
        [sys.executable, "-c", "import ddtree_runtime.algo.mask as m; print(m._FAULTS)"],
        cwd=package,
        env={"PYTHONPATH": package, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "{'pad_visible'}"


@pytest.mark.slow
def test_the_manifest_names_the_package_and_the_identity_gate_holds_for_it(
    tmp_path: Path, port: int
) -> None:
    package = _write_package(tmp_path / "patched", "patched")
    spec = _spec(tmp_path, port, str(package), {"FAKE_SOURCE_HASH": "self"})
    done, run_dir = _run(spec, tmp_path / "results")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    own = runtime_source_hash(package / "ddtree_runtime")
    assert manifest["runtime_source_hash"] == own != runtime_source_hash()
    assert {h["reported_source_hash"] for h in manifest["hosts"].values()} == {own}
    assert set(pd.read_parquet(run_dir / "points.parquet")["status"]) == {"ok"}


@pytest.mark.slow
def test_another_runtime_answering_still_fails_the_gate(tmp_path: Path, port: int) -> None:
    package = _write_package(tmp_path / "patched", "patched")
    other = _write_package(tmp_path / "other", "other")
    # The spec's own environment puts another copy first: that one runs, and says so.
    env = {"FAKE_SOURCE_HASH": "self", "PYTHONPATH": str(other), "PYTHONSAFEPATH": "1"}
    spec = _spec(tmp_path, port, str(package), env)
    done, run_dir = _run(spec, tmp_path / "results")
    assert done.returncode == 3, done.stderr
    points = pd.read_parquet(run_dir / "points.parquet")
    assert set(points["status"]) == {"failed"}
    assert points["reason"].str.contains("source hash mismatch").all()
