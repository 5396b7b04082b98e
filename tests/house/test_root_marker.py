"""The `root` marker: derived from the host fixtures at collection (tests/root_marker.py), carried
by hand where a test needs root otherwise (tests/house/root_marks.py), so `pytest -m "not root"`
runs exactly what a machine without root can."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.house.collected import collected
from tests.house.root_marks import unmarked_in_module, unmarked_root_tests

ROOT = Path(__file__).resolve().parents[2]
# The planted suite runs in-process (a subprocess pytest costs seconds per start).
pytest_plugins = ["pytester"]


def test_every_test_that_needs_root_by_its_source_carries_the_marker() -> None:
    assert unmarked_root_tests(ROOT) == []


def test_planted_root_tests_without_the_marker_are_found(tmp_path: Path) -> None:
    path = tmp_path / "test_planted.py"
    path.write_text(
        "import os\nimport pytest\nfrom tests import testhosts, slurm_cluster\n"
        "@pytest.fixture\ndef inner():\n    return testhosts.boot('h', 1)\n"
        "@pytest.fixture\ndef outer(inner):\n    return inner\n"
        "def test_through_fixtures(outer):\n    pass\n"
        "def test_skips_itself():\n    if testhosts.skip_reason():\n        pytest.skip('x')\n"
        "@pytest.mark.skipif(os.geteuid() != 0, reason='root')\ndef test_skipif():\n    pass\n"
        "@pytest.mark.root\ndef test_marked():\n    slurm_cluster.boot_slurm_cluster()\n"
        "@pytest.mark.root\nclass TestMarked:\n    def test_in_class(self, inner):\n        pass\n"
        "@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.root)])\n"
        "def test_param(x):\n    os.geteuid()\n"
        "def test_plain(tmp_path):\n    pass\n"
    )
    assert unmarked_in_module(path, "p.py") == [
        "p.py::test_through_fixtures",
        "p.py::test_skips_itself",
        "p.py::test_skipif",
    ]
    path.write_text(path.read_text() + "pytestmark = [pytest.mark.slow, pytest.mark.root]\n")
    assert unmarked_in_module(path, "p.py") == []


PLANTED_CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def testhost_pair():
    return []

@pytest.fixture
def host_a(testhost_pair):
    return testhost_pair

@pytest.fixture
def slurm_cluster():
    return None
"""

PLANTED_TESTS = """
import pytest

def test_pair(testhost_pair): pass
def test_through_another_fixture(host_a): pass
def test_slurm(slurm_cluster): pass
@pytest.mark.root
def test_marked_by_hand(): pass
def test_plain(tmp_path): pass
"""


def _collected(pytester: pytest.Pytester, selection: str) -> list[str]:
    return collected(pytester, "tests.root_marker", selection)


def test_the_marker_follows_the_host_fixtures_through_other_fixtures(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(PLANTED_CONFTEST)
    pytester.makepyfile(test_planted=PLANTED_TESTS)
    assert _collected(pytester, "root") == [
        "test_marked_by_hand",
        "test_pair",
        "test_slurm",
        "test_through_another_fixture",
    ]
    assert _collected(pytester, "not root") == ["test_plain"]
