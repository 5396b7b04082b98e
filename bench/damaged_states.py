"""Print the damaged-state corpus as the table of docs/results.md: every state file (a host's
lease, a bisect's and a search's state, a run's manifest and records) damaged each way the
corpus knows, and each command that reads it: its exit code and the line it printed
(tests/sweeper/faults/states.py; `test_states.py` holds the same in CI).

    python bench/damaged_states.py

About a minute on a quiet 2-core machine (one fake-runtime run and one bisect's first save
are made once, then each cell is a command or two in-process).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sweeper.faults.context import Shared  # noqa: E402
from tests.sweeper.faults.states import STATE_FILES, answers  # noqa: E402


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="damaged-states-"))
    # Its own state directory: the corpus's runs never see (nor take) this machine's lease.
    os.environ["SWEEPER_STATE_DIR"] = str(tmp / "machine-state")
    shared = Shared(tmp / "shared")
    started = time.monotonic()
    for state in STATE_FILES:
        print(f"\n**{state.name}** ({state.what}):\n")
        print("| damage | " + " | ".join(f"`{verb}`" for verb in state.commands) + " |")
        print("| --- |" + " --- |" * len(state.commands))
        for kind in state.kinds:
            scratch = tmp / state.name / kind.name
            scratch.mkdir(parents=True)
            found = answers(state, kind, scratch, shared)
            cells = [f"{found[v].code}: {_cell(found[v].line)}" for v in state.commands]
            print(f"| {kind.what} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n({time.monotonic() - started:.0f} s)", file=sys.stderr)


def _cell(line: str) -> str:
    line = line.replace(" from every copy of the records (`sweeper repair RUN` writes them)", "")
    return line.replace("|", "\\|")


if __name__ == "__main__":
    main()
