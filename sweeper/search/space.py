"""The search space: the plan's speculative server configs of one host, as trials can name
them (their params), with the points each one measures."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from sweeper.plan import HostPlan, Point, Step


def params_key(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A hashable, order-free key of a config's params (True and 1 kept apart)."""
    return tuple(sorted((k, (type(v).__name__, v)) for k, v in params.items()))


@dataclass(frozen=True)
class Space:
    """One host's candidates (speculative configs, first restart), its AR baselines (one per
    round) and its AR drift checks (`repeats.baseline_every`), each in plan order."""

    host: HostPlan
    candidates: tuple[Step, ...]
    baselines: tuple[Step, ...]
    checks: tuple[Step, ...] = ()

    @classmethod
    def of(cls, host: HostPlan) -> Space:
        steps = host.steps
        speculative = [s for s in steps if s.server_config.mode != "ar"]
        candidates = tuple(s for s in speculative if s.server_config.restart == 0)
        # The plan numbers its checks after its rounds: restarts K, K+1, ... (`_restarted`).
        rounds = 1 + max((s.server_config.restart for s in speculative), default=0)
        ar = [s for s in steps if s.server_config.mode == "ar"]
        baselines = tuple(s for s in ar if s.server_config.restart < rounds)
        checks = tuple(s for s in ar if s.server_config.restart >= rounds)
        return cls(host, candidates, baselines, checks)

    def check_rounds(self) -> list[list[Step]]:
        """The drift checks grouped as the plan runs them: one group per check (every AR
        baseline measured again under one restart number), in order."""
        groups: dict[int, list[Step]] = {}
        for step in self.checks:
            groups.setdefault(step.server_config.restart, []).append(step)
        return [groups[k] for k in sorted(groups)]

    def axes(self) -> dict[str, list[Any]]:
        """Each param with the values the candidates take, in plan order (constant ones too)."""
        axes: dict[str, list[Any]] = {}
        for step in self.candidates:
            for key, value in step.server_config.params.items():
                values = axes.setdefault(key, [])
                if not any(type(v) is type(value) and v == value for v in values):
                    values.append(value)
        return axes

    def by_params(self) -> dict[tuple[tuple[str, Any], ...], Step]:
        return {params_key(s.server_config.params): s for s in self.candidates}

    def restarts_of(self, step: Step) -> list[Step]:
        """Every restart of a candidate the plan holds (`repeats.restarts`), first one first."""
        key = params_key(step.server_config.params)
        return [
            s
            for s in self.host.steps
            if s.server_config.mode == step.server_config.mode
            and params_key(s.server_config.params) == key
        ]

    def points(self, step: Step, length: int = 1) -> list[Point]:
        """The points a step measures: the plan's own, or for a restart the plan does not hold
        (halving's rungs) the first restart's, compared with the same AR baseline points;
        `length` times the workload's measurement each."""
        points = list(self.host.points())
        planned = [p for p in points if p.server_config.id == step.server_config.id]
        if planned:
            return [replace(p, length=length) for p in planned] if length != 1 else planned
        key = params_key(step.server_config.params)
        baseline = {
            p.request_config.id: p.baseline_point_id
            for p in points
            if p.server_config.restart == 0 and params_key(p.server_config.params) == key
        }
        rungs = [
            Point(self.host.name, step.server_config, rc, baseline.get(rc.id), length=length)
            for rc in step.request_configs
        ]
        return self.host.carrying(rungs)
