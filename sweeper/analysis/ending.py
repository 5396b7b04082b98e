"""What a run's last lines say: a summary of what its report flags, one line per kind of finding.

The person watching a sweep reads its last lines, not always its report. So they say what the
report says, in its order of weight: the determinism violations (and the first token each
sampled point drew that the target never draws), points whose recorded verdict is damaged
(missing or no verdict's name: never proven), failed points, points left unproven (or
nothing compared at all: an AR-only run), busy points and the speedups withheld for them, the AR
baseline's drift, impossible speedups (above tau). Each kind is one line: its count, what it
covers, and at most `EXAMPLES` examples, worst first, none of the lines wider than `WIDTH`
(examples are shortened, or left to "N more", to fit; a run directory too long for its line
goes on a line of its own, the one line that may be wider); a point named under one kind is
named by its label only under the next, so nothing is said twice. The full lists are the
report's and `sweeper best`'s, so the last line here is the command that writes the report.
Nothing is said of what is clean. The exit code's meaning comes after these, from the command
(`sweeper.exit_codes`).
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sweeper.analysis.drift import DRIFT_LIMIT, baseline_drift, mark_drift
from sweeper.analysis.impossible import impossible_speedups
from sweeper.analysis.objective import SPEEDUPS
from sweeper.config.labels import point_label_long
from sweeper.proof.verdicts import SEVERITY, VIOLATIONS, standing, verdict_damage
from sweeper.results.rows import is_missing

#: The widest a closing line may be: the default terminal of a wide screen, never wrapped.
WIDTH = 160
#: The most points a line names; the rest are counted ("N more"): the report lists them all.
EXAMPLES = 3
#: The shortest an example's detail is cut to before it is left out.
_MIN_DETAIL = 12
#: What a cut detail keeps for its example to count as read: else fewer examples, each fuller.
_READABLE = 40


@dataclass(frozen=True)
class Finding:
    """One kind of finding: how many points, what they share, and examples (worst first)."""

    kind: str
    count: int
    #: What the count covers, after it: `point(s) (diverged 2, garbled 1)`.
    what: str
    #: (point label, detail) pairs; every one of them, the line shows the first few that fit.
    examples: tuple[tuple[str, str], ...] = ()


def closing_lines(
    points: Iterable[Mapping[str, Any]], *, status: str, planned: int, run_dir: str
) -> list[str]:
    """The run's last lines before its exit code: the status line, one line per finding, and
    the command that writes the report (where every finding is listed)."""
    rows = [dict(p) for p in points]
    lines = [status_line(rows, status, planned)]
    lines += [finding_line(f) for f in findings(rows)]
    return lines + report_lines(run_dir)


def status_line(rows: list[dict[str, Any]], status: str, planned: int) -> str:
    """`complete: 30 ok, 0 failed of 30 points; determinism exact 22, n/a 8`."""
    statuses = Counter(p.get("status") for p in rows)
    counts = ", ".join(f"{v} {n}" for v, n in verdict_counts(rows)) or "-"
    return (
        f"{status}: {statuses['ok']} ok, {statuses['failed']} failed of {planned} points; "
        f"determinism {counts}"
    )


def verdict_counts(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """The ok points per determinism verdict, least to most severe (a recorded value that is
    no verdict counted as `damaged`, last): what a run's status line and its report's header
    count."""
    verdicts = Counter(
        str(v) if standing(v) != "damaged" else "damaged"
        for v in (p.get("determinism") for p in rows if p.get("status") == "ok")
    )
    known = [v for v in SEVERITY if verdicts[v]]
    return [(v, verdicts[v]) for v in [*known, *sorted(set(verdicts) - set(known))]]


def report_lines(run_dir: str) -> list[str]:
    """The command that writes the report, and where else the full lists are: one line, or, when
    that is wider than `WIDTH`, the run directory on a line of its own (the one line here that
    may be wider: it holds the path whole), continuing the command as a shell reads it."""
    quoted = shlex.quote(run_dir)
    line = f"report: sweeper report {quoted}  (every finding; sweeper best ranks the configs)"
    if len(line) <= WIDTH:
        return [line]
    return [
        "report (every finding; sweeper best ranks the configs): sweeper report \\",
        f"  {quoted}",
    ]


def findings(rows: list[dict[str, Any]]) -> list[Finding]:
    """Every kind of finding the rows hold, in order of weight ([] for a clean run)."""
    found = [
        _violations(rows),
        _impossible_tokens(rows),
        _damaged(rows),
        _failed(rows),
        _unproven(rows),
        _nothing_compared(rows),
        _busy(rows),
        _drift(rows),
        _impossible(rows),
    ]
    return [f for f in found if f is not None]


def finding_line(finding: Finding, width: int = WIDTH) -> str:
    """`kind: N what: label (detail); label (detail); 2 more` in `width` characters: as many
    examples (at most `EXAMPLES`) as fit with their details readable (`_READABLE`), else as
    many labels as fit, details cut or left out."""
    head = f"{finding.kind}: {finding.count} {finding.what}"
    labels = list(dict.fromkeys(finding.examples))  # a point's restarts share a label
    fallback = None
    for shown in range(min(EXAMPLES, len(labels)), 0, -1):
        more = len(labels) - shown
        tail = f"; {more} more" if more else ""
        fitted = _fit(labels[:shown], width - len(head) - len(": ") - len(tail))
        if fitted is None:
            continue
        text, readable = fitted
        line = f"{head}: {text}{tail}"
        if readable:
            return line
        fallback = fallback or line
    if fallback:
        return fallback
    return head if len(head) <= width else head[: width - 3] + "..."


def _fit(examples: list[tuple[str, str]], budget: int) -> tuple[str, bool] | None:
    """The examples joined in `budget` characters, the labels whole and the room they leave
    shared among the details, shortest first (a detail that fits whole leaves the rest to the
    others; one cut below `_MIN_DETAIL` is left out), and whether every detail kept
    `_READABLE` characters (or all of it); None when the labels alone do not fit."""
    separators = len("; ") * (len(examples) - 1)
    room = budget - separators - sum(len(label) for label, _ in examples)
    if room < 0:
        return None
    cuts: dict[int, str] = {}
    waiting = sorted(
        (i for i, (_, d) in enumerate(examples) if d), key=lambda i: len(examples[i][1])
    )
    for n, i in enumerate(waiting):
        detail = examples[i][1]
        share = room // (len(waiting) - n) - len(" ()")
        if share >= len(detail):
            cuts[i] = detail
        elif share >= _MIN_DETAIL:
            cuts[i] = detail[: share - 3] + "..."
        else:
            continue
        room -= len(cuts[i]) + len(" ()")
    readable = all(
        i in cuts and (cuts[i] == examples[i][1] or len(cuts[i]) >= _READABLE) for i in waiting
    )
    text = "; ".join(
        f"{label} ({cuts[i]})" if i in cuts else label for i, (label, _) in enumerate(examples)
    )
    return text, readable


def _label(row: Mapping[str, Any], hosts: set[str]) -> str:
    host = f"{row.get('host')} " if len(hosts) > 1 else ""
    return f"{host}{point_label_long(row)}"


def _hosts(rows: list[dict[str, Any]]) -> set[str]:
    return {str(r.get("host")) for r in rows}


def _violations(rows: list[dict[str, Any]]) -> Finding | None:
    bad = [p for p in rows if p.get("status") == "ok" and p.get("determinism") in VIOLATIONS]
    if not bad:
        return None
    order: dict[str, int] = {v: i for i, v in enumerate(SEVERITY)}
    bad.sort(key=lambda p: -order.get(str(p.get("determinism")), len(SEVERITY)))
    counts = Counter(str(p.get("determinism")) for p in bad)
    kinds = ", ".join(f"{v} {n}" for v, n in counts.items())
    hosts = _hosts(rows)
    return Finding(
        "violations",
        len(bad),
        f"point(s) ({kinds})",
        tuple((_label(p, hosts), str(p.get("determinism"))) for p in bad),
    )


def _impossible_tokens(rows: list[dict[str, Any]]) -> Finding | None:
    """The sampled points that drew a token the target never draws, each with the first one's
    evidence (the scored test's: prompt, sample, position, token, rank, the nucleus)."""
    found = [
        p
        for p in rows
        if p.get("status") == "ok" and isinstance(p.get("scored_impossible"), str)
        and p.get("scored_impossible")
    ]  # fmt: skip
    if not found:
        return None
    hosts = _hosts(rows)
    return Finding(
        "impossible tokens",
        len(found),
        "point(s)",
        tuple((_label(p, hosts), str(p["scored_impossible"])) for p in found),
    )


def _damaged(rows: list[dict[str, Any]]) -> Finding | None:
    """The ok points whose recorded verdict is no verdict (`standing`: damaged), each named
    with its id and the value found: a damaged record, never proven."""
    found = [
        p for p in rows if p.get("status") == "ok" and standing(p.get("determinism")) == "damaged"
    ]
    if not found:
        return None
    hosts = _hosts(rows)
    return Finding(
        "damaged verdicts",
        len(found),
        "point(s) whose recorded verdict is damaged (never proven)",
        tuple(
            (_label(p, hosts), f"{p.get('point_id')}: {verdict_damage(p.get('determinism'))}")
            for p in found
        ),
    )


def _failed(rows: list[dict[str, Any]]) -> Finding | None:
    failed = [p for p in rows if p.get("status") == "failed"]
    if not failed:
        return None
    hosts = _hosts(rows)
    return Finding(
        "failed",
        len(failed),
        "point(s)",
        tuple((_label(p, hosts), _text(p.get("reason"))) for p in failed),
    )


def _unproven(rows: list[dict[str, Any]]) -> Finding | None:
    unproven = [p for p in rows if p.get("status") == "ok" and p.get("determinism") == "unproven"]
    if not unproven:
        return None
    # One example per reason first: the reasons are what the user acts on.
    by_reason: dict[str, list[dict[str, Any]]] = {}
    for p in unproven:
        by_reason.setdefault(_text(p.get("unproven_reason")), []).append(p)
    ordered = sorted(by_reason.items(), key=lambda kv: -len(kv[1]))
    firsts = [group[0] for _, group in ordered]
    rest = [p for _, group in ordered for p in group[1:]]
    hosts = _hosts(rows)
    return Finding(
        "unproven",
        len(unproven),
        "point(s) nothing proves right (never feasible)",
        tuple((_label(p, hosts), _text(p.get("unproven_reason"))) for p in [*firsts, *rest]),
    )


def _nothing_compared(rows: list[dict[str, Any]]) -> Finding | None:
    """Every ok point an AR reference (`n/a`): nothing was compared with them, so nothing is
    proven (exit 6), however clean the run looks."""
    ok = [p for p in rows if p.get("status") == "ok"]
    if not ok or any(p.get("determinism") != "n/a" for p in ok):
        return None
    return Finding(
        "nothing compared",
        len(ok),
        "point(s), all AR references (n/a): no speculative config was measured against them "
        "(`only:` or the grid left none)",
    )


def _busy(rows: list[dict[str, Any]]) -> Finding | None:
    ok = [p for p in rows if p.get("status") == "ok"]
    busy = [p for p in ok if p.get("host_busy") is True]
    against = [p for p in ok if p.get("host_busy") is not True and p.get("baseline_busy") is True]
    if not busy and not against:
        return None
    withheld = [
        p
        for p in [*busy, *against]
        if p.get("mode") != "ar" and any(not is_missing(p.get(c)) for c in SPEEDUPS)
    ]
    busy.sort(key=lambda p: -_number(p.get("host_other_cpu")))
    more = f", {len(against)} more against a busy baseline" if against else ""
    hosts = _hosts(rows)
    return Finding(
        "busy host",
        len(busy),
        f"point(s) measured beside other load{more}; {len(withheld)} speedup(s) withheld",
        tuple((_label(p, hosts), _text(p.get("host_busy_reason"))) for p in busy),
    )


def _drift(rows: list[dict[str, Any]]) -> Finding | None:
    drifts = baseline_drift(rows)
    if not drifts:
        return None
    drifts.sort(key=lambda d: -d.max_drift)
    flagged = sum(d.drifted for d in drifts)
    verdict = (
        f"{flagged} beyond {DRIFT_LIMIT:.0%}, their speedups flagged"
        if flagged
        else f"all within {DRIFT_LIMIT:.0%}"
    )
    multi = len({d.host for d in drifts}) > 1
    return Finding(
        "AR baseline drift",
        len(drifts),
        f"baseline(s) measured again, {verdict}",
        tuple(
            (
                f"{d.host + ' ' if multi else ''}{d.label} {d.at}",
                f"{d.max_drift:.1%}: {d.first:.4g} -> {d.last:.4g} tok/s",
            )
            for d in drifts
        ),
    )


def _impossible(rows: list[dict[str, Any]]) -> Finding | None:
    found = impossible_speedups(mark_drift(rows))
    if not found:
        return None
    found.sort(key=lambda f: f.speedup.mean / f.tau, reverse=True)
    by_id = {str(r.get("point_id")): r for r in rows}
    hosts = _hosts(rows)
    causes = {f.brief for f in found}
    shared = f" ({causes.pop()})" if len(causes) == 1 else ""
    return Finding(
        "impossible speedups",
        len(found),
        f"point(s) above tau{shared}, withheld",
        tuple(
            (
                _label(by_id[f.point_ids[0]], hosts),
                f"{f.speedup.mean:.2f}x > tau {f.tau:.2f}" + ("" if shared else f": {f.brief}"),
            )
            for f in found
        ),
    )


def _text(value: Any) -> str:
    """A recorded reason on one line ("" when none was recorded)."""
    return "" if is_missing(value) or not value else " ".join(str(value).split())


def _number(value: Any) -> float:
    return 0.0 if is_missing(value) else float(value)
