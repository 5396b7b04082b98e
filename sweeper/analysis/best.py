"""`best`: the winning speculative server config per load level, its spread and the runner-up.

Pure: point rows in, rankings out. Configs are grouped across restarts by their server columns;
each is scored (`sweeper.analysis.objective`) at one request config. Only `ok` configs rank: an
infeasible one (a determinism violation anywhere, or a missed SLO constraint) never wins, and
is listed apart with its reason. With intervals (2+ restarts) a winner whose interval overlaps
the runner-up's is no winner: the two are `tied` inside the noise. A speedup against an AR
baseline that drifted over the run (`sweeper.analysis.drift`) is withheld, as is an impossible
one (above its tau: `sweeper.analysis.impossible`, marked after the drift so it names it).
A winner measured at a level only on processes switched to it in place (`served_by`: `switch`
on every row there) is not named there until a fresh process (a load) of it is measured there
too: `unconfirmed`, so no switch artefact can crown a config; the runner measures those again
there on a fresh process before it ends (`to_confirm`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sweeper.analysis.drift import DRIFT_COLUMNS, mark_drift
from sweeper.analysis.impossible import IMPOSSIBLE_COLUMNS, mark_impossible
from sweeper.analysis.objective import Score, better, request_config_id, score
from sweeper.config.labels import point_label
from sweeper.proof.calibration import CALIBRATED_COLUMNS
from sweeper.results.records import ServerConfigColumns, extra_config_columns
from sweeper.results.rows import is_missing
from sweeper.spec.search import ConstraintsSpec, ObjectiveSpec

_SERVER_COLUMNS = tuple(c for c in ServerConfigColumns.model_fields if c != "engine")
#: What a load level is ranked by where nobody asked for an objective (the report's answer, the
#: configs the runner confirms): at a closed loop the throughput speedup, at a rate (where
#: throughput is the offered rate) the E2E one, among configs meeting the SLO.
CLOSED = ObjectiveSpec(column="speedup")
OPEN = ObjectiveSpec(column="e2e_speedup")
#: Where every speedup at a level is withheld, the answer names the fastest proven config.
CLOSED_FALLBACK = ObjectiveSpec(column="output_tok_s")
OPEN_FALLBACK = ObjectiveSpec(column="e2e_p50", goal="minimize")
#: How a row's server came to serve it (`load` | `switch`), from the manifest's identities
#: (`IdentityRecord.served_by`); absent: a load.
SERVED_BY = "served_by"


@dataclass(frozen=True)
class Entry:
    """One server config at one load level."""

    label: str
    key: tuple[Any, ...]
    score: Score


@dataclass(frozen=True)
class Ranking:
    """One load level (request config): feasible configs best first, the others apart."""

    at: str
    ranked: tuple[Entry, ...]
    excluded: tuple[Entry, ...]
    #: The AR baseline's score there, for reference (None without one).
    baseline: Score | None = None
    #: Whether the winner's interval overlaps the runner-up's (no winner inside the noise).
    tied: bool = False
    #: Whether the first was measured here only after in-place switches (no fresh process yet).
    unconfirmed: bool = False

    @property
    def winner(self) -> Entry | None:
        named = self.ranked and not self.tied and not self.unconfirmed
        return self.ranked[0] if named else None

    @property
    def runner_up(self) -> Entry | None:
        return self.ranked[1] if len(self.ranked) > 1 else None


@dataclass
class _Group:
    label: str
    mode: str
    rows: list[Mapping[str, Any]] = field(default_factory=list)


def served_rows(
    rows: Iterable[Mapping[str, Any]], identities: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The rows with how their server came to serve them (`SERVED_BY`), from the manifest's
    identities (`host/label` -> its record, as written); a row without one: a load."""
    out = []
    for row in rows:
        identity = identities.get(f"{row.get('host')}/{row.get('server_label')}") or {}
        out.append({**row, SERVED_BY: identity.get(SERVED_BY) or "load"})
    return out


def config_key(row: Mapping[str, Any], extra: Sequence[str]) -> tuple[Any, ...]:
    """What makes two point rows the same server (any restart)."""
    return tuple(None if is_missing(row.get(c)) else row.get(c) for c in (*_SERVER_COLUMNS, *extra))


def marked(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows as they are judged: a drifted baseline marked, then impossible speedups (whose
    cause reads the drift)."""
    return mark_impossible(mark_drift(rows))


def group_configs(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[Any, ...], _Group]:
    """Point rows by server config, restarts together, in first-seen order."""
    rows = list(rows)
    extra = extra_config_columns({c for r in rows for c in r})
    derived = ("restart", SERVED_BY, *DRIFT_COLUMNS, *IMPOSSIBLE_COLUMNS, *CALIBRATED_COLUMNS)
    extra = [c for c in extra if c not in derived]
    groups: dict[tuple[Any, ...], _Group] = {}
    for row in rows:
        key = config_key(row, sorted(extra))
        group = groups.setdefault(key, _Group(point_label(row), str(row.get("mode"))))
        group.rows.append(row)
    return groups


def rank(
    rows: Iterable[Mapping[str, Any]],
    objective: ObjectiveSpec,
    constraints: ConstraintsSpec | None = None,
    at: Sequence[str] | None = None,
) -> list[Ranking]:
    """One ranking per request config (`at`: only those), in the order the rows name them."""
    rows = marked(rows)
    levels = list(dict.fromkeys(request_config_id(r) for r in rows))
    if at:
        unknown = [a for a in at if a not in levels]
        if unknown:
            raise ValueError(
                f"no points at {', '.join(unknown)} (measured: {', '.join(levels) or 'none'})"
            )
        levels = [a for a in levels if a in at]
    groups = group_configs(rows)
    rankings = []
    for level in levels:
        entries, baseline = [], None
        for key, group in groups.items():
            if not any(request_config_id(r) == level for r in group.rows):
                continue
            scored = score(group.rows, objective, constraints, at=[level])
            if group.mode == "ar":
                baseline = scored
            else:
                entries.append(Entry(group.label, key, scored))
        ok = [e for e in entries if e.score.state == "ok" and e.score.value is not None]
        ok = _sorted(ok, objective.goal)
        tied = len(ok) > 1 and _inside_noise(ok[0].score, ok[1].score)
        first = [r for r in groups[ok[0].key].rows if request_config_id(r) == level] if ok else []
        unconfirmed = bool(first) and all(r.get(SERVED_BY) == "switch" for r in first)
        others = tuple(e for e in entries if e not in ok)
        rankings.append(Ranking(level, tuple(ok), others, baseline, tied, unconfirmed))
    return rankings


def level_ranking(
    rows: Sequence[Mapping[str, Any]],
    level: str,
    constraints: ConstraintsSpec | None = None,
    *,
    fallback: bool = False,
) -> Ranking:
    """One host's load level ranked as the report's answer ranks it (`CLOSED`, or at a rate
    `OPEN` held to `constraints`, the spec's SLO); `fallback`: by the fastest proven config's
    measure instead (`CLOSED_FALLBACK`, `OPEN_FALLBACK`)."""
    here = next(r for r in rows if request_config_id(r) == level)
    opened = not is_missing(here.get("rate"))
    objective = (OPEN_FALLBACK if fallback else OPEN) if opened else CLOSED
    objective = CLOSED_FALLBACK if fallback and not opened else objective
    (ranking,) = rank(rows, objective, constraints if opened else None, [level])
    return ranking


def to_confirm(
    rows: Sequence[Mapping[str, Any]], constraints: ConstraintsSpec | None = None
) -> dict[str, tuple[str, ...]]:
    """The `server_config_id`s of one host's configs the answer would name at some load level
    (its winner, or where every speedup is withheld the fastest proven config) but that were
    measured there only after in-place switches (`Ranking.unconfirmed`), each with those
    levels, in level order: what a fresh process must measure again before it is named. Only
    the levels it is named at: elsewhere no answer rests on its switched figures."""
    groups = group_configs(marked(rows))
    out: dict[str, tuple[str, ...]] = {}
    for level in dict.fromkeys(request_config_id(r) for r in rows):
        ranking = level_ranking(rows, level, constraints)
        if not ranking.ranked:
            ranking = level_ranking(rows, level, constraints, fallback=True)
        if ranking.unconfirmed:
            config_id = str(groups[ranking.ranked[0].key].rows[0]["server_config_id"])
            out[config_id] = (*out.get(config_id, ()), level)
    return out


def _sorted(entries: list[Entry], goal: str) -> list[Entry]:
    sign = -1.0 if goal == "maximize" else 1.0
    return sorted(entries, key=lambda e: sign * (e.score.value or 0.0))


def _inside_noise(first: Score, second: Score) -> bool:
    if first.interval is None or second.interval is None:
        return False
    return first.interval.overlaps(second.interval)


def best_of(
    rows: Iterable[Mapping[str, Any]],
    objective: ObjectiveSpec,
    constraints: ConstraintsSpec | None = None,
) -> tuple[str, Score] | None:
    """The best feasible speculative config under the objective as a whole (its `at` request
    configs averaged), the search's answer; None when no config is feasible."""
    found: tuple[str, Score] | None = None
    for group in group_configs(marked(rows)).values():
        if group.mode == "ar":
            continue
        scored = score(group.rows, objective, constraints)
        if scored.state != "ok" or scored.value is None:
            continue
        if found is None or better(scored.value, found[1].value or 0.0, objective.goal):
            found = (group.label, scored)
    return found
