"""Print the damaged-run corpus as docs/results.md's table: every read command's exit code and line
on every damaged run (tests/sweeper/faults/damaged.py; the read-only case needs root).

    python bench/damaged_runs.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sweeper.faults.context import Shared  # noqa: E402
from tests.sweeper.faults.damaged import CASES, COMMANDS, answers, needs_root  # noqa: E402


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="damaged-"))
    base = Shared(tmp / "shared").base_run()
    print("| run | " + " | ".join(COMMANDS) + " |")
    print("| --- |" + " --- |" * len(COMMANDS))
    for case in CASES:
        if needs_root(case):
            continue
        found = dict(answers(base, tmp / "cases", case))
        cells = [f"{found[v].code}: {_short(found[v].line, base)}" for v in COMMANDS]
        print(f"| {case.what} | " + " | ".join(cells) + " |")


def _short(line: str, base: Path) -> str:
    """A table cell: the repeated tail of the in-memory note and the base run's id left out."""
    line = line.replace(" from every copy of the records (`sweeper repair RUN` writes them)", "")
    line = line.replace(base.name, "BASE").replace(" (n=1, no interval)", "")
    return line.replace("|", "\\|")


if __name__ == "__main__":
    main()
