"""How the suite shares the cores (tests/lanes.py): a group's tests run on one worker, and a test
id's `@` is a group only where loadgroup put it, checked by running pytest-xdist as `make test`
does on planted tests."""

from __future__ import annotations

import re
from pathlib import Path

from tests.lanes import QUIET_IDS_OPTION, group_of, scope_of, unit_rank
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


QUIET_AND_NOT = """
import pytest

@pytest.mark.quiet
@pytest.mark.parametrize("i", range(2))
def test_timed(i):
    pass

def test_free():
    pass
"""


def test_the_quiet_lane_runs_what_the_parallel_lane_left_out(tmp_path: Path) -> None:
    """The parallel lane (`-m "not quiet"`, xdist) names the quiet tests it collected; the quiet
    lane runs exactly those, from the file (`pytest @FILE`), as `make test` does."""
    (tmp_path / "test_one.py").write_text(QUIET_AND_NOT)
    ids = tmp_path / "quiet.ids"
    lane = ("-p", "tests.lanes", "-n", "2", "--dist", "loadgroup", "-m", "not quiet")
    parallel = run_pytest(tmp_path, "-v", *lane, QUIET_IDS_OPTION, str(ids))
    assert parallel.returncode == 0, parallel.stdout + parallel.stderr
    assert "PASSED test_one.py::test_free" in parallel.stdout
    assert "test_timed" not in parallel.stdout
    assert ids.read_text().splitlines() == [f"test_one.py::test_timed[{i}]" for i in range(2)]
    quiet = run_pytest(tmp_path, "-v", "-p", "tests.lanes", "-m", "quiet", f"@{ids}")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert re.findall(r"test_timed\[\d\] PASSED", quiet.stdout) == [
        f"test_timed[{i}] PASSED" for i in range(2)
    ]
