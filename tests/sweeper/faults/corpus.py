"""The bad-input and fault corpus of issue 19: the spec cases (`cases.py`) and the results and
run cases here. `test_corpus.py` runs every case in CI; `bench/fault_corpus.py` prints them as
the table of the closing note.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

from sweeper.exit_codes import (
    EXIT_BAD_SPEC,
    EXIT_FAILED,
    EXIT_IO,
    EXIT_LOCKED,
    EXIT_OK,
    EXIT_UNPROVEN,
)
from sweeper.results.lock import run_lock
from tests.sweeper.faults.cases import INPUT_CASES, SPEC_CASES, Case, assert_that
from tests.sweeper.faults.context import (
    DISK_PORT,
    LOAD_PORT,
    MINIMAL,
    Ctx,
    Outcome,
    manifest,
    point_ids,
    sweeper,
)
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

# --- results and run cases ----------------------------------------------------------------------


def _results_is_a_file(ctx: Ctx) -> tuple[str, Outcome]:
    spec = ctx.spec(MINIMAL)
    results = ctx.tmp / "results"
    results.write_text("not a directory")
    return "sweeper run SPEC --results FILE", sweeper("run", str(spec), "--results", str(results))


def _results_read_only(ctx: Ctx) -> tuple[str, Outcome]:
    spec = ctx.spec(MINIMAL)
    results = ctx.tmpfs("64k", read_only=True)
    return "sweeper run SPEC --results RO_DIR", sweeper("run", str(spec), "--results", str(results))


def _locked(ctx: Ctx) -> tuple[str, Outcome]:
    spec = ctx.spec(MINIMAL)
    results = ctx.tmp / "results"
    with run_lock(results / ".t.run.lock"):  # as a first run of the spec holds it
        out = sweeper("run", str(spec), "--results", str(results))
    return "sweeper run SPEC (while another run of SPEC runs)", out


def _disk_full(ctx: Ctx) -> tuple[str, Outcome]:
    """A 6-point sweep into a 400 KiB tmpfs with 260 KiB taken: it fills up mid-run."""
    disk = ctx.tmpfs("400k")
    spec = write_spec(
        ctx.tmp, DISK_PORT, fake_env=fake_runtime_env(ctx.tmp), topk=(1, 4),
        temperature=(0.0, 0.7), prompts=2, repeats=1, max_tokens=4,
    )  # fmt: skip
    (disk / "filler").write_bytes(b"\0" * 260 * 1024)
    out = sweeper("run", str(spec), "--results", str(disk / "results"), "--plain")
    ctx.tmp.joinpath("disk").write_text(str(disk))
    return "sweeper run SPEC --results TMPFS_400K (260K taken)", out


def _after_disk_full(ctx: Ctx, out: Outcome) -> None:
    run_dir = Path(out.stdout.strip().splitlines()[-1])
    before = manifest(run_dir)
    assert_that(before["status"] == "failed" and before["exit_code"] == EXIT_IO, before)
    assert_that("No space left on device" in before["error"], before["error"])
    recorded = len(point_ids(run_dir))
    Path(ctx.tmp.joinpath("disk").read_text(), "filler").unlink()  # space freed
    spec = ctx.tmp / "t.yaml"
    again = sweeper("run", str(spec), "--resume", str(run_dir), "--plain")
    assert_that(again.code == EXIT_OK, again.stderr)
    ids = point_ids(run_dir)
    assert_that(len(ids) == len(set(ids)) == 6, ids)
    assert_that(manifest(run_dir)["status"] == "complete")
    ctx.tmp.joinpath("disk-full.json").write_text(
        json.dumps({"recorded_before": recorded, "after_resume": len(ids), "run": str(run_dir)})
    )


def _report_disk_full(ctx: Ctx) -> tuple[str, Outcome]:
    disk = ctx.tmpfs("256k")
    run_dir = disk / "t" / "run"
    shutil.copytree(ctx.shared.base_run(), run_dir, ignore=shutil.ignore_patterns("*.parquet"))
    (disk / "filler").write_bytes(b"\0" * (256 * 1024 - _used(disk) - 8192))
    return "sweeper report RUN (disk full)", sweeper("report", str(run_dir))


def _used(path: Path) -> int:
    info = os.statvfs(path)
    return (info.f_blocks - info.f_bfree) * info.f_frsize


def _truncate(name: str, verb: tuple[str, ...]) -> Callable[[Ctx], tuple[str, Outcome]]:
    def run(ctx: Ctx) -> tuple[str, Outcome]:
        run_dir = ctx.run_copy()
        path = run_dir / name
        path.write_bytes(path.read_bytes()[:100])
        return f"sweeper {' '.join(verb)} RUN ({name} truncated)", sweeper(*verb, str(run_dir))

    return run


def _views_rebuilt(ctx: Ctx, out: Outcome) -> None:
    run_dir = next((ctx.tmp / "a" / "t").iterdir())
    assert_that(not _broken(run_dir), out.stderr)


def _nothing_written(ctx: Ctx, out: Outcome) -> None:
    """A read command left the damaged run as it was (`sweeper repair` is the writer)."""
    run_dir = next((ctx.tmp / "a" / "t").iterdir())
    assert_that(bool(_broken(run_dir)), "a read command rewrote the views")
    again = sweeper("repair", str(run_dir))
    assert_that(again.code == EXIT_OK and not _broken(run_dir), again.stderr)


def _cut_point_line(ctx: Ctx) -> tuple[str, Outcome]:
    """The first of the run's two points.jsonl lines cut in half (a bad sector, a hand edit)."""
    run_dir = ctx.run_copy()
    lines = (run_dir / "points.jsonl").read_text().splitlines(keepends=True)
    lines[0] = lines[0][: len(lines[0]) // 2] + "\n"
    (run_dir / "points.jsonl").write_text("".join(lines))
    return "sweeper report RUN (a points.jsonl line cut in half)", sweeper("report", str(run_dir))


def _point_kept(ctx: Ctx, out: Outcome) -> None:
    """Report kept both points and wrote nothing into the run; repair restored the line and
    kept the damaged one aside."""
    import pandas as pd

    run_dir = next((ctx.tmp / "a" / "t").iterdir())
    base = ctx.shared.base_run()
    assert_that((run_dir / "points.parquet").read_bytes() == (base / "points.parquet").read_bytes())
    fixed = sweeper("repair", str(run_dir))
    assert_that(fixed.code == EXIT_OK, fixed.stderr)
    assert_that("restored from the views" in fixed.stdout, fixed.stdout)
    assert_that(sorted(point_ids(run_dir)) == sorted(point_ids(base)), point_ids(run_dir))
    assert_that(len(pd.read_parquet(run_dir / "points.parquet")) == 2)
    kept = [json.loads(x) for f in (run_dir / "damaged").iterdir() for x in f.open()]
    assert_that([k["line"] for k in kept] == [1] and kept[0]["file"] == "points.jsonl", kept)


def _read_only_run(ctx: Ctx) -> tuple[str, Outcome]:
    """The run on a read-only mount, its points.parquet truncated before: every read command
    reads it (the views rebuilt in memory); the report goes where -o says."""
    disk = ctx.tmpfs("4m")
    run_dir = disk / "t" / ctx.shared.base_run().name
    shutil.copytree(ctx.shared.base_run(), run_dir)
    (run_dir / "points.parquet").write_bytes((run_dir / "points.parquet").read_bytes()[:100])
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    for verb in (("diagnose", "--dry-run", str(run_dir)), ("compare", str(run_dir), str(run_dir))):
        out = sweeper(*verb)
        assert_that(out.code == EXIT_OK, f"{verb}: {out.stderr}")
    report = ctx.tmp / "report.html"
    return "sweeper report RUN -o FILE (RUN read-only)", sweeper(
        "report", str(run_dir), "-o", str(report)
    )


def _nothing_served(ctx: Ctx) -> tuple[str, Outcome]:
    """`model: no-such-model`: every point fails, no request is recorded. The server must be
    seen to exit (what `best` then says), not outwaited: MINIMAL's 5 s readiness timeout ran
    out first on a busy machine (two test workers), so this run waits up to 120 s for it."""
    spec = ctx.spec(MINIMAL.replace("ready_timeout_s: 5}", "ready_timeout_s: 120}"))
    done = sweeper("run", str(spec), "--results", str(ctx.tmp / "results"), "--plain")
    assert_that(done.code == EXIT_FAILED, done.stderr)
    run_dir = done.stdout.strip().splitlines()[-1]
    ctx.tmp.joinpath("run").write_text(run_dir)
    return "sweeper report RUN (every point failed: no-such-model)", sweeper("report", run_dir)


def _every_reader_answers(ctx: Ctx, out: Outcome) -> None:
    run_dir = ctx.tmp.joinpath("run").read_text()
    for argv, code, line in (
        (("diagnose", run_dir, "--plain"), EXIT_OK, ""),
        (("compare", run_dir, run_dir), EXIT_OK, ""),
        (("best", run_dir), EXIT_FAILED, "failed (failed: server exited"),
    ):
        done = sweeper(*argv)
        assert_that(done.code == code and "Traceback" not in done.stderr, f"{argv}: {done}")
        assert_that(line in done.stdout + done.stderr, f"{argv}: {done.stdout}")
    nightly = sweeper("nightly", str(ctx.tmp / "spec.yaml"), "--results", str(ctx.tmp / "n"))
    assert_that(nightly.code == EXIT_FAILED, f"nightly: {nightly}")
    assert_that("sweep exited 3" in nightly.stdout, nightly.stdout)


def _nothing_measured(ctx: Ctx) -> tuple[str, Outcome]:
    """An open loop too short for one arrival: rate 0.001/s for 0.1 s."""
    load = {"rate": [0.001], "duration_s": 0.1, "grace_s": 1}
    spec = write_spec(
        ctx.tmp, LOAD_PORT, fake_env=fake_runtime_env(ctx.tmp), topk=(4,), prompts=1,
        repeats=1, max_tokens=4, extra_workload={"load": load, "warmup": 0},
    )  # fmt: skip
    out = sweeper("run", str(spec), "--results", str(ctx.tmp / "results"), "--plain")
    return "sweeper run SPEC (load: rate 0.001/s for 0.1 s)", out


def _points_failed_with_reason(ctx: Ctx, out: Outcome) -> None:
    import pandas as pd

    points = pd.read_parquet(Path(out.stdout.strip().splitlines()[-1]) / "points.parquet")
    open_loop = points[points.rate.notna()]  # (the closed loop at concurrency 1 measured)
    assert_that(len(open_loop) == 2 and set(open_loop.status) == {"failed"}, points)
    reasons = list(open_loop.reason)
    assert_that(all(r.startswith("no request completed") for r in reasons), reasons)


def _nothing_proven(ctx: Ctx) -> tuple[str, Outcome]:
    spec = write_spec(
        ctx.tmp, LOAD_PORT, fake_env=fake_runtime_env(ctx.tmp), topk=(4,), prompts=1,
        repeats=1, max_tokens=4, extra={"baseline": False},
    )  # fmt: skip
    out = sweeper("run", str(spec), "--results", str(ctx.tmp / "results"), "--plain")
    return "sweeper run SPEC (baseline: false: nothing compared)", out


def _markup_category(ctx: Ctx) -> tuple[str, Outcome]:
    """Categories that look like rich markup: text from data, never interpreted."""
    run_dir = ctx.run_copy()
    for log in ("points.jsonl", "requests.jsonl"):
        rows = [json.loads(line) for line in (run_dir / log).read_text().splitlines()]
        for n, row in enumerate(rows):
            row["category"] = "[/oops]" if n % 2 else "[red]x[/red]"
        (run_dir / log).write_text("".join(json.dumps(r) + "\n" for r in rows))
    for view in ("points.parquet", "points.csv", "requests.parquet"):
        (run_dir / view).unlink()
    sweeper("repair", str(run_dir))
    return "sweeper diagnose RUN (categories [/oops] and [red]x[/red])", sweeper(
        "diagnose", str(run_dir), "--plain"
    )


def _best_unfinished(ctx: Ctx) -> tuple[str, Outcome]:
    """`best` on a run killed after its first point."""
    run_dir = ctx.run_copy()
    lines = (run_dir / "points.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "points.jsonl").write_text(lines[0])
    for view in ("points.parquet", "points.csv"):
        (run_dir / view).unlink()
    data = manifest(run_dir)
    data.update(status="running", points_done=1)
    (run_dir / "manifest.json").write_text(json.dumps(data))
    return "sweeper best RUN (killed after 1 of 2 points)", sweeper("best", str(run_dir))


def _killed(ctx: Ctx) -> tuple[str, Outcome]:
    """A run whose manifest says running, its sweep lock left by a pid that is gone."""
    run_dir = ctx.run_copy()
    data = manifest(run_dir)
    data["status"] = "running"
    (run_dir / "manifest.json").write_text(json.dumps(data))
    gone = subprocess.Popen(["true"])
    gone.wait()
    (run_dir.parent.parent / ".t.run.lock").write_text(f"{gone.pid}\n")
    return "sweeper ls (a run SIGKILLed: manifest running, lock holder gone)", sweeper(
        "ls", "--results", str(ctx.tmp / "a")
    )


def _broken(run_dir: Path) -> list[str]:
    from sweeper.results.repair import broken_views

    return broken_views(run_dir)


def _repair(ctx: Ctx) -> tuple[str, Outcome]:
    run_dir = ctx.run_copy()
    (run_dir / "points.csv").unlink()
    return "sweeper repair RUN (points.csv deleted)", sweeper("repair", str(run_dir))


def _bad_manifest(ctx: Ctx) -> tuple[str, Outcome]:
    run_dir = ctx.run_copy()
    (run_dir / "manifest.json").write_text('{"sweep": "t", "run_')
    return "sweeper ls (manifest.json truncated)", sweeper("ls", "--results", str(ctx.tmp / "a"))


def _report_empty(ctx: Ctx) -> tuple[str, Outcome]:
    (ctx.tmp / "empty").mkdir()
    return "sweeper report EMPTY_DIR", sweeper("report", str(ctx.tmp / "empty"))


def _other_sweep(ctx: Ctx) -> tuple[str, Outcome]:
    run_a, run_b = ctx.run_copy("a"), ctx.run_copy("b")
    data = manifest(run_b)
    data["spec"]["workload"]["prompts"][0]["text"] = "another prompt"
    (run_b / "manifest.json").write_text(json.dumps(data))
    return "sweeper compare A B (other prompts)", sweeper("compare", str(run_a), str(run_b))


def _extra_flag(ctx: Ctx) -> tuple[str, Outcome]:
    """Run B has a grid flag A lacks, at two values: 4 points where A has 2."""
    run_a, run_b = ctx.run_copy("a"), ctx.run_copy("b")
    for log in ("points.jsonl", "requests.jsonl"):
        rows = [json.loads(line) for line in (run_b / log).read_text().splitlines()]
        out = [
            {**row, "point_id": f"{row['point_id']}-f{v}", "my_flag": v}
            for v in (1, 2)
            for row in rows
        ]
        (run_b / log).write_text("".join(json.dumps(r) + "\n" for r in out))
    for view in ("points.parquet", "points.csv", "requests.parquet"):
        (run_b / view).unlink()  # else repair would bring the old points back from them
    sweeper("repair", str(run_b))
    return "sweeper compare A B (B adds a flag)", sweeper("compare", str(run_a), str(run_b))


def _cron_newline(ctx: Ctx) -> tuple[str, Outcome]:
    # --user: were the check missing, nothing could reach a real crontab (no such user).
    spec = "x\n* * * * * touch PWNED #.yaml"
    out = sweeper("cron", "install", spec, "--user", "sweeper-corpus-nobody")
    return "sweeper cron install $'x\\n* * * * * touch PWNED #.yaml'", out


def _ssh_unresolvable(ctx: Ctx) -> tuple[str, Outcome]:
    spec = ctx.spec(
        "name: t\nhosts:\n  - {name: gpu, address: no-such-host.invalid, user: ops}\n"
        "workload:\n  prompts: [{id: a, text: hi}]\n"
    )
    results = ctx.tmp / "results"
    return "sweeper run SPEC (SSH host does not resolve)", sweeper(
        "run", str(spec), "--results", str(results), "--plain"
    )


def _modes(ctx: Ctx, out: Outcome) -> None:
    """Every file of the shared run has the mode the umask gives (0644 under 022), none
    mkstemp's 0600."""
    from sweeper.results.store import _umask

    base = ctx.shared.base_run()
    modes = {
        str(p.relative_to(base)): stat.S_IMODE(p.stat().st_mode)
        for p in base.rglob("*")
        if p.is_file() and "service" not in p.parts
    }
    assert_that(set(modes.values()) == {0o666 & ~_umask()}, modes)


RESULT_CASES = [
    Case(
        "results_is_a_file",
        "NotADirectoryError, 59-line traceback",
        _results_is_a_file,
        EXIT_IO,
        "error: File exists: ",
    ),
    Case(
        "results_read_only",
        "PermissionError, 112-line traceback",
        _results_read_only,
        EXIT_IO,
        "error: Read-only file system",
        root=True,
    ),
    Case(
        "disk_full_mid_run",
        "156-line traceback, exit 1, manifest left running",
        _disk_full,
        EXIT_IO,
        "error: No space left on device",
        after=_after_disk_full,
        root=True,
    ),
    Case(
        "report_on_full_disk",
        "ENOSPC traceback",
        _report_disk_full,
        EXIT_IO,
        "error: No space left on device",
        root=True,
    ),
    Case(
        "second_run_of_a_spec",
        "both runs started and fought over the port",
        _locked,
        EXIT_LOCKED,
        f"error: another run of sweep 't' (pid {os.getpid()}) is writing to",
    ),
    Case(
        "points_parquet_truncated",
        "report died: ArrowInvalid: Parquet magic bytes not found",
        _truncate("points.parquet", ("report",)),
        EXIT_OK,
        "points.parquet rebuilt in memory from every copy of the records",
        after=_nothing_written,
    ),
    Case(
        "requests_parquet_truncated",
        "diagnose died: ArrowInvalid",
        _truncate("requests.parquet", ("diagnose", "--dry-run")),
        EXIT_OK,
        "requests.parquet rebuilt in memory from every copy of the records",
        after=_nothing_written,
    ),
    Case(
        "repair_rebuilds_views",
        "no way to rebuild the views from the records",
        _repair,
        EXIT_OK,
        "rebuilt points.csv",
        after=_views_rebuilt,
    ),
    Case(
        "points_line_cut_in_half",
        "issue 28 #1: report rebuilt points.parquet from the records, 7 rows -> 6 for good",
        _cut_point_line,
        EXIT_OK,
        "points.jsonl (lost points that points.parquet holds) rebuilt in memory",
        after=_point_kept,
    ),
    Case(
        "read_only_run",
        "issue 28 #17: exit 5 'Operation not permitted: requests.jsonl' (opening wrote)",
        _read_only_run,
        EXIT_OK,
        "report.html",
        root=True,
    ),
    Case(
        "every_point_failed",
        "issue 28 #6: report, diagnose and compare died with KeyError: b'host'; nightly exit 1",
        _nothing_served,
        EXIT_OK,
        "report.html",
        after=_every_reader_answers,
    ),
    Case(
        "repair_not_a_run",
        "issue 28 #18: 'not a run directory' was exit 5 in repair, 2 elsewhere",
        lambda ctx: ("sweeper repair DIR (no manifest)", sweeper("repair", str(ctx.tmp))),
        EXIT_BAD_SPEC,
        "is not a run directory (no manifest.json)",
    ),
    Case(
        "report_out_is_a_directory",
        "issue 28 #18: exit 5 naming a temp file",
        lambda ctx: (
            "sweeper report RUN -o DIR",
            sweeper("report", str(ctx.run_copy()), "-o", str(ctx.tmp)),
        ),
        EXIT_BAD_SPEC,
        "is a directory: give the report's file name",
    ),
    Case(
        "nightly_missing_spec",
        "issue 28 #18: only 'the sweep produced no run directory (exit 2)'",
        lambda ctx: (
            "sweeper nightly MISSING.yaml",
            sweeper("nightly", str(ctx.tmp / "nope.yaml"), "--results", str(ctx.tmp / "r")),
        ),
        EXIT_BAD_SPEC,
        "nope.yaml",
    ),
    Case(
        "nothing_measured",
        "issue 28 #4: ok points with 0 requests, exit 0",
        _nothing_measured,
        EXIT_FAILED,
        "no request completed",
        after=_points_failed_with_reason,
    ),
    Case(
        "speedup_objective_without_baseline",
        "issue 28 #4: every trial 'failed (no speedup)', exit 0",
        lambda ctx: (
            "sweeper validate SPEC (search objective speedup, baseline: false)",
            sweeper(
                "validate",
                str(
                    ctx.spec(
                        "name: t\nbaseline: false\nsearch: {objective: {column: speedup}}\n"
                        "workload:\n  prompts: [{id: a, text: hi}]\n"
                    )
                ),
            ),
        ),
        EXIT_BAD_SPEC,
        "objective speedup divides by the AR baseline",
    ),
    Case(
        "nothing_proven",
        "issue 28 #4: every point unproven, exit 0",
        _nothing_proven,
        EXIT_UNPROVEN,
        "unproven: ",
    ),
    Case(
        "markup_in_a_category",
        "issue 28 #9: MarkupError traceback; [red]x[/red] rendered as colour",
        _markup_category,
        EXIT_OK,
        "[red]x[/red]",
    ),
    Case(
        "best_on_an_unfinished_run",
        "issue 28 #16: 'no feasible config', never saying the run was unfinished",
        _best_unfinished,
        EXIT_FAILED,
        "note: this run is killed, not complete (1 of 2 points recorded)",
    ),
    Case(
        "killed_run_in_ls",
        "issue 28 #16: 'running' in ls forever though its lock's pid is dead",
        _killed,
        EXIT_OK,
        "killed",
    ),
    Case(
        "manifest_truncated",
        "the run vanished from ls ('no runs under DIR')",
        _bad_manifest,
        EXIT_OK,
        "manifest.json is unreadable; its records (points.jsonl) are untouched",
        after=lambda ctx, out: assert_that("bad manifest" in out.stdout, out.stdout),
    ),
    Case(
        "report_empty_directory",
        "exit 0 and a 'missing' report",
        _report_empty,
        EXIT_BAD_SPEC,
        "is not a run directory (no manifest.json)",
    ),
    Case(
        "compare_other_sweeps",
        "other prompts compared silently, called a regression (-15.8%, exit 1)",
        _other_sweep,
        EXIT_BAD_SPEC,
        "are runs of different sweeps (other prompts); --force compares them anyway",
    ),
    Case(
        "compare_extra_flag_column",
        "B's extra flag column left out of the key: '2 points compared' of 4",
        _extra_flag,
        EXIT_OK,
        "6 points compared (2 only in A, 4 only in B)",
    ),
    Case(
        "cron_newline_in_path",
        "a second, valid crontab line; cron list/remove blind to it",
        _cron_newline,
        EXIT_BAD_SPEC,
        "contains a control character ('\\n'): a crontab entry must be one line",
    ),
    Case(
        "ssh_name_does_not_resolve",
        "retried 55 s before failing each point",
        _ssh_unresolvable,
        3,
        "the host name does not resolve",
    ),
    Case(
        "file_modes_follow_umask",
        "manifest, parquet, csv and logs left 0600",
        lambda ctx: (
            "sweeper repair RUN (then stat every file)",
            sweeper("repair", str(ctx.run_copy())),
        ),
        EXIT_OK,
        "nothing was broken",
        after=_modes,
    ),
]

CASES = [*SPEC_CASES, *INPUT_CASES, *RESULT_CASES]


def run_case(case: Case, ctx: Ctx) -> tuple[str, Outcome, str]:
    """Provoke the case, then check what must (not) have happened; (command shown, what it
    did, the line it printed)."""
    command, out = case.run(ctx)
    if case.after is not None and out.code == case.code:
        case.after(ctx, out)
    return command, out, out.line(case.expect)
