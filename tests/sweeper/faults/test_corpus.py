"""Issue 19's corpus, in CI: every bad input and fault ends with its exit code and one clear
line (never a traceback), and loses nothing (`after`). The cases are in `corpus.py`;
`bench/fault_corpus.py` prints the same runs as a table."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lanes import slow_fixture
from tests.sweeper.faults.cases import Case
from tests.sweeper.faults.context import Ctx, Shared
from tests.sweeper.faults.corpus import CASES, run_case


@pytest.fixture(scope="module")
@slow_fixture  # a sweep of the fake runtime through the CLI; every case runs the CLI as a process
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    yield Shared(tmp_path_factory.mktemp("fault-corpus"))


def test_corpus_covers_the_issue() -> None:
    assert len(CASES) >= 25
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, id=case.name, marks=[pytest.mark.root] if case.root else [])
        for case in CASES
    ],
)
def test_fault_ends_in_one_line_and_its_code(case: Case, shared: Shared, tmp_path: Path) -> None:
    if case.root and os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs (CI runs as root)")
    with Ctx(tmp_path, shared).stack as stack:
        ctx = Ctx(tmp_path, shared, stack)
        command, out, line = run_case(case, ctx)
    assert out.code == case.code, f"{command}: exit {out.code}\n{out.stderr}"
    assert case.expect in line, f"{command}: {line!r}\n{out.stderr}"
    assert "Traceback" not in out.stderr, out.stderr
