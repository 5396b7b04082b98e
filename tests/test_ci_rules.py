"""CI's no-skip rule (tests/ci_rules.py), checked by running pytest on planted skips: under
SWEEPER_CI=1 each kind of skip fails the run with its reason; without it they stay skips."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.planted_pytest import run_pytest

PLANTED = """
import pytest

def test_skips():
    pytest.skip("planted skip")

@pytest.mark.skipif(True, reason="planted skipif")
def test_skipif():
    pass

@pytest.mark.xfail(reason="planted xfail", strict=True)
def test_xfail():
    assert False

def test_ok():
    pass
"""


def _pytest(
    tmp_path: Path, ci: str | None, body: str = PLANTED, *args: str
) -> subprocess.CompletedProcess:
    (tmp_path / "test_planted.py").write_text(body)
    env = {k: v for k, v in os.environ.items() if k != "SWEEPER_CI"}
    if ci is not None:
        env["SWEEPER_CI"] = ci
    return run_pytest(tmp_path, "-q", "-rs", "-p", "tests.ci_rules", *args, env=env)


def test_skips_fail_under_sweeper_ci(tmp_path: Path) -> None:
    out = _pytest(tmp_path, "1")
    assert out.returncode == 1, out.stdout
    assert "SWEEPER_CI=1: a skip is a failure in CI: Skipped: planted skip" in out.stdout
    assert "planted skipif" in out.stdout
    assert "1 failed, 1 passed, 1 xfailed, 1 error" in out.stdout  # the xfail stays an xfail


def test_module_skip_fails_under_sweeper_ci(tmp_path: Path) -> None:
    body = 'import pytest\npytest.skip("planted module skip", allow_module_level=True)\n'
    out = _pytest(tmp_path, "1", body)
    assert out.returncode != 0, out.stdout
    assert "planted module skip" in out.stdout


def test_skips_fail_on_xdist_workers(tmp_path: Path) -> None:
    """`make test` runs the suite on pytest-xdist workers: a skip there, in a test or a whole
    module, still reaches the controller as a failure."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_module.py").write_text(
        'import pytest\npytest.skip("planted module skip", allow_module_level=True)\n'
    )
    out = _pytest(tmp_path, "1", PLANTED, "-n", "2")
    assert out.returncode == 1, out.stdout
    assert "SWEEPER_CI=1: a skip is a failure in CI: Skipped: planted skip" in out.stdout
    assert "SWEEPER_CI=1: a skip is a failure in CI: Skipped: planted module skip" in out.stdout
    assert "1 failed, 1 passed, 1 xfailed, 2 errors" in out.stdout, out.stdout


@pytest.mark.parametrize("ci", [None, "0"])
def test_skips_stay_skips_outside_ci(tmp_path: Path, ci: str | None) -> None:
    out = _pytest(tmp_path, ci)
    assert out.returncode == 0, out.stdout
    assert "1 passed, 2 skipped, 1 xfailed" in out.stdout
