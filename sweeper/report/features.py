"""The request features x server configs table: which of their traffic's features a user may
send to each config.

A feature (`config.usage`: sampling, top-p, top-k, and each request feature a request sent) is,
per speculative server config (AR is the reference, never judged): `violated` when a point of
the config that used it has a violation (`verdicts.standing`), with the first evidence (its
request config, the first violating prompt and token, the verdict and why); else `unproven`
when one of those points is not proven, with its why; else `proven` (every point that used it
has a clean verdict); `not swept` when no point of the config used it. Only the features some
point of the run used are rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from sweeper.config.usage import FEATURE_NAMES, features_used
from sweeper.proof.verdicts import VIOLATIONS, standing, verdict_damage

Standing = Literal["proven", "violated", "unproven", "not swept"]
#: The verdict (`verdicts.COLOURS`) whose badge each standing wears.
BADGES: dict[Standing, str] = {
    "proven": "exact",
    "violated": "diverged",
    "unproven": "unproven",
    "not swept": "missing",
}


@dataclass(frozen=True)
class Cell:
    """One feature on one config: how it stands, and the evidence or why ("" when proven or
    not swept)."""

    standing: Standing
    detail: str = ""

    @property
    def badge(self) -> str:
        return BADGES[self.standing]


@dataclass(frozen=True)
class Row:
    feature: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class FeatureTable:
    """The configs (columns, in the points' order) and a row per feature used."""

    configs: tuple[str, ...]
    rows: tuple[Row, ...]


def feature_table(points: pd.DataFrame, requests: pd.DataFrame, config: pd.Series) -> FeatureTable:
    """The table of the view's points (`config`: each point's column name), judged from their
    verdicts and, for the evidence, their requests (`verdict`, `prompt_id`, `divergence_index`
    by `point_id`, in the order recorded)."""
    judged = points["mode"] != "ar"
    by_config: dict[str, list[tuple[dict[str, Any], list[str]]]] = {}
    for row, name in zip(points[judged].to_dict("records"), config[judged], strict=True):
        by_config.setdefault(str(name), []).append((row, features_used(row)))
    configs = tuple(by_config)
    sent = {f for pairs in by_config.values() for _, used in pairs for f in used}
    bad = _first_violations(requests)
    out = [
        Row(
            name,
            tuple(_cell([r for r, used in by_config[c] if name in used], bad) for c in configs),
        )
        for name in FEATURE_NAMES
        if name in sent
    ]
    return FeatureTable(configs, tuple(out))


def _cell(points: list[dict[str, Any]], bad: dict[str, dict[str, Any]]) -> Cell:
    if not points:
        return Cell("not swept")
    violated = [p for p in points if _standing(p) == "violation"]
    if violated:
        return Cell("violated", _evidence(violated[0], bad.get(str(violated[0]["point_id"]))))
    unproven = [p for p in points if _standing(p) != "proven"]
    if unproven:
        return Cell("unproven", f"{_name(unproven[0])}: {_why(unproven[0])}")
    return Cell("proven")


def _standing(point: dict[str, Any]) -> str:
    """A failed point proves nothing; an ok one stands as its verdict does."""
    return standing(point.get("determinism")) if point.get("status") == "ok" else "unjudged"


def _name(point: dict[str, Any]) -> str:
    """A point's request config (the column names its server config)."""
    rid = point.get("request_config_id")
    return rid if isinstance(rid, str) and rid else str(point["point_id"])


def _why(point: dict[str, Any]) -> str:
    """Why a point that used the feature proves nothing about it."""
    if point.get("status") != "ok":
        return f"the point failed: {point.get('reason') or '?'}"
    verdict, reason = point.get("determinism"), point.get("unproven_reason")
    if isinstance(reason, str) and reason:
        return reason
    return verdict_damage(verdict) or str(verdict)


def _evidence(point: dict[str, Any], request: dict[str, Any] | None) -> str:
    """`<request config>, prompt <id>, token <i>: <verdict>[: why]`: the first violating
    request of the point where it has one, else the point's verdict alone (a distribution test
    judges samples, not requests)."""
    where = _name(point)
    verdict = str(point["determinism"])
    if request is not None:
        where += f", prompt {request['prompt_id']}"
        index = request.get("divergence_index")
        if index is not None and index == index and index >= 0:
            where += f", token {int(index)}"
        verdict = str(request["verdict"])
    detail = next(
        (
            str(point[c])
            for c in ("scored_impossible", "sampled_detail", "scored_detail", "unproven_reason")
            if isinstance(point.get(c), str) and point[c]
        ),
        "",
    )
    return f"{where}: {verdict}" + (f" ({detail})" if detail else "")


def _first_violations(requests: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Each point's first violating request, in the order recorded."""
    if requests.empty or not {"verdict", "point_id", "prompt_id"} <= set(requests):
        return {}
    bad = requests[requests["verdict"].astype(str).isin(VIOLATIONS)]
    first = bad.drop_duplicates("point_id")
    return {str(r["point_id"]): r for r in first.to_dict("records")}
