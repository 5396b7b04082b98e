"""Every exit code the sweeper's commands end with, in one place, and the code a run's recorded
points earn. `EXIT_CODES` is the one table: `EXIT_MEANINGS` (a run's last line) and the docs' table
(`readme_table`, held to docs/exit-codes.md by a test) are drawn from it, and every command
returns these names, never a number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_SPEC = 2
EXIT_FAILED = 3
EXIT_VIOLATION = 4
EXIT_IO = 5
EXIT_UNPROVEN = 6
EXIT_ENDS_NOT_AS_CLAIMED = 7
EXIT_CHECK_FAILED = 8
EXIT_INTERNAL = 70
EXIT_LOCKED = 75
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class ExitCode:
    """One code: in a few words (a run's last line) and in full (the docs' table)."""

    short: str
    detail: str


#: The table, in the docs' order.
EXIT_CODES: dict[int, ExitCode] = {
    EXIT_OK: ExitCode(
        "all well: every point ok, no violation, something proven",
        "all well (`run`: every point ok, no violation, something proven; its last lines count "
        "the unproven points; `bisect`: the first bad commit is named)",
    ),
    EXIT_REGRESSION: ExitCode("a regression", "a regression (`compare`, `nightly`)"),
    EXIT_BAD_SPEC: ExitCode(
        "bad spec or usage",
        "bad spec or usage: every problem as `file:line: field: message` (also a spec selecting "
        "no points, ids that would collide, a grid past 20,000 combinations)",
    ),
    EXIT_FAILED: ExitCode(
        "a point failed or awaits its scorer (recorded with why)",
        "a point failed (recorded with its reason; the sweep went on), or its samples could "
        "not be scored (its scorer died or did not start: the point is pending, `--resume` "
        "scores them); `bisect`: an end could not be judged (its points did not run: the line "
        "gives the recorded reason)",
    ),
    EXIT_VIOLATION: ExitCode(
        "a determinism violation: a config's output is not the target's",
        "a determinism violation: `shifted`, `impossible-token`, `diverged`, `nondeterministic`, "
        "`garbled`, or near-ties above the AR-vs-AR control (wins over 3)",
    ),
    EXIT_IO: ExitCode(
        "the results or the sweeper's state could not be written or read",
        "the sweeper's own I/O error: results or state cannot be written or read (disk full, a "
        "read-only or unwritable directory, a file where a directory must be, a damaged "
        "`bisect.json`, search state or host lease, any state file that is a FIFO, a link to a "
        "device or past its size cap: the line names the file); a run is marked "
        "`failed` and resumes once fixed",
    ),
    EXIT_UNPROVEN: ExitCode(
        "nothing proven: no point was compared and proven right",
        "nothing proven: every judged point `unproven` (no AR baseline, no seed, no samples; "
        "`run` lists why) and none proven, or nothing compared at all (an AR-only run: its last "
        'lines say so): a speed-only run is not "all well"; `bisect`: the measurements were too '
        "noisy to decide (the line names the noise and the host's load; `--resume` measures "
        "again)",
    ),
    EXIT_ENDS_NOT_AS_CLAIMED: ExitCode(
        "the bisect's ends are not as claimed",
        "`bisect`: the ends are not as claimed (the good end is not good, or the bad end is "
        "measured not bad); the line says how",
    ),
    EXIT_CHECK_FAILED: ExitCode(
        "a host check failed", "`doctor`: a host check failed (its table says which)"
    ),
    EXIT_INTERNAL: ExitCode(
        "a bug in the sweeper",
        "a bug in the sweeper: one line (`internal error: ...`), its traceback kept in a file it "
        "names (`SWEEPER_DEBUG=1` shows it); never 1, which means a regression",
    ),
    EXIT_LOCKED: ExitCode(
        "another run holds the lock or a host's lease",
        "another run of this spec (or nightly job, or bisect of the same question) holds the "
        "lock, or another run holds a host's lease (`run` names it; `--wait-for-hosts` waits "
        "instead); try again later",
    ),
    EXIT_INTERRUPTED: ExitCode("interrupted (resumable)", "interrupted (resumable)"),
}

#: Each code in a few words: what `sweeper run`'s last line says its exit code means.
EXIT_MEANINGS: dict[int, str] = {code: entry.short for code, entry in EXIT_CODES.items()}


def readme_table() -> str:
    """The docs' exit-code table (docs/exit-codes.md), drawn from `EXIT_CODES`."""
    rows = [f"| {code} | {entry.detail} |" for code, entry in EXIT_CODES.items()]
    return "\n".join(["| code | meaning |", "| --- | --- |", *rows])


def exit_line(code: int) -> str:
    """`exit 4: a determinism violation: ...`: a run's last line before its directory."""
    return f"exit {code}: {EXIT_MEANINGS.get(code, 'an unexpected exit')}"


def exit_code_for(points: Mapping[str, Mapping[str, Any]]) -> int:
    """4 if any determinism violation, else 3 if any point failed or awaits a scorer that
    failed (`scored_pending`), else 6 if no point was proven (`proof.verdicts.proven`: left
    unproven, nothing compared: only AR references, `n/a`, or a damaged verdict), else 0."""
    # Imported here: every command imports this module, and the verdicts load pandas.
    from sweeper.proof.verdicts import proven, standing

    rows = list(points.values())
    if any(standing(p.get("determinism")) == "violation" for p in rows):
        return EXIT_VIOLATION
    # A point whose samples its scorer could not score (it died) is left pending: a failure.
    if any(p.get("status") != "ok" or p.get("scored_pending") for p in rows):
        return EXIT_FAILED
    if not any(proven(p.get("determinism")) for p in rows):
        return EXIT_UNPROVEN
    return EXIT_OK
