"""Every exit code the sweeper's commands end with, in one place (the README's table), and the
code a run's recorded points earn.

0 all well; 1 a regression (`compare`, `nightly`); 2 bad spec or usage; 3 a point failed; 4 a
determinism violation (wins over 3); 5 the sweeper's own error: its results cannot be written
(disk full, no permission, a file where a directory must be) or read back; 6 nothing proven:
every judged point is `unproven` (no baseline, no samples: a run that measured speed only is not
"all well"); 70 a bug in the sweeper (one line, its traceback in a file; EX_SOFTWARE); 75
another run holds the lock or a host's lease (try again later, EX_TEMPFAIL); 130 interrupted
(resumable). `EXIT_MEANINGS` says each in a few words, as a run's last line does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_SPEC = 2
EXIT_FAILED = 3
EXIT_VIOLATION = 4
EXIT_IO = 5
EXIT_UNPROVEN = 6
EXIT_INTERNAL = 70
EXIT_LOCKED = 75
EXIT_INTERRUPTED = 130

#: Each code in a few words: what `sweeper run`'s last line says its exit code means.
EXIT_MEANINGS: dict[int, str] = {
    EXIT_OK: "all well: every point ok, no violation, something proven",
    EXIT_REGRESSION: "a regression",
    EXIT_BAD_SPEC: "bad spec or usage",
    EXIT_FAILED: "a point failed (recorded with its reason)",
    EXIT_VIOLATION: "a determinism violation: a config's output differs from the AR baseline's",
    EXIT_IO: "the results could not be written or read",
    EXIT_UNPROVEN: "nothing proven: every judged point is unproven",
    EXIT_INTERNAL: "a bug in the sweeper",
    EXIT_LOCKED: "another run holds the lock or a host's lease",
    EXIT_INTERRUPTED: "interrupted (resumable)",
}


def exit_line(code: int) -> str:
    """`exit 4: a determinism violation: ...`: a run's last line before its directory."""
    return f"exit {code}: {EXIT_MEANINGS.get(code, 'an unexpected exit')}"


def exit_code_for(points: Mapping[str, Mapping[str, Any]]) -> int:
    """4 if any determinism violation, else 3 if any point failed, else 6 if points were left
    unproven and none was proven, else 0."""
    # Imported here: every command imports this module, and the verdicts load pandas.
    from sweeper.proof.verdicts import CLEAN_VERDICTS, VIOLATIONS

    rows = list(points.values())
    verdicts = {p.get("determinism") for p in rows}
    if verdicts & VIOLATIONS:
        return EXIT_VIOLATION
    if any(p.get("status") != "ok" for p in rows):
        return EXIT_FAILED
    if "unproven" in verdicts and not verdicts & CLEAN_VERDICTS:
        return EXIT_UNPROVEN
    return EXIT_OK
