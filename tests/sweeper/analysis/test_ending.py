"""A run's last lines are a summary: one line per kind of finding, with its count and at most
three examples, none over 160 characters, nothing said twice, the report's command last."""

from __future__ import annotations

from typing import Any

from sweeper.analysis.ending import EXAMPLES, WIDTH, Finding, closing_lines, finding_line
from tests.sweeper.analysis.test_best import _row

RUN_DIR = "results/local-paper/20261204T170942230Z-32b2d1"
BUSY = "other processes used 0.91 of 2 CPUs"


def _point(budget: int | None, conc: int = 1, **extra: Any) -> dict[str, Any]:
    """A point row of config b<budget> k2 bs4 (None: AR) at t0-c<conc>."""
    defaults = {"speedup": None if budget is None else 1.2, "tau": 1.0 if budget is None else 2.0}
    return _row(
        budget,
        10.0,
        conc,
        host="local",
        point_id=f"b{budget or 0}-c{conc}",
        server_label=f"b{budget or 0}-k2-bs4" if budget else "ar-cg0",
        **{**defaults, **extra},
    )


def _lines(rows: list[dict[str, Any]]) -> list[str]:
    return closing_lines(rows, status="complete", planned=len(rows), run_dir=RUN_DIR)


def test_a_clean_run_ends_with_its_counts_and_the_report() -> None:
    rows = [_point(None), *(_point(b) for b in (4, 8, 16))]
    assert _lines(rows) == [
        "complete: 4 ok, 0 failed of 4 points; determinism exact 3, n/a 1",
        f"report: sweeper report {RUN_DIR}  (every finding; sweeper best ranks the configs)",
    ]


def test_every_kind_is_one_line_with_its_count_and_three_examples_at_most() -> None:
    long_reason = "server exited (code 1) before becoming ready: " + "x" * 300
    rows = [
        # the AR baseline, busy: its 12 speculative points' speedups are withheld
        _point(None, host_busy=True, host_other_cpu=0.91, host_busy_reason=BUSY),
        *(_point(b, baseline_busy=True) for b in range(4, 10)),
        *(_point(b, determinism=d) for b, d in [(10, "diverged"), (11, "garbled")]),
        *(_point(b, determinism="diverged", conc=2) for b in (10, 12)),
        *(_point(b, status="failed", reason=long_reason, determinism=None) for b in (13, 14)),
        *(_point(b, determinism="unproven", unproven_reason="no seed") for b in (15, 16)),
        _point(17, determinism="unproven", unproven_reason="no baseline output to compare"),
        # speedups above tau: the busy baseline is their cause, said in a word
        *(_point(b, speedup=3.0 + b / 10, baseline_busy=True) for b in (18, 19, 20, 21, 22)),
    ]
    lines = _lines(rows)
    assert len(lines) == 1 + 5 + 1 and all(len(line) <= WIDTH for line in lines), lines
    status, violations, failed, unproven, busy, impossible, report = lines
    assert status == (
        "complete: 19 ok, 2 failed of 21 points; "
        "determinism exact 11, n/a 1, unproven 3, diverged 3, garbled 1"
    )
    # worst first; a config measured at two loads is two points
    assert violations.startswith("violations: 4 point(s) (garbled 1, diverged 3): ")
    assert ": b11 k2 bs4 T=0 c=1 (garbled); b10 k2 bs4 T=0 c=1 (diverged); " in violations
    assert violations.endswith("; 1 more")
    assert failed.startswith(
        "failed: 2 point(s): b13 k2 bs4 T=0 c=1 (server exited (code 1) before"
    )
    assert failed.endswith("ready:...)")  # the reasons cut to fit, each to its share
    assert failed.count("T=0") == 2
    # one example per reason before a second of any; fewer examples rather than cut reasons
    assert unproven == (
        "unproven: 3 point(s) nothing proves right (never feasible): "
        "b15 k2 bs4 T=0 c=1 (no seed); b17 k2 bs4 T=0 c=1 (no baseline output to compare); 1 more"
    )
    assert busy == (
        "busy host: 1 point(s) measured beside other load, 11 more against a busy baseline; "
        f"11 speedup(s) withheld: AR T=0 c=1 ({BUSY})"
    )
    # one cause for all: said once, in a word (the busy line said why)
    assert impossible == (
        "impossible speedups: 5 point(s) above tau (busy baseline), withheld: "
        "b22 k2 bs4 T=0 c=1 (5.20x > tau 2.00); b21 k2 bs4 T=0 c=1 (5.10x > tau 2.00); 3 more"
    )
    assert BUSY not in impossible  # the busy line said why; not again
    assert (
        report
        == f"report: sweeper report {RUN_DIR}  (every finding; sweeper best ranks the configs)"
    )


def test_details_shrink_then_examples_go_to_the_count_to_fit_the_width() -> None:
    short = Finding("kind", 5, "point(s)", tuple((f"label{i}", "why " * 5) for i in range(5)))
    line = finding_line(short)
    assert len(line) <= WIDTH and line.count("(why") == EXAMPLES and line.endswith("; 2 more")
    long = Finding("kind", 5, "point(s)", tuple((f"label{i}", "why " * 40) for i in range(5)))
    line = finding_line(long)  # fewer examples, each detail cut to a readable length
    assert len(line) == WIDTH and line.count("(why") == 2 and line.endswith("; 3 more")
    assert line.count("...)") == 2
    narrow = finding_line(long, width=40)
    assert len(narrow) <= 40 and narrow.endswith("more") and "why" not in narrow
    repeated = Finding("kind", 2, "point(s)", (("same", "a"), ("same", "a")))  # two restarts
    assert finding_line(repeated) == "kind: 2 point(s): same (a)"


def test_a_sampled_violation_shows_its_first_impossible_token() -> None:
    evidence = (
        "prompt poem sample 3 position 7: token 1234 (rank 57) outside the top-p nucleus "
        "(mass 0.912) by 0.031"
    )
    rows = [
        _point(None),
        _point(4, temperature=0.7, determinism="impossible-token", scored_impossible=evidence),
        _point(8, temperature=0.7, determinism="shifted"),
    ]
    lines = _lines(rows)
    assert lines[1].startswith("violations: 2 point(s) (impossible-token 1, shifted 1): ")
    assert lines[2] == f"impossible tokens: 1 point(s): b4 k2 bs4 T=0.7 c=1 ({evidence})"
    assert all(len(line) <= WIDTH for line in lines)


def test_a_long_run_directory_goes_on_its_own_line() -> None:
    """A long `--results` path: every line fits but the path's own, which holds it whole (quoted
    as a shell reads it) under the command it completes."""
    long_dir = (
        "/srv/" + "a-very-long-results-folder/" * 5 + "local-paper/20261204T170942230Z-32b2d1"
    )
    rows = [_point(None), _point(4, determinism="unproven", unproven_reason="no seed")]
    lines = closing_lines(rows, status="complete", planned=2, run_dir=long_dir)
    assert [line for line in lines if len(line) > WIDTH] == ["  " + long_dir]
    assert lines[-2:] == [
        "report (every finding; sweeper best ranks the configs): sweeper report \\",
        "  " + long_dir,
    ]
