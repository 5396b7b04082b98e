"""Issue 40's damaged-state corpus, in CI: every state file (lease, bisect, search, manifest,
records, settled verdicts) times every damage kind (`states.py`), each command that reads it
ending in its exit code and one line, never a traceback, never exit 70, never a hang (issue 46:
a FIFO, a link to /dev/zero, a file past every cap); a state file that is not one stops naming
the file (exit 5), and a readable one is read as it is."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sweeper.faults.context import Shared
from tests.sweeper.faults.states import (
    KINDS,
    SETTLED_KINDS,
    STATE_FILES,
    Kind,
    StateFile,
    answers,
)

#: Exit codes per (state file, kind), in the file's commands' order (see `STATE_FILES`).
#: lease.json (run, ls): refused, 5, unless readable (CRLF: a gone run's lease, taken over).
#: bisect.json (bisect --resume): 5, a readable one too (its question was edited, which its
#: directory's name tells); no bisect where its directory is a file (2). search.json (run
#: --resume, repair): 5 unless readable. The study's journal: a torn tail is cut and kept aside
#: (0), a line that is no study record is 5. manifest.json (diagnose, ls, repair): no run to
#: diagnose (2), listed as a bad manifest (0), not rebuildable (5). Records (diagnose, repair):
#: rebuilt from the views with a note (0); a directory, a FIFO, a device link or a file past the
#: cap in their place is said (5; diagnose reads requests from the views only). Settled lines
#: (diagnose, best, repair): a damaged one is named and never applied (0). A run directory that
#: is a file is no run (2).
READABLE = ("crlf", "huge")
#: Something no reader opens for reading: never a file's bytes, always said.
UNSAFE = ("directory", "fifo", "dev_zero", "oversized")
EXPECTED: dict[tuple[str, str], tuple[int, ...]] = {
    **{("lease.json", k.name): (5, 5) for k in KINDS},
    ("lease.json", "crlf"): (0, 0),
    **{("bisect.json", k.name): (5,) for k in KINDS},
    ("bisect.json", "parent_a_file"): (2,),
    **{("search.json", k.name): (0, 0) if k.name in READABLE else (5, 5) for k in KINDS},
    **{("search.optuna.jsonl", k.name): (5, 5) for k in KINDS},
    **{("search.optuna.jsonl", k): (0, 0) for k in ("empty", "truncated", *READABLE)},
    **{("manifest.json", k.name): (0, 0, 0) if k.name in READABLE else (2, 0, 5) for k in KINDS},
    ("manifest.json", "directory"): (2, 0, 2),
    **{(f, k.name): (0, 0) for f in ("points.jsonl", "requests.jsonl") for k in KINDS},
    **{("points.jsonl", k): (5, 5) for k in UNSAFE},
    **{("requests.jsonl", k): (0, 5) for k in UNSAFE},
    **{("settled.jsonl", k.name): (0, 0, 0) for k in [*KINDS, *SETTLED_KINDS]},
    **{("settled.jsonl", k): (5, 5, 5) for k in UNSAFE},
    **{(s.name, "parent_a_file"): (2,) * len(s.commands) for s in STATE_FILES[2:]},
    ("manifest.json", "parent_a_file"): (2, 0, 2),
}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    yield Shared(tmp_path_factory.mktemp("damaged-states"))


def test_every_cell_has_its_codes() -> None:
    assert set(EXPECTED) == {(s.name, k.name) for s in STATE_FILES for k in s.kinds}


@pytest.mark.parametrize(
    ("state", "kind"),
    [pytest.param(s, k, id=f"{s.name}-{k.name}") for s in STATE_FILES for k in s.kinds],
)
def test_a_damaged_state_file(state: StateFile, kind: Kind, shared: Shared, tmp_path: Path) -> None:
    found = answers(state, kind, tmp_path, shared)
    codes = tuple(found[verb].code for verb in state.commands)
    shown = {verb: (a.code, a.line) for verb, a in found.items()}
    assert codes == EXPECTED[(state.name, kind.name)], shown
    for answer in found.values():
        assert not answer.traceback and answer.line and "Traceback" not in answer.line, shown
    if 5 in codes:
        refused = [a.line for a in found.values() if a.code == 5]
        assert all(state.name in line for line in refused), shown
    if kind in SETTLED_KINDS:
        assert found["diagnose"].line.startswith("note: RUN: settled.jsonl line 1: field "), shown
        assert found["repair"].line.startswith("RUN: kept 1 damaged line(s) verbatim"), shown
