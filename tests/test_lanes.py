"""How the suite shares the cores (tests/lanes.py): a group's tests run on one worker, and a test
id's `@` is a group only where loadgroup put it, checked by running pytest-xdist as `make test`
does on planted tests."""

from __future__ import annotations

import re
from pathlib import Path

from tests.lanes import group_of, scope_of, unit_rank
from tests.planted_pytest import run_pytest

GROUPED = """
import pytest

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(3))
def test_grouped(i):
    pass

@pytest.mark.parametrize("i", range(3))
def test_free(i):
    pass
"""


def test_a_group_runs_on_one_worker_across_files(tmp_path: Path) -> None:
    """Two files' tests of one group on one worker, with the `@shared` suffix the scheduler reads
    (pytest 9.2 dropped it silently, pytest-xdist#1386: tests/lanes.py stops such a run)."""
    for name in ("test_one.py", "test_two.py"):
        (tmp_path / name).write_text(GROUPED)
    out = run_pytest(tmp_path, "-v", "-p", "tests.lanes", "-n", "2", "--dist", "loadgroup")
    assert out.returncode == 0, out.stdout + out.stderr
    grouped = re.findall(r"\[(gw\d)\] .*PASSED \S+::test_grouped\[\d\](@\w+)?", out.stdout)
    assert len(grouped) == 6, out.stdout
    assert {suffix for _, suffix in grouped} == {"@shared"}
    assert len({worker for worker, _ in grouped}) == 1, out.stdout


def test_an_at_sign_in_a_parameter_is_no_group() -> None:
    assert group_of("tests/a.py::test[x@y]") is None
    assert group_of("tests/a.py::test@slurm") == "slurm"
    assert group_of("tests/a.py::test[x@y]@slurm") == "slurm"
    assert scope_of("tests/a.py::test[x@y]") == "tests/a.py"
    # A file whose only "@" is in a parameter is a light file, not a heavy one.
    assert unit_rank("tests/a.py", ["tests/a.py::test[x@y]", "tests/a.py::other"]) == (0, 2)
    assert unit_rank("tests/a.py", ["tests/a.py::test@tests/a.py"]) == (1, 1)
    assert unit_rank("slurm", ["tests/b.py::test@slurm"]) == (2, 1)
