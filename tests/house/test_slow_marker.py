"""The `slow` marker derived from the fixtures that declare it (tests/lanes.py: `slow_fixture`), so
`make test-quick` (`-m "not slow ..."`) leaves out every test that starts the expensive thing,
however deep in its fixtures, and keeps the rest."""

from __future__ import annotations

import pytest

from tests.house.collected import collected
from tests.lanes import slow_fixture

# The planted suite runs in-process (a subprocess pytest costs seconds per start).
pytest_plugins = ["pytester"]

PLANTED_CONFTEST = """
import pytest
from tests.lanes import slow_fixture

@pytest.fixture(scope="module")
@slow_fixture
def server():
    return "http://127.0.0.1:1"

@pytest.fixture
def client(server):
    return server

@pytest.fixture
def server_of_another_kind():
    return None
"""

PLANTED_TESTS = """
import pytest

def test_server(server): pass
def test_through_another_fixture(client): pass
def test_a_fixture_that_declares_nothing(server_of_another_kind): pass
@pytest.mark.slow
def test_marked_by_hand(): pass
def test_plain(tmp_path): pass
"""


def _collected(pytester: pytest.Pytester, selection: str) -> list[str]:
    return collected(pytester, "tests.lanes", selection)


def test_the_marker_follows_a_slow_fixture_through_other_fixtures(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(PLANTED_CONFTEST)
    pytester.makepyfile(test_planted=PLANTED_TESTS)
    assert _collected(pytester, "slow") == [
        "test_marked_by_hand",
        "test_server",
        "test_through_another_fixture",
    ]
    assert _collected(pytester, "not slow") == [
        "test_a_fixture_that_declares_nothing",
        "test_plain",
    ]


def test_the_declaration_above_pytest_fixture_is_refused() -> None:
    with pytest.raises(TypeError, match="under @pytest.fixture"):
        slow_fixture(pytest.fixture(lambda: None))
