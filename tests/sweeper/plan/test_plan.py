"""Plan arithmetic: restarts, points, redundant points dropped with notes, AR baselines first,
include/exclude, sharding, stable point ids, and the runtime argv of a server config."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.config import RequestConfig, ServerConfig
from sweeper.plan import Plan, PlanError, build_plan, estimate_seconds
from sweeper.plan.features import step_refusal
from sweeper.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[3]
WORKLOAD = "workload:\n  prompts: [{id: a, text: hi}, {id: b, text: ho}]\n"


def plan_of(body: str, workload: str = WORKLOAD) -> Plan:
    return build_plan(parse_spec("name: t\n" + body + workload))


def labels(plan: Plan, host: int = 0) -> list[str]:
    return [step.server_config.label for step in plan.hosts[host].steps]


def test_local_sweep_arithmetic() -> None:
    plan = build_plan(load_spec(ROOT / "sweeps" / "local.yaml"))
    # 8 speculative configs + one AR baseline per cuda_graph value.
    assert plan.restarts == 10
    # x (T=0 c=1, T=0 c=4, T=0.7 c=1): sampled points at concurrency 4 are excluded.
    assert plan.n_points == 30
    assert plan.n_requests == 240  # x 4 prompts x 2 repeats
    assert labels(plan)[:2] == ["ar-cg1", "ar-cg0"]
    assert all(label.startswith("b") for label in labels(plan)[2:])
    # The only note: how the 8 sampled speculative points are proven (no samples to draw).
    (note,) = plan.notes
    assert note.startswith("8 sampled speculative point(s) (temperature > 0): coupled")
    assert "seed 1234" in note
    assert plan.n_samples == 0


def test_request_parameters_never_restart() -> None:
    one = plan_of("grid: {budget: [8], topk: [1], temperature: [0]}\n")
    many = plan_of(
        "grid: {budget: [8], topk: [1], temperature: [0, 0.5, 1.0], top_p: [0.9, 1.0]}\n",
        WORKLOAD + "  concurrency: [1, 2, 4]\n",
    )
    assert one.restarts == many.restarts == 2  # AR + b8-k1
    assert one.n_points == 2
    # temperature 0 ignores top_p: 1 + 2 x 2 = 5 request configs, x 3 concurrency levels;
    # of the 18 grid points of b8-k1, the 3 at temperature 0 with top_p 1.0 repeat others.
    assert many.n_points == 2 * 5 * 3
    assert "dropped 3 points: top_p has no effect at temperature 0 (greedy)" in many.notes


def test_server_parameters_restart() -> None:
    plan = plan_of("grid: {budget: [8, 16], topk: [1, 2], block_size: [4, 8]}\n")
    assert plan.restarts == 1 + 2 * 2 * 2
    assert plan.n_points == plan.restarts  # one request config each


def test_redundant_points_are_dropped_with_notes() -> None:
    plan = plan_of("grid: {budget: [0, 2, 8], topk: [1, 4]}\n")
    assert labels(plan) == ["ar-cg0", "b2-k1-bs8-cg0", "b8-k1-bs8-cg0", "b8-k4-bs8-cg0"]
    assert set(plan.notes) == {
        "dropped 1 point: topk has no meaning with budget 0 (autoregressive)",
        "dropped 1 point: budget 0 is autoregressive decoding, which the AR baseline "
        "already measures",
        "dropped 1 point: topk 4 > budget 2 (a node cannot have more children than the tree nodes)",
    }


def test_budget_zero_is_the_baseline_when_baseline_is_off() -> None:
    plan = plan_of("baseline: false\ngrid: {budget: [0, 8], topk: [1], block_size: [4, 8]}\n")
    assert labels(plan) == ["ar-cg0", "b8-k1-bs4-cg0", "b8-k1-bs8-cg0"]
    assert "dropped 1 point: block_size has no meaning with budget 0 (autoregressive)" in plan.notes
    points = list(plan.points())
    assert points[0].baseline_point_id is None
    assert {p.baseline_point_id for p in points[1:]} == {"local-ar-cg0-t0-c1"}


def test_no_baseline_means_no_ar_config() -> None:
    plan = plan_of("baseline: false\ngrid: {budget: [8], topk: [1]}\n")
    assert labels(plan) == ["b8-k1-bs8-cg0"]
    assert next(plan.points()).baseline_point_id is None


def test_baseline_runs_first_and_each_point_knows_its_baseline() -> None:
    plan = plan_of(
        "grid: {budget: [8], topk: [1], cuda_graph: [true, false], temperature: [0, 0.7]}\n"
    )
    assert labels(plan) == ["ar-cg1", "ar-cg0", "b8-k1-bs8-cg1", "b8-k1-bs8-cg0"]
    by_id = {p.point_id: p for p in plan.points()}
    assert by_id["local-b8-k1-bs8-cg0-t0.7-c1"].baseline_point_id == "local-ar-cg0-t0.7-c1"
    assert by_id["local-b8-k1-bs8-cg1-t0-c1"].baseline_point_id == "local-ar-cg1-t0-c1"
    assert by_id["local-ar-cg1-t0-c1"].baseline_point_id is None


def test_exclude_drops_matching_points_and_include_adds_combinations() -> None:
    plan = plan_of(
        "grid:\n"
        "  budget: [8, 16]\n"
        "  topk: [1, 4]\n"
        "  temperature: [0, 0.7]\n"
        "  exclude:\n"
        "    - {budget: 8, topk: 4}\n"  # a whole server config
        "    - {budget: 16, temperature: [0.7]}\n"  # only some request configs
        "  include:\n"
        "    - {budget: 32, topk: 8, temperature: 0}\n"
    )
    steps = {
        s.server_config.label: [rc.id for rc in s.request_configs] for s in plan.hosts[0].steps
    }
    assert steps == {
        "ar-cg0": ["t0-c1", "t0.7-c1"],
        "b8-k1-bs8-cg0": ["t0-c1", "t0.7-c1"],
        "b16-k1-bs8-cg0": ["t0-c1"],
        "b16-k4-bs8-cg0": ["t0-c1"],
        "b32-k8-bs8-cg0": ["t0-c1"],
    }


def test_include_of_an_existing_point_is_not_duplicated() -> None:
    plan = plan_of("grid: {budget: [8], topk: [1], include: [{budget: 8}]}\n")
    assert plan.n_points == 2
    assert "dropped 1 point: listed twice by include rules" in plan.notes


def test_extra_runtime_flags_are_server_parameters() -> None:
    plan = plan_of("grid: {budget: [8], topk: [1], tp: [4, 8]}\n")
    # Each tp value is its own AR baseline: a speedup compares speculation alone.
    assert plan.restarts == 4
    ids = [p.point_id for p in plan.points()]
    assert len(set(ids)) == len(ids)
    assert all("tp4" in i or "tp8" in i for i in ids)


SHARD_HOSTS = (
    "hosts:\n"
    "  - {name: a, address: 10.0.0.1}\n"
    "  - {name: b, address: 10.0.0.2}\n"
    "  - {name: c, address: 10.0.0.3}\n"
)


def test_shard_deals_speculative_configs_and_runs_baseline_everywhere() -> None:
    plan = plan_of(SHARD_HOSTS + "shard: true\ngrid: {budget: [8, 16], topk: [1, 2]}\n")
    per_host = [labels(plan, i) for i in range(3)]
    assert per_host == [
        ["ar-cg0", "b8-k1-bs8-cg0", "b16-k2-bs8-cg0"],
        ["ar-cg0", "b8-k2-bs8-cg0"],
        ["ar-cg0", "b16-k1-bs8-cg0"],
    ]
    assert plan.restarts == 3 + 4
    points = list(plan.points())
    assert {p.baseline_point_id for p in points if p.host == "b" and p.baseline_point_id} == {
        "b-ar-cg0-t0-c1"
    }


def test_without_shard_every_host_runs_everything() -> None:
    plan = plan_of(SHARD_HOSTS + "grid: {budget: [8, 16], topk: [1, 2]}\n")
    assert plan.restarts == 3 * 5
    assert labels(plan, 0) == labels(plan, 2)


def test_point_ids_are_stable_readable_and_unique() -> None:
    body = "grid: {budget: [8, 16], topk: [1, 4], cuda_graph: [on, off], temperature: [0, 0.7]}\n"
    first = [p.point_id for p in plan_of(body).points()]
    second = [p.point_id for p in plan_of(body).points()]
    assert first == second
    assert len(set(first)) == len(first)
    assert "local-b16-k4-bs8-cg1-t0-c1" in first
    assert "local-ar-cg0-t0.7-c1" in first


def test_server_config_id_is_a_hash_of_its_params() -> None:
    make = ServerConfig.make
    a = make("speculative", {"budget": 8, "topk": 1, "block_size": 8, "cuda_graph": True})
    b = make("speculative", {"cuda_graph": True, "block_size": 8, "topk": 1, "budget": 8})
    c = make("speculative", {"budget": 8, "topk": 1, "block_size": 8, "cuda_graph": False})
    assert a.id == b.id != c.id
    assert len(a.id) == 10


def test_request_config_carries_workload_settings() -> None:
    plan = plan_of("grid: {budget: [8], topk: [1]}\n", WORKLOAD + "  max_tokens: 7\n  seed: 3\n")
    rc = plan.hosts[0].steps[0].request_configs[0]
    assert rc == RequestConfig.make(0.0, 7, 1, None, 3)
    assert (rc.max_tokens, rc.seed, rc.concurrency) == (7, 3, 1)


def test_estimate_arithmetic() -> None:
    plan = plan_of(
        "grid: {budget: [8], topk: [1]}\n",
        WORKLOAD + "  max_tokens: 12\n  repeats: 3\n  warmup: 1\n  concurrency: [1, 4]\n",
    )
    # Two 10 s loads (AR, and b8-k1: a lone speculative config is loaded, not switched to),
    # each + 1 warmup x 1 s + per server config: c1 -> 6 rounds, c4 -> 2.
    seconds = estimate_seconds(plan, load_s=10, tok_s=12, switch_s=2)
    assert seconds == pytest.approx(2 * (10 + 1 + 6 + 2))
    # Two speculative configs: one load, two switches, then the winner loaded once more.
    two = plan_of(
        "grid: {budget: [8, 16], topk: [1]}\n",
        WORKLOAD + "  max_tokens: 12\n  repeats: 3\n  warmup: 1\n  concurrency: [1, 4]\n",
    )
    seconds = estimate_seconds(two, load_s=10, tok_s=12, switch_s=2)
    assert seconds == pytest.approx(2 * (10 + 1 + 6 + 2) + 2 * (2 + 1 + 6 + 2))


def test_ar_only_sweep_when_every_speculative_point_is_excluded() -> None:
    plan = plan_of("grid: {budget: [8], topk: [1], exclude: [{budget: 8}]}\n")
    assert labels(plan) == ["ar-cg0"]
    assert plan.n_points == 1


def test_rules_may_name_concurrency() -> None:
    plan = plan_of(
        "grid: {budget: [8, 16], topk: [1], exclude: [{budget: 16, concurrency: 4}]}\n",
        WORKLOAD + "  concurrency: [1, 4]\n",
    )
    steps = {
        s.server_config.label: [rc.id for rc in s.request_configs] for s in plan.hosts[0].steps
    }
    assert steps["b16-k1-bs8-cg0"] == ["t0-c1"]
    assert steps["b8-k1-bs8-cg0"] == ["t0-c1", "t0-c4"]


def test_request_ids_are_exact_and_a_collision_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_spec(
        "name: t\ngrid:\n  temperature: [0.1234561, 0.1234562]\n"
        "workload:\n  prompts: [{id: a, text: hi}]\n"
    )
    ids = {p.request_config.id for p in build_plan(spec).points()}
    assert ids == {"t0.1234561-c1", "t0.1234562-c1"}
    # The safety net under the ids: were they lossy again, both values are named.
    monkeypatch.setattr("sweeper.config.request.fmt", lambda v: format(v, "g"))
    with pytest.raises(PlanError, match="0.1234561.*0.1234562"):
        build_plan(spec)


def test_baseline_every_measures_the_ar_again_between_configs_as_a_drift_check() -> None:
    grid = "grid: {budget: [2, 4, 8], topk: [1], cuda_graph: [false, true]}\n"
    one = plan_of(grid + "repeats: {restarts: 1, baseline_every: 2}\n")
    # After every 2 speculative restarts and after the last: both AR baselines each time.
    assert labels(one) == [
        "ar-cg0", "ar-cg1",
        "b2-k1-bs8-cg0", "b2-k1-bs8-cg1", "ar-cg0-rs1", "ar-cg1-rs1",
        "b4-k1-bs8-cg0", "b4-k1-bs8-cg1", "ar-cg0-rs2", "ar-cg1-rs2",
        "b8-k1-bs8-cg0", "b8-k1-bs8-cg1", "ar-cg0-rs3", "ar-cg1-rs3",
    ]  # fmt: skip
    assert "baseline checks: the AR baseline measured again after every 2 speculative" in (
        " ".join(one.notes)
    )
    # A check is never a denominator: every speculative point keeps its round's baseline.
    points = {p.point_id: p for p in one.points()}
    assert points["local-b8-k1-bs8-cg0-t0-c1"].baseline_point_id == "local-ar-cg0-t0-c1"
    assert points["local-ar-cg0-rs3-t0-c1"].baseline_point_id is None
    # With rounds, no check lands just before the next round's own baseline; the run still
    # ends on one.
    two = plan_of(grid + "repeats: {restarts: 2, baseline_every: 4}\n")
    assert labels(two)[5:12] == [
        "b4-k1-bs8-cg1", "ar-cg0-rs2", "ar-cg1-rs2", "b8-k1-bs8-cg0", "b8-k1-bs8-cg1",
        "ar-cg0-rs1", "ar-cg1-rs1",
    ]  # fmt: skip
    end = ["b8-k1-bs8-cg0-rs1", "b8-k1-bs8-cg1-rs1", "ar-cg0-rs4", "ar-cg1-rs4"]
    assert labels(two)[-4:] == end
    assert two.restarts == 2 * (2 + 6) + 3 * 2  # two rounds; checks mid-round twice, at the end
    assert plan_of(grid).restarts == 2 + 6  # no checks unless asked


def test_a_port_sglang_0_5_15_refuses_is_noted() -> None:
    body = "runtime: {{engine: sglang, preset: sglang-ddtree, model: m, port: {port}{env}}}\n"
    high = plan_of(body.format(port=60361, env=""))
    assert any(n.startswith("runtime.port 60361 is above 55535: SGLang 0.5.15") for n in high.notes)
    chosen = plan_of(body.format(port=60361, env=", env: {SGLANG_GRPC_PORT: '50051'}"))
    assert not any("runtime.port" in n for n in chosen.notes)
    assert not any("runtime.port" in n for n in plan_of(body.format(port=55535, env="")).notes)


FEATURES_WORKLOAD = WORKLOAD + (
    '  logit_bias: {13: 2.5}\n  stop: ["\\n\\n"]\n  logprobs: 3\n'
    "  response_format: {type: json_schema, json_schema: {name: a, schema: {type: object}}}\n"
)


def test_request_features_reach_every_request_config() -> None:
    """Scalar features are grid axes (min-p, a cut-off, only where sampling); the workload's
    structured ones go with every request config, AR baselines and AR-only sweeps alike."""
    grid = (
        "grid: {budget: [8], topk: [1], temperature: [0, 0.7], min_p: [0.1, 0.2],"
        " repetition_penalty: [1.3]}\n"
    )
    plan = plan_of(grid, FEATURES_WORKLOAD)
    configs = {rc.id: rc for step in plan.hosts[0].steps for rc in step.request_configs}
    assert sorted(configs) == sorted(
        f"{t}rp1.3-lb{lb}-st{st}-rf{rf}-lp3-c1"
        for t in ("t0-", "t0.7-mp0.1-", "t0.7-mp0.2-")
        for lb, st, rf in [[p[2:] for p in next(iter(configs)).split("-")[-5:-2]]]
    )
    assert "dropped 1 point: min_p has no effect at temperature 0 (greedy)" in plan.notes
    for rc in configs.values():
        assert rc.repetition_penalty == 1.3 and rc.logprobs == 3 and rc.stop == ("\n\n",)
        assert rc.logit_bias == ((13, 2.5),)
        values = rc.feature_values(plain=True)
        assert values["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "a", "schema": {"type": "object"}},
        }
    assert {configs[i].min_p for i in configs} == {None, 0.1, 0.2}
    # The digests name the values: the plan says which value each one stands for.
    assert any(note.startswith("request features: logit_bias#") for note in plan.notes)
    # Every speculative point is excluded: the AR-only sweep still asks for every feature.
    only_ar = plan_of(grid.replace("}\n", ", exclude: [{budget: 8}]}\n"), FEATURES_WORKLOAD)
    ids = {rc.id for step in only_ar.hosts[0].steps for rc in step.request_configs}
    assert ids == set(configs)


def test_a_feature_the_engine_would_drop_is_refused_in_one_line() -> None:
    endpoint = "runtime: {engine: openai, base_url: 'http://127.0.0.1:1'}\n"
    with pytest.raises(PlanError) as caught:
        plan_of(endpoint + "grid: {temperature: [0.7], min_p: [0.1]}\n")
    assert caught.value.field == "grid.min_p"
    assert str(caught.value) == "openai (any build) does not take min_p (not in OpenAI's API)"
    with pytest.raises(PlanError) as caught:
        plan_of(endpoint, WORKLOAD + "  regex: '[0-9]+'\n")
    assert caught.value.field == "workload.regex"
    # OpenAI's own fields pass; the bundled runtime takes every one.
    assert plan_of(endpoint, FEATURES_WORKLOAD).n_points
    assert plan_of("grid: {min_p: [0.1], temperature: [0.7]}\n", FEATURES_WORKLOAD).n_points


def test_a_started_server_is_judged_against_the_build_it_reports() -> None:
    plan = plan_of("grid: {budget: [8], topk: [1], repetition_penalty: [1.3]}\n")
    assert (
        "ddtree_runtime: repetition_penalty needs a build >= 0.2.0: checked against the build "
        "each server reports"
    ) in plan.notes
    for step in plan.hosts[0].steps:
        args = (step.server_config, step.request_configs)
        assert step_refusal("ddtree_runtime", *args, build="0.2.0") is None
        assert step_refusal("ddtree_runtime", *args, build="0.1.0") == (
            "ddtree_runtime 0.1.0: repetition_penalty is honoured only since 0.2.0"
        )
        # A server that reports no build cannot show it honours what only some builds do.
        assert step_refusal("ddtree_runtime", *args, build=None) == (
            "ddtree_runtime (build not reported): repetition_penalty is honoured only since 0.2.0"
        )
        assert step_refusal("tgi", *args, build="3.3.0") == (
            "tgi 3.3.0: repetition_penalty has no row in the feature table "
            "(sweeper/catalog/features.py): refused, never sent unchecked"
        )
