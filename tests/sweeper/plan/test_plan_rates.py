"""Open-loop points in the plan: rates are request configs (never a restart), a point is closed-
or open-loop, rules pick rates, and the AR baseline and a speculative config at the same rate get
the same arrival schedule."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sweeper.measure.arrivals import schedule
from sweeper.measure.drive import point_load
from sweeper.measure.pool import ClosedLoop, OpenLoop
from sweeper.plan import Plan, build_plan
from sweeper.spec import parse_spec

PROMPTS = "  prompts: [{id: a, text: hi}, {id: b, text: ho}]\n  seed: 7\n"


def plan_of(grid: str, load: str, extra: str = "") -> Plan:
    text = f"name: t\ngrid: {grid}\nworkload:\n{PROMPTS}{extra}  load:\n{load}"
    return build_plan(parse_spec(text))


def request_ids(plan: Plan) -> dict[str, list[str]]:
    return {s.server_config.label: [rc.id for rc in s.request_configs] for s in plan.hosts[0].steps}


def test_rates_are_request_configs_and_the_load_replaces_the_default_concurrency() -> None:
    plan = plan_of("{budget: [8], topk: [1, 4]}", "    rate: [0.5, 2, inf]\n    requests: 6\n")
    assert plan.restarts == 3  # AR + two trees, whatever the number of rates
    ids = request_ids(plan)
    assert ids["ar-cg0"] == ids["b8-k1-bs8-cg0"] == ["t0-r0.5", "t0-r2", "t0-rinf"]
    rc = plan.hosts[0].steps[1].request_configs[2]
    assert (rc.rate, rc.arrival, rc.concurrency, rc.burstiness) == (math.inf, "poisson", None, None)
    assert plan.n_requests == 3 * 3 * 6
    # Every speculative point is compared with the AR point at its own rate.
    for point in plan.points():
        if point.server_config.mode != "ar":
            assert point.baseline_point_id == f"local-ar-cg0-{point.request_config.id}"


def test_closed_and_open_loop_points_side_by_side() -> None:
    plan = plan_of(
        "{budget: [8], topk: [1]}",
        "    rate: [1]\n    arrival: gamma\n    burstiness: 0.5\n    max_concurrency: 4\n",
        extra="  concurrency: [1, 4]\n",
    )
    assert request_ids(plan)["b8-k1-bs8-cg0"] == ["t0-c1", "t0-c4", "t0-r1-gamma0.5-m4"]
    closed, _, opened = plan.hosts[0].steps[1].request_configs
    assert (closed.concurrency, closed.rate) == (1, None)
    assert (opened.concurrency, opened.rate, opened.burstiness) == (None, 1.0, 0.5)
    assert opened.max_concurrency == 4
    assert plan.n_requests == 2 * (2 + 2 + 2)  # prompts x repeats for every kind of point


def test_rules_name_rates_and_never_a_rate_with_a_concurrency() -> None:
    grid = "{budget: [8], topk: [1, 4], exclude: [{topk: 4, rate: inf}], include: []}"
    ids = request_ids(plan_of(grid, "    rate: [1, inf]\n", extra="  concurrency: [2]\n"))
    assert ids["b8-k4-bs8-cg0"] == ["t0-c2", "t0-r1"]
    assert ids["b8-k1-bs8-cg0"] == ["t0-c2", "t0-r1", "t0-rinf"]
    # An include rule naming a rate adds that open-loop point only (not a closed loop beside it).
    grid = "{budget: [8], topk: [1], include: [{budget: 16, topk: 4, rate: 3}]}"
    ids = request_ids(plan_of(grid, "    rate: [1]\n"))
    assert ids["b16-k4-bs8-cg0"] == ["t0-r3"]


def test_baseline_and_speculative_points_share_one_schedule_per_rate() -> None:
    plan = plan_of("{budget: [8], topk: [1]}", "    rate: [2, 5]\n    duration_s: 20\n")
    spec = plan.spec
    loads: dict[float, list[OpenLoop]] = {}
    for point in plan.points():
        load = point_load(point.request_config, spec.workload)
        assert isinstance(load, OpenLoop) and load.seed == 7
        loads.setdefault(point.request_config.rate or 0.0, []).append(load)
    for rate, (ar, tree) in loads.items():
        a, b = schedule(ar.profile, ar.seed), schedule(tree.profile, tree.seed)
        assert np.array_equal(a, b) and a.size > 10 and a[-1] < 20
        assert ar.profile.rate == rate and ar.profile.duration_s == 20
    closed = build_plan(parse_spec(f"name: t\nworkload:\n{PROMPTS}  repeats: 3\n"))
    load = point_load(next(closed.points()).request_config, closed.spec.workload)
    assert load == ClosedLoop(1, requests=6)


def test_open_loop_estimate_counts_the_schedule_span() -> None:
    plan = plan_of("{budget: [8], topk: [1]}", "    rate: [0.5, inf]\n    requests: 10\n")
    workload = plan.spec.workload
    per_request = workload.max_tokens / 12.0
    # The AR's load, then the speculative config's (a lone one is loaded, never switched to).
    restarts = 2 * 10.0 + 2 * workload.warmup * per_request
    # Per config: 10 arrivals at 0.5/s span 20 s, at inf none; each point adds one request.
    expected = restarts + 2 * ((20.0 + per_request) + (0.0 + per_request))
    assert plan.estimated_seconds == pytest.approx(expected)


def test_the_plan_as_json_writes_an_infinite_rate_as_inf() -> None:
    plan = plan_of("{budget: [8], topk: [1]}", "    rate: [1, inf]\n")
    text = json.dumps(plan.to_dict(), allow_nan=False)  # strict JSON: no Infinity token
    rates = [rc["rate"] for rc in json.loads(text)["hosts"][0]["steps"][0]["request_configs"]]
    assert rates == [1.0, "inf"]
