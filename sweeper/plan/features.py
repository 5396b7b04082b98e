"""Negotiating the request features (`sweeper.config.features`) with the spec's engine: a
feature the engine (or every build of it) would drop is refused when the plan is built, in one
line naming engine, build and parameter (`validate`, `plan` and `run` build the plan); what
depends on the build is noted, and judged again against the build a started server reports
(`step_refusal`, called by the runner before a config measures anything).

The table is the catalog's (`sweeper.catalog.features.FEATURE_TABLE`); this is its one reader.
"""

from __future__ import annotations

from collections.abc import Iterable

from sweeper.catalog.features import FEATURE_TABLE
from sweeper.config import RequestConfig, ServerConfig
from sweeper.config.features import BY_NAME, used
from sweeper.plan.checks import PlanError


def _uses(
    configs: Iterable[tuple[ServerConfig, Iterable[RequestConfig]]],
) -> dict[tuple[str, bool], None]:
    """(feature, speculative) for every feature some request config asks of a server config,
    in first-seen order."""
    seen: dict[tuple[str, bool], None] = {}
    for server, requests in configs:
        for rc in requests:
            for feature, _ in used(rc.feature_values()):
                seen[(feature.name, server.mode == "speculative")] = None
    return seen


def check_features(
    engine: str, configs: Iterable[tuple[ServerConfig, Iterable[RequestConfig]]]
) -> list[str]:
    """Refuse (PlanError, at the feature's spec field) the first feature `engine` would drop
    on any build; return notes for those only some builds honour."""
    notes = []
    for name, speculative in _uses(configs):
        wrong = FEATURE_TABLE.refusal(engine, name, speculative=speculative)
        if wrong is not None:
            raise PlanError(_field(name), wrong)
        condition = FEATURE_TABLE.build_condition(engine, name, speculative=speculative)
        if condition is not None:
            notes.append(f"{condition}: checked against the build each server reports")
    return list(dict.fromkeys(notes))


def step_refusal(
    engine: str, server: ServerConfig, requests: Iterable[RequestConfig], build: str | None
) -> str | None:
    """Why a started server at `build` (as it reports it; None: it reports none) would drop
    a feature its request configs ask, or None: `check_features`' refusals for this build."""
    for name, speculative in _uses([(server, requests)]):
        conditional = FEATURE_TABLE.build_condition(engine, name, speculative=speculative)
        reported = build if build is not None or conditional is None else "(build not reported)"
        wrong = FEATURE_TABLE.refusal(engine, name, speculative=speculative, build=reported)
        if wrong is not None:
            return wrong
    return None


def _field(name: str) -> str:
    """The spec field a feature is set in: a grid axis or a workload field."""
    return ("grid." if BY_NAME[name].kind == "scalar" else "workload.") + name
