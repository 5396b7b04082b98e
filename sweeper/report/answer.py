"""The report's first section: which config to deploy, per host, temperature and load, and what
stops the others from counting.

The answer is `sweeper best`'s (`sweeper.analysis.best.rank`): at each load level of each host
the best config proven right at every point it has, ranked by its speedup over the AR baseline
(at a closed loop, throughput; at a rate, where throughput is the offered rate, the AR's median
E2E over the config's, among configs meeting the spec's SLO), with its 95% interval over
restarts and its tau. Where every speedup at a level is withheld (a busy host, an impossible
speedup, a drifted baseline measured once), the fastest proven config is named with its speedup
struck through and why: an answer, not a result. What stops a config from counting is the run's
own closing lines (`sweeper.analysis.ending.findings`: violations, failed, unproven, busy,
drift, impossible), each a line linking to the section that shows it; the violations' line
carries the first divergent text. Pure: point rows in, the section's rows out.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from sweeper.analysis.best import (
    CLOSED,
    OPEN,
    Entry,
    Ranking,
    group_configs,
    level_ranking,
    marked,
)
from sweeper.analysis.ending import finding_line, findings
from sweeper.analysis.objective import (
    NO_BASELINE,
    Interval,
    request_config_id,
    withheld_kind,
)
from sweeper.config.labels import load_label
from sweeper.proof.verdicts import worst
from sweeper.results.rows import is_missing
from sweeper.spec.search import ConstraintsSpec

#: The section each kind of finding links to (the template's ids).
ANCHORS = {
    "violations": "outputs",
    "failed": "failed",
    "unproven": "unproven",
    "busy host": "busy",
    "AR baseline drift": "drift",
    "impossible speedups": "impossible",
}
#: How wide a blocker's line is in the page (characters).
BLOCKER_WIDTH = 150


@dataclass(frozen=True)
class Answer:
    """One host at one load level (temperature and load): the config to deploy, or why none."""

    host: str
    at: str
    temperature: str
    load: str
    #: The winner's label ("" when none), its worst verdict at this level and its numbers.
    config: str = ""
    verdict: str = ""
    speedup: str = ""
    interval: str = ""
    tau: str = ""
    tok_s: str = ""
    ar_tok_s: str = ""
    #: Why its speedup is no result ("" when it is one), in a few words and in full: the
    #: fallback's answer.
    withheld: str = ""
    withheld_why: str = ""
    runner_up: str = ""
    #: No winner: why (nothing proven, inside the noise, ...).
    note: str = ""
    #: The winner's points at this level (the summary table's star); none for a fallback.
    point_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Blocker:
    """What stops configs from counting: one kind of finding, a line, and where it is shown."""

    kind: str
    line: str
    anchor: str
    #: Violations: the first divergent text, as `(label, reference, output)`.
    divergence: tuple[str, str, str] | None = None


def answers(
    rows: Iterable[Mapping[str, Any]], constraints: ConstraintsSpec | None = None
) -> list[Answer]:
    """Per host and load level (in the rows' order) the best proven config; `constraints`: the
    SLO the rate levels are held to (the spec's)."""
    rows = list(rows)
    out = []
    for host in dict.fromkeys(str(r.get("host")) for r in rows):
        mine = [r for r in rows if str(r.get("host")) == host]
        groups = {key: g.rows for key, g in group_configs(marked(mine)).items()}
        for level in dict.fromkeys(request_config_id(r) for r in mine):
            here = [r for r in mine if request_config_id(r) == level]
            out.append(_answer(host, level, here, mine, groups, constraints))
    return out


def _answer(
    host: str,
    level: str,
    here: list[Mapping[str, Any]],
    mine: list[Mapping[str, Any]],
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]],
    constraints: ConstraintsSpec | None,
) -> Answer:
    first = here[0]
    opened = not is_missing(first.get("rate"))
    base = Answer(host, level, f"{float(first.get('temperature') or 0):g}", load_label(first))
    ar = [r for r in here if r.get("mode") == "ar" and r.get("status") == "ok"]
    base = replace(base, ar_tok_s=_mean_text(ar, "output_tok_s", 1))
    if not any(r.get("mode") != "ar" for r in here):
        return replace(base, note="no speculative config measured here")
    objective = OPEN if opened else CLOSED
    ranking = level_ranking(mine, level, constraints)
    if ranking.tied:
        a, b = ranking.ranked[0], ranking.ranked[1]
        return replace(
            base,
            note=f"no winner inside the noise: {a.label} {_value(a)} and {b.label} {_value(b)} "
            "overlap",
        )
    if ranking.unconfirmed:
        switched = ranking.ranked[0]
        return replace(
            base,
            note=f"no winner yet: {switched.label} {_value(switched)} was measured only after "
            "in-place switches (the run ended before a fresh process of it was measured; "
            "resume it)",
        )
    if ranking.winner is not None:
        return _named(base, ranking.winner, ranking, groups[ranking.winner.key], level)
    fastest = level_ranking(mine, level, constraints, fallback=True)
    if fastest.winner is not None:
        rows = groups[fastest.winner.key]
        at_level = [r for r in rows if request_config_id(r) == level]
        reasons = [e.score.reason for e in ranking.excluded if e.key == fastest.winner.key]
        why = (reasons[0] if reasons else "").removeprefix("withheld: ") or "no speedup recorded"
        return replace(
            _numbers(base, fastest.winner.label, at_level),
            speedup=_mean_text(at_level, objective.column, 2, "x"),
            withheld=_brief_why(why),
            withheld_why=why,
        )
    return replace(base, note=_nothing(ranking))


def _named(
    base: Answer, winner: Entry, ranking: Ranking, rows: list[Mapping[str, Any]], level: str
) -> Answer:
    at_level = [r for r in rows if request_config_id(r) == level]
    interval = winner.score.interval
    runner = ranking.runner_up
    return replace(
        _numbers(base, winner.label, at_level),
        speedup="" if interval is None else f"{interval.mean:.2f}x",
        interval=_spread(interval),
        runner_up=f"{runner.label} {_value(runner)}" if runner else "",
        point_ids=tuple(str(r.get("point_id")) for r in at_level),
    )


def _numbers(base: Answer, label: str, rows: list[Mapping[str, Any]]) -> Answer:
    verdicts = [str(r.get("determinism")) for r in rows if not is_missing(r.get("determinism"))]
    return replace(
        base,
        config=label,
        verdict=worst(verdicts),
        tau=_mean_text(rows, "tau", 2),
        tok_s=_mean_text(rows, "output_tok_s", 1),
    )


def _brief_why(reason: str) -> str:
    """A withheld or missing speedup's reason (`objective.score`'s) in a few words."""
    if reason.endswith(NO_BASELINE):
        return "no AR baseline"
    kind = withheld_kind(reason)
    if kind == "impossible":
        return "impossible (above tau)"
    if kind == "busy":
        return "busy host"
    return "drifted baseline" if "drifted" in reason else reason


def _nothing(ranking: Ranking) -> str:
    """Why no config is named: the excluded configs per state, each with its first reason."""
    if not ranking.excluded:
        return "no config scored here"
    by_state: dict[str, list[Entry]] = {}
    for entry in ranking.excluded:
        by_state.setdefault(entry.score.state, []).append(entry)
    said = "; ".join(f"{len(e)} {s} ({e[0].score.reason})" for s, e in by_state.items())
    return f"no config proven right here: {said}"


def blockers(
    rows: Iterable[Mapping[str, Any]], divergence: tuple[str, str, str] | None = None
) -> list[Blocker]:
    """What stops configs from counting, one line per kind (the run's closing lines), each
    linked to its section; the violations' line with the first divergent text."""
    out = []
    for finding in findings([dict(r) for r in rows]):
        out.append(
            Blocker(
                finding.kind,
                finding_line(finding, BLOCKER_WIDTH),
                ANCHORS.get(finding.kind, "summary"),
                divergence if finding.kind == "violations" else None,
            )
        )
    return out


def starred(found: Iterable[Answer]) -> set[str]:
    """The points the summary table stars: each named winner's, at its level."""
    return {pid for a in found for pid in a.point_ids}


def _value(entry: Entry) -> str:
    interval = entry.score.interval
    return "" if interval is None else f"{interval.mean:.2f}x{_brief(interval)}"


def _brief(interval: Interval) -> str:
    if interval.low is None or interval.high is None:
        return ""
    return f" [{interval.low:.2f}-{interval.high:.2f}]"


def _spread(interval: Interval | None) -> str:
    if interval is None:
        return ""
    if interval.low is None or interval.high is None:
        return f"{interval.n} restart: no interval"
    return f"95% CI {interval.low:.2f}-{interval.high:.2f}, {interval.n} restarts"


def _mean_text(rows: Iterable[Mapping[str, Any]], column: str, digits: int, unit: str = "") -> str:
    values = [float(r[column]) for r in rows if _finite(r.get(column))]
    return f"{statistics.fmean(values):.{digits}f}{unit}" if values else ""


def _finite(value: Any) -> bool:
    if is_missing(value):
        return False
    try:
        return float(value) == float(value) and abs(float(value)) != float("inf")
    except (TypeError, ValueError):
        return False
