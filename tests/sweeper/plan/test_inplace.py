"""Loads, not restarts: a host's server configs grouped by the knobs that need a new process
(those the engine's catalog record does not declare switchable), the rest ordered as in-place
switches within each load; `runtime.inplace: off` loads every config; `repeats.restarts: N`
loads each config N times; the estimate both ways. Pure: real spec files, no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.engines.registry import engine_for
from sweeper.plan import Plan, build_plan, estimate_seconds
from sweeper.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[3]
WORKLOAD = "workload:\n  prompts: [{id: a, text: hi}]\n"


def plan_of(body: str) -> Plan:
    return build_plan(parse_spec("name: t\n" + body + WORKLOAD))


def shipped(name: str) -> Plan:
    return build_plan(load_spec(ROOT / "sweeps" / name))


def test_local_sweep_is_one_load_and_nine_switches() -> None:
    plan = shipped("local.yaml")
    assert (plan.restarts, plan.loads, plan.switches) == (10, 1, 9)
    steps = plan.hosts[0].steps
    # The AR baselines still come first; only the first step of the host loads.
    assert [s.switch for s in steps] == [False] + [True] * 9
    assert [s.server_config.label for s in steps[:2]] == ["ar-cg1", "ar-cg0"]


def test_inplace_off_loads_every_config_as_before() -> None:
    spec = load_spec(ROOT / "sweeps" / "local.yaml")
    off = spec.model_copy(update={"runtime": spec.runtime.model_copy(update={"inplace": False})})
    plan = build_plan(off)
    assert (plan.loads, plan.switches) == (10, 0)
    assert [s.server_config.label for s in plan.hosts[0].steps] == [
        s.server_config.label for s in shipped("local.yaml").hosts[0].steps
    ]


def test_sglang_b300_keeps_a_load_per_config() -> None:
    # SGLang switches no tree knob in place (budget, topk, cuda_graph need a restart).
    plan = shipped("b300.yaml")
    assert (plan.restarts, plan.loads, plan.switches) == (20, 20, 0)


def test_a_knob_that_needs_a_restart_makes_a_load_group() -> None:
    plan = plan_of("grid: {budget: [0, 4, 8], topk: [1], max_batch: [2, 4]}\n")
    steps = plan.hosts[0].steps
    shown = [(s.server_config.mode, s.server_config.params["max_batch"], s.switch) for s in steps]
    assert shown == [
        ("ar", 2, False),
        ("speculative", 2, True),
        ("speculative", 2, True),
        ("ar", 4, False),
        ("speculative", 4, True),
        ("speculative", 4, True),
    ]
    assert (plan.loads, plan.switches) == (2, 4)


def test_a_lone_speculative_config_is_loaded_not_switched_to() -> None:
    # Switched to, it would be the winner measured only after a switch, loaded again to be
    # confirmed: two loads either way, its points twice.
    def shown(grid: str) -> list[tuple[str, bool]]:
        steps = plan_of(f"grid: {grid}\n").hosts[0].steps
        return [(s.server_config.mode, s.switch) for s in steps]

    assert shown("{budget: [4], topk: [1]}") == [("ar", False), ("speculative", False)]
    assert shown("{budget: [4, 8], topk: [1]}") == [
        ("ar", False),
        ("speculative", True),
        ("speculative", True),
    ]


def test_restarts_are_fresh_processes_each() -> None:
    plan = plan_of("grid: {budget: [4, 8], topk: [1]}\nrepeats: {restarts: 2}\n")
    assert (plan.restarts, plan.loads, plan.switches) == (6, 6, 0)


def test_accept_threshold_is_a_switched_speculative_knob_sharing_one_baseline() -> None:
    plan = plan_of("grid: {budget: [8], topk: [2], accept_threshold: [1.0, 0.5, 0.2]}\n")
    labels = [s.server_config.label for s in plan.hosts[0].steps]
    assert len(labels) == 4 and labels[0].startswith("ar-")  # one AR for the three
    assert (plan.loads, plan.switches) == (1, 3)
    engine = engine_for(plan.spec.runtime, None)
    sc = plan.hosts[0].steps[2].server_config
    argv = engine.launch(
        sc, python="python", listen_host="127.0.0.1", workdir=None, secrets={}
    ).argv
    at = argv.index("--accept-threshold")
    assert argv[at + 1] == "0.5"


def test_estimate_with_switches_and_with_every_config_a_load() -> None:
    plan = shipped("local.yaml")
    switched = estimate_seconds(plan, load_s=100.0, tok_s=10.0, switch_s=1.0)
    loaded = estimate_seconds(plan, load_s=100.0, tok_s=10.0, switch_s=100.0)
    assert loaded - switched == pytest.approx(9 * 99.0)


def test_a_search_loads_every_trial() -> None:
    plan = shipped("search-local.yaml")
    assert plan.switches == 0 and plan.loads == plan.restarts


def test_slurm_allocations_sharing_a_load_group_each_count_a_load() -> None:
    # Three configs of one load group, shared by two allocations: each may load it (what a
    # two-node Slurm sweep does: tests/sweeper/runner/test_slurm_sweep.py); one allocation: one.
    def plan(allocations: int) -> Plan:
        return plan_of(
            "hosts:\n  - {kind: slurm, name: c, address: login, user: me, "
            f"shared_dir: /shared, allocations: {allocations}}}\n"
            "grid: {budget: [0, 4, 8], topk: [1]}\n"
        )

    assert [(p.restarts, p.loads, p.switches) for p in (plan(1), plan(2), plan(4))] == [
        (3, 1, 2),
        (3, 2, 1),
        (3, 3, 0),
    ]
