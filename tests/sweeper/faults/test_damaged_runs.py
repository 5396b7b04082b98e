"""Issue 28: every read command against every damaged run ends in its exit code and one line,
never a traceback, and never writes into the run (the cases are `damaged.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lanes import slow_fixture
from tests.sweeper.faults.context import Shared
from tests.sweeper.faults.damaged import (
    CASES,
    COMMANDS,
    WRITERS,
    DamagedRun,
    answers,
    needs_root,
)

#: Exit codes per case, in COMMANDS' order (report, diagnose, compare, best, ls, repair).
#: Compare against a run whose points all failed is a regression (1); best finds no feasible
#: config (3); a run whose manifest is unreadable is no run to diagnose, compare or rank (2);
#: repair cannot rebuild a manifest or a search.json, nor write a read-only run (5), and waits
#: for a live run to end (75).
EXPECTED = {
    "sound": (0, 0, 0, 0, 0, 0),
    "no_requests": (0, 0, 1, 3, 0, 0),
    "points_jsonl_cut": (0, 0, 0, 0, 0, 0),
    "requests_jsonl_cut": (0, 0, 0, 0, 0, 0),
    "points_jsonl_retyped": (0, 0, 0, 0, 0, 0),
    "requests_jsonl_retyped": (0, 0, 0, 0, 0, 0),
    "points_parquet_cut": (0, 0, 0, 0, 0, 0),
    "requests_parquet_cut": (0, 0, 0, 0, 0, 0),
    "manifest_cut": (0, 2, 2, 2, 0, 5),
    "search_state_cut": (0, 0, 0, 0, 0, 5),
    "read_only": (0, 0, 0, 0, 0, 5),
    "live": (0, 0, 0, 0, 0, 75),
    "killed": (0, 0, 0, 0, 0, 0),
}


@pytest.fixture(scope="module")
@slow_fixture  # a sweep of the fake runtime through the CLI; each case then runs six commands
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield Shared(tmp_path_factory.mktemp("damaged-base")).base_run()


def test_every_case_has_its_codes() -> None:
    assert set(EXPECTED) == {case.name for case in CASES}


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.name, marks=[pytest.mark.root] if c.read_only else []) for c in CASES],
)
def test_read_commands_on_a_damaged_run(case: DamagedRun, base: Path, tmp_path: Path) -> None:
    if needs_root(case):
        pytest.skip("needs root to mount a read-only tmpfs (CI runs as root)")
    found = dict(answers(base, tmp_path, case))
    codes = tuple(found[verb].code for verb in COMMANDS)
    assert codes == EXPECTED[case.name], {v: (a.code, a.line) for v, a in found.items()}
    for verb, answer in found.items():
        assert not answer.traceback and answer.line, (verb, answer)
        assert verb in WRITERS or not answer.wrote, (verb, answer)
        assert "Traceback" not in answer.line
    if case.name in ("live", "killed"):
        assert found["ls"].line == f"status: {'running' if case.live else 'killed'}"
    if case.name.endswith("_cut") and "parquet" in case.name or case.name == "points_jsonl_cut":
        assert "rebuilt in memory" in found["report"].line
    if case.name == "points_jsonl_retyped":  # each reader's note names the line and field
        shown = "damaged: points.jsonl line 1: field concurrency: Input should be a valid integer"
        assert all(shown in found[v].line for v in COMMANDS if v not in ("ls", *WRITERS)), found
    if case.name == "manifest_cut":  # the records still report, and it says what is unknown
        assert found["report"].line.startswith("warning: RUN/manifest.json is unreadable"), found
