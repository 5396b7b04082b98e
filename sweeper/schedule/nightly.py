"""The nightly job: lock, log, run the sweep, report, compare with the last finished run, prune.

The sweep runs as `python -m sweeper.cli run SPEC --results DIR --plain` in a subprocess, so the
job depends only on that command's contract (its last stdout line is the run directory; exit
codes 0 / 3 / 4), not on the engine's internals. Everything goes to a log file; stdout gets one
line only when something needs a person, since cron mails whatever a job prints.

Exit codes: 0 all well; 1 a regression against the previous finished run (slower beyond noise,
a new failure, determinism newly broken) or a new change point of the history that is one (a
step or drift beyond the config's noise, a verdict change: `sweeper.analysis.changepoints`;
with `--bisect` the first step or verdict change is bisected over its commit range); otherwise
the sweep's own non-zero code (3 failed points, 4 determinism violation, 2 bad spec); 5 the run
could not be written into the history (`sweeper.analysis.history`: its line says why); 75
another nightly run of this spec holds the lock (`sweeper.exit_codes`), or another run held a
host's lease for longer than `HOST_WAIT_S`.
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sweeper.analysis.changepoints import ChangePoint, change_points, tonight
from sweeper.analysis.compare import compare_loaded
from sweeper.analysis.history import record_finished
from sweeper.bisect.nightly import bisect_change, bisect_regression
from sweeper.diagnosis.compare import with_diagnosis
from sweeper.exit_codes import EXIT_INTERNAL, EXIT_IO, EXIT_LOCKED, EXIT_REGRESSION
from sweeper.report.assemble import build_view
from sweeper.report.history_note import TRENDS_PAGE, HistoryNote, history_note
from sweeper.report.render import write_report
from sweeper.report.trends import trends_page
from sweeper.results.history import HistoryError, default_url, history_frame, shown
from sweeper.results.lock import LockBusy, run_lock
from sweeper.results.reader import Run, previous_finished, prune, read_run
from sweeper.results.repair import repaired

#: Seconds the nightly sweep waits for a host another run leases (a person's sweep that ran
#: late) before it gives up with that run's name (exit 75, mailed by cron).
HOST_WAIT_S = 3 * 3600


@dataclass
class NightlyPaths:
    """Where one spec's nightly job keeps its lock and its log."""

    lock: Path
    log: Path


def paths_for(spec: Path, results: Path) -> NightlyPaths:
    """Lock and log paths, unique per spec file (two specs may share a name)."""
    key = hashlib.sha256(str(spec.resolve()).encode()).hexdigest()[:8]
    stem = f"nightly-{spec.stem}-{key}"
    return NightlyPaths(results / f".{stem}.lock", results / f"{stem}.log")


def _logger(log_path: Path) -> logging.Logger:
    log = logging.getLogger(f"sweeper.schedule.nightly.{log_path}")
    log.setLevel(logging.INFO)
    log.propagate = False
    if not log.handlers:
        handler = logging.FileHandler(log_path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(message)s"))
        log.addHandler(handler)
    return log


def run_sweep(spec: Path, results: Path, log: logging.Logger) -> tuple[int, Path | None, str]:
    """Run `sweeper run` in a subprocess, logging its output; returns (exit code, run dir,
    its last line: the run directory, or what stopped it)."""
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(spec), "--results", str(results)]
    argv += ["--plain", "--wait-for-hosts", str(HOST_WAIT_S)]
    log.info("running: %s", " ".join(argv))
    last = ""
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.info("run| %s", line.rstrip())
            if line.strip():
                last = line.strip()
    run_dir = Path(last) if last and Path(last).is_dir() else None
    log.info("sweep exited %d; run dir %s", proc.returncode, run_dir)
    return proc.returncode, run_dir, last


def nightly(spec: Path, results: Path, keep: int, threshold: float, bisect: bool = False) -> int:
    """The whole job; returns the process exit code (see module docstring)."""
    results.mkdir(parents=True, exist_ok=True)
    paths = paths_for(spec, results)
    log = _logger(paths.log)
    try:
        with run_lock(paths.lock) as held:
            if held.recovered_from:
                log.info("recovered the lock left by dead pid %d", held.recovered_from)
            return _locked_job(spec, results, keep, threshold, log, bisect)
    except LockBusy as busy:
        log.info("skipped: %s", busy)
        print(f"sweeper nightly: skipped, {busy}")
        return EXIT_LOCKED


def _locked_job(
    spec: Path,
    results: Path,
    keep: int,
    threshold: float,
    log: logging.Logger,
    bisect: bool = False,
) -> int:
    code, run_dir, last = run_sweep(spec, results, log)
    if run_dir is None:
        print(f"sweeper nightly: the sweep produced no run directory (exit {code}): {last}")
        return code or EXIT_INTERNAL
    previous = previous_finished(run_dir)
    run = repaired(read_run(run_dir))  # read once: compared, then reported
    comparison = None
    if previous is not None:
        comparison = with_diagnosis(
            compare_loaded(repaired(read_run(previous)), run, threshold), run
        )
        log.info("compared with %s: %s", previous.name, comparison.summary)
    else:
        log.info("no previous finished run to compare with")
    found = None
    if bisect and previous is not None and comparison is not None and comparison.regressed:
        found = bisect_regression(spec, results, previous, run_dir, comparison, threshold, log)
    # Recorded again (idempotent) before any pruning: a run leaves the disk only once it is
    # history, whether or not its own `sweeper run` could write it.
    recorded = record_finished(default_url(results), run)
    changes: list[ChangePoint] = []
    note: HistoryNote | None = None
    unread = None  # the history, once written, could not be read back: no change points judged
    if recorded and recorded[0]:
        try:
            changes, note = _history(default_url(results), run, results / TRENDS_PAGE, log)
        except HistoryError as exc:
            unread = f"history not read for change points: {exc}"
            print(f"sweeper nightly: {unread}")
    report = write_report(build_view(run), run_dir / "report.html", comparison, found, history=note)
    run.close()
    log.info("report: %s", report)
    if recorded is not None:
        log.info("%s", recorded[1])
        if not recorded[0]:
            print(f"sweeper nightly: {recorded[1]}")
    for gone in prune(run_dir.parent, keep, protect=run_dir):
        log.info("pruned %s", gone)
    if comparison is not None and comparison.regressed:
        names = "; ".join(
            f"{r.label}: {', '.join([*r.flags, *([r.diagnosis] if r.diagnosis else [])])}"
            for r in comparison.regressions
        )
        said = f"; {found}" if found else ""
        print(f"sweeper nightly: REGRESSION in {run_dir}: {names}{said} (report {report})")
        return EXIT_REGRESSION
    if changes:
        walked = [c for c in changes if c.kind != "drift"][:1] if bisect else []
        said = "".join(f"; {bisect_change(spec, results, c, log)}" for c in walked)
        names = "; ".join(c.describe() for c in changes)
        print(f"sweeper nightly: CHANGE POINT in {run_dir}: {names}{said} (report {report})")
        return EXIT_REGRESSION
    if code != 0:
        print(f"sweeper nightly: sweep exited {code}; see {report}")
    unrecorded = recorded is not None and not recorded[0]
    return code or (EXIT_IO if unrecorded or unread else 0)


def _history(
    url: str, run: Run, page: Path, log: logging.Logger
) -> tuple[list[ChangePoint], HistoryNote | None]:
    """The history's new regressions with tonight's run in it (`changepoints.tonight`), and
    the report's history section; the trends page of the whole history is written to `page`.
    HistoryError when the history cannot be read: the nightly says so and fails."""
    assert run.manifest is not None  # recorded: its manifest was read
    history = history_frame(url)
    found = tonight(history, run.manifest.sweep, run.manifest.run_id)
    for change in found:
        log.info("change point: %s", change.describe())
    page.write_text(trends_page(history, change_points(history), shown(url)))
    return found, history_note(url, run, page)
