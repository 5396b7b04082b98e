"""Loads, not restarts: which of a host's server configs share one start of the target's
weights (a load), the others reached by switching the running server in place.

The knobs that need a new process are those the engine's catalog record does not declare
switchable (`ServerCommand.switchable`); configs equal in every other param (and in restart)
form one load group. Only the declared set is known here: a build that refuses a switch at run
time gets a load instead, and the run records why (`sweeper.runner.sweep`).

`repeats.restarts: N` asks for N fresh processes of every config (restart noise): a switch
is no fresh process, so with N > 1 every config is loaded N times, as without switching. A
halving rung's fresh restart (a speculative config started again, restart > 0) is a load too.
A search names its winner from what it measured, so each of its trials is a load (no switch
artefact can steer it). The AR baseline is a config like any other: the runtime switches to
budget 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from sweeper.catalog.records import RECORDS
from sweeper.config import ServerConfig, short_hash
from sweeper.plan.model import Step
from sweeper.spec import Spec


def declared_switchable(spec: Spec) -> frozenset[str]:
    """The knobs the spec's engine declares it switches in place (empty when `inplace: off`)."""
    command = RECORDS[spec.runtime.engine].command
    if not spec.runtime.inplace or command is None:
        return frozenset()
    return frozenset(command.switchable)


def load_key(spec: Spec, sc: ServerConfig) -> str | None:
    """What two configs must share to be served by one load (None: this one always loads)."""
    switchable = declared_switchable(spec)
    fresh = (
        spec.repeats.restarts > 1 or (sc.restart > 0 and sc.mode != "ar") or spec.search is not None
    )
    if not switchable or fresh:
        return None
    return short_hash({k: v for k, v in sc.params.items() if k not in switchable})


def in_loads(spec: Spec, steps: Sequence[Step]) -> tuple[Step, ...]:
    """The steps grouped by load, groups in the order of their first step and each group's
    steps in their own order (AR baselines first stay first); every step after the first of
    its group is a switch, but a group's only speculative config, which is a load. Scoring
    steps stay last, after everything they score: each is a switch where it shares the load
    of the step before it."""
    groups: dict[str | int, list[Step]] = {}
    for n, step in enumerate(s for s in steps if not s.scoring):
        key = load_key(spec, step.server_config)
        groups.setdefault(n if key is None else key, []).append(step)
    out = []
    for group in groups.values():
        # A lone speculative config is loaded, not switched to: switched to, it would be loaded
        # again to confirm it (`sweeper.runner.sweep`), its points measured twice for no load
        # saved.
        lone = sum(s.server_config.mode != "ar" for s in group) < 2
        for n, step in enumerate(group):
            fresh = lone and step.server_config.mode != "ar"
            out.append(step._replace(switch=n > 0 and not fresh))
    for step in (s for s in steps if s.scoring):
        key = load_key(spec, step.server_config)
        shared = bool(out) and key is not None and key == load_key(spec, out[-1].server_config)
        out.append(step._replace(switch=shared))
    return tuple(out)
