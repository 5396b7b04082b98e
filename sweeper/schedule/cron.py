"""Crontab entries that run `sweeper nightly SPEC` on a schedule (python-crontab).

Each entry carries the comment tag `sweeper-nightly:<absolute spec path>`, so `install` replaces
rather than duplicates, and `list` / `remove` touch only the sweeper's own lines. The command
is built with `shlex.join` (paths with spaces or quotes stay one argument) and uses absolute
paths and this interpreter, because cron starts jobs with a bare environment in $HOME.
Cron mails whatever a job prints: `sweeper nightly` stays quiet on success and prints one line
on a regression or failure, and exits non-zero so a wrapper can alert too.

Alternative: a systemd timer (for hosts without cron, or to get journald logs)

    # /etc/systemd/system/sweeper-nightly@.service
    [Unit]
    Description=DDTree sweeper nightly run of %I
    [Service]
    Type=oneshot
    WorkingDirectory=/path/to/project
    ExecStart=/path/to/project/.venv/bin/python -m sweeper.cli nightly %I \\
        --results /path/to/results --keep 14

    # /etc/systemd/system/sweeper-nightly@.timer
    [Unit]
    Description=Nightly DDTree sweep of %I
    [Timer]
    OnCalendar=*-*-* 02:00:00
    Persistent=true
    [Install]
    WantedBy=timers.target

    systemctl enable --now "sweeper-nightly@$(systemd-escape /path/to/sweeps/local.yaml).timer"

`Persistent=true` runs a missed night after boot; the lock still prevents overlaps, and
`OnFailure=` on the service can alert on a non-zero exit (regression).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from crontab import CronTab

TAG = "sweeper-nightly:"


@dataclass
class Entry:
    """One sweeper line of a crontab."""

    spec: str
    schedule: str
    command: str
    enabled: bool


def _tab(user: str | None) -> CronTab:
    return CronTab(user=user) if user else CronTab(user=True)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(value: str, what: str) -> str:
    """`value`, refused (ValueError) when it holds a control character: a crontab entry is one
    line, and a newline in a path, quoted or not, would start a second entry of its own."""
    found = _CONTROL.search(value)
    if found:
        raise ValueError(
            f"{what} {value!r} contains a control character ({found.group()!r}): a crontab "
            "entry must be one line"
        )
    return value


def nightly_command(
    spec: Path, results: Path, keep: int, workdir: Path, bisect: bool = False
) -> str:
    """The shell line cron runs (every value checked to be one line, then quoted)."""
    one_line(str(spec.resolve()), "spec path")
    one_line(str(results.resolve()), "results path")
    one_line(str(workdir.resolve()), "working directory")
    argv = [sys.executable, "-m", "sweeper.cli", "nightly", str(spec.resolve())]
    argv += ["--results", str(results.resolve()), "--keep", str(keep)]
    argv += ["--bisect"] if bisect else []
    return f"cd {shlex.quote(str(workdir.resolve()))} && {shlex.join(argv)}"


def install(
    spec: Path,
    schedule: str,
    keep: int,
    results: Path,
    user: str | None = None,
    bisect: bool = False,
) -> Entry:
    """Add (or replace) the nightly entry of `spec`; raise ValueError on a bad schedule."""
    if keep < 1:
        raise ValueError("--keep must be at least 1")
    one_line(str(spec), "spec path")
    one_line(schedule, "schedule")
    if not spec.is_file():
        raise ValueError(f"no spec file at {spec}")
    command = nightly_command(spec, results, keep, Path(os.getcwd()), bisect)
    tab = _tab(user)
    tag = TAG + str(spec.resolve())
    tab.remove_all(comment=tag)  # replace, never duplicate (nothing is written on an error)
    job = tab.new(command=command, comment=tag)
    try:
        job.setall(schedule)
    except (ValueError, KeyError) as exc:
        raise ValueError(f"bad schedule {schedule!r}: {exc}") from None
    if not job.is_valid():
        raise ValueError(f"bad schedule {schedule!r}")
    tab.write()
    return _entry(job)


def _entry(job: object) -> Entry:
    comment = str(getattr(job, "comment", ""))
    return Entry(
        spec=comment[len(TAG) :],
        schedule=str(job.slices),  # type: ignore[attr-defined]
        command=str(job.command),  # type: ignore[attr-defined]
        enabled=bool(job.is_enabled()),  # type: ignore[attr-defined]
    )


def entries(user: str | None = None) -> list[Entry]:
    """The sweeper's entries in the crontab, in file order."""
    return [_entry(job) for job in _tab(user) if str(job.comment).startswith(TAG)]


def remove(spec: Path, user: str | None = None) -> int:
    """Remove the nightly entry of `spec`; returns how many lines went (0 when none)."""
    tag = TAG + one_line(str(spec.resolve()), "spec path")
    tab = _tab(user)
    count = sum(1 for job in tab if job.comment == tag)
    if count:
        tab.remove_all(comment=tag)
        tab.write()
    return count
