"""Sampled points in the plan: `determinism.sampled: auto` resolved per engine, seeded sample
sets disjoint per role, which points draw samples and which share them, what the samples cost
(counts and time), the plan's notes on how sampled points are proven, a `top_k` grid, a later
turn without an AR baseline refused, and `sweeper plan --json`'s sampled power line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.catalog.records import RECORDS
from sweeper.cli import app
from sweeper.config import RequestConfig, ServerConfig
from sweeper.plan import Plan, PlanError, build_plan, estimate_seconds
from sweeper.plan.model import (
    DEFAULT_TOK_S,
    SCORE_STEPS,
    proof_time,
    provision_of,
    samples_count,
    with_samples,
)
from sweeper.plan.points import Point
from sweeper.plan.sampling import Provision, SampledChecks, sample_seeds
from sweeper.spec import Spec, parse_spec

VLLM = "runtime: {engine: vllm, preset: vllm-ngram, model: m}\n"
RUNTIMES = {
    "ddtree_runtime": "",
    "vllm": VLLM,
    "sglang": "runtime: {engine: sglang, preset: sglang-ddtree, model: m}\n",
    "openai": "runtime: {engine: openai, base_url: 'http://127.0.0.1:9'}\n",
}
PROMPTS = "  prompts: [{id: a, text: hi}, {id: b, text: ho}]\n"
#: Two prompts at two loads, seeded, short answers (samples of 24 tokens).
WORKLOAD = "workload:\n" + PROMPTS + "  concurrency: [1, 4]\n  seed: 7\n  max_tokens: 24\n"
SAMPLED_GRID = "grid: {budget: [2], temperature: [0, 0.7]}\n"


def spec_of(body: str, workload: str = WORKLOAD) -> Spec:
    return parse_spec("name: t\n" + body + workload)


def plan_of(body: str, workload: str = WORKLOAD) -> Plan:
    return build_plan(spec_of(body, workload))


def distribution_plan(samples: int = 8, concurrency: int = 8) -> Plan:
    policy = f"sampled: distribution, samples: {samples}, sample_concurrency: {concurrency}"
    return plan_of(VLLM + SAMPLED_GRID + f"determinism: {{{policy}}}\n")


def draws(plan: Plan) -> dict[str, tuple[tuple[str, ...], str | None]]:
    return {p.point_id: (p.samples, p.samples_from) for p in plan.points()}


# --- the check, per engine and as asked ----------------------------------------------------------


@pytest.mark.parametrize("engine", sorted(RUNTIMES))
def test_auto_resolves_by_the_engines_catalog_record(engine: str) -> None:
    spec = spec_of(RUNTIMES[engine])
    assert spec.runtime.engine == engine
    expected = {"ddtree_runtime": "coupled", "openai": "distribution"}.get(engine, "scored")
    assert SampledChecks.of(spec).check == expected
    assert RECORDS[engine].coupled_sampling is (engine == "ddtree_runtime")


@pytest.mark.parametrize("asked", ["coupled", "scored", "distribution", "repeats"])
@pytest.mark.parametrize("engine", ["ddtree_runtime", "vllm"])
def test_a_named_check_is_kept_whatever_the_engine(engine: str, asked: str) -> None:
    spec = spec_of(RUNTIMES[engine] + f"determinism: {{sampled: {asked}}}\n")
    assert SampledChecks.of(spec).check == asked


# --- seeds ---------------------------------------------------------------------------------------


def test_sample_seeds_are_distinct_stable_and_disjoint_between_roles() -> None:
    roles = ("test", "ar", "control")
    for base in (None, 0, 7, 2**40):
        sets = {role: sample_seeds(base, role, 500) for role in roles}
        for role, seeds in sets.items():
            assert len(set(seeds)) == 500, role
            assert seeds == sample_seeds(base, role, 500)  # stable
            assert all(0 <= s < 2**31 - 1 for s in seeds)
        assert not set(sets["test"]) & set(sets["ar"])
        assert not set(sets["test"]) & set(sets["control"])
        assert not set(sets["ar"]) & set(sets["control"])
    # A larger draw extends a smaller one, and another base gives other seeds.
    assert sample_seeds(7, "ar", 10)[:4] == sample_seeds(7, "ar", 4)
    assert sample_seeds(7, "test", 4) != sample_seeds(8, "test", 4)


# --- which points draw ---------------------------------------------------------------------------


def test_distribution_points_draw_once_per_server_config_and_sampling() -> None:
    plan = distribution_plan()
    assert all(host.checks.baseline_roles == ("ar", "control") for host in plan.hosts)
    assert draws(plan) == {
        # Greedy points draw nothing.
        "local-ar-cg0-t0-c1": ((), None),
        "local-ar-cg0-t0-c4": ((), None),
        "local-b2-cg0-t0-c1": ((), None),
        "local-b2-cg0-t0-c4": ((), None),
        # The first sampled point of each server config draws; the other load shares it.
        "local-ar-cg0-t0.7-c1": (("ar", "control"), None),
        "local-ar-cg0-t0.7-c4": ((), "local-ar-cg0-t0.7-c1"),
        "local-b2-cg0-t0.7-c1": (("test",), None),
        "local-b2-cg0-t0.7-c4": ((), "local-b2-cg0-t0.7-c1"),
    }
    # The plan's JSON carries them.
    points = {p["point_id"]: p for p in plan.to_dict()["hosts"][0]["points"]}
    assert points["local-ar-cg0-t0.7-c1"]["samples"] == ["ar", "control"]
    assert points["local-b2-cg0-t0.7-c4"]["samples_from"] == "local-b2-cg0-t0.7-c1"
    assert "samples" not in points["local-ar-cg0-t0-c1"]


@pytest.mark.parametrize("check", ["coupled", "repeats"])
def test_no_point_draws_unless_the_check_is_distribution(check: str) -> None:
    plan = plan_of(VLLM + SAMPLED_GRID + f"determinism: {{sampled: {check}}}\n")
    assert not any(host.checks.baseline_roles for host in plan.hosts)
    assert all(v == ((), None) for v in draws(plan).values())
    assert plan.n_samples == 0
    assert "n_samples" not in plan.to_dict()


def test_the_coupled_runtime_draws_none() -> None:
    plan = plan_of("grid: {budget: [8], topk: [1], temperature: [0, 0.7]}\n")
    assert SampledChecks.of(plan.spec).check == "coupled"
    assert all(v == ((), None) for v in draws(plan).values())
    assert plan.n_samples == 0


def _point(sc: ServerConfig, rc: RequestConfig) -> Point:
    return Point("h", sc, rc)


def test_an_ar_point_draws_only_where_a_speculative_point_samples_alike() -> None:
    ar = ServerConfig.make("ar", {"cuda_graph": False})
    ar_graph = ServerConfig.make("ar", {"cuda_graph": True})
    spec = ServerConfig.make("speculative", {"budget": 2, "cuda_graph": False}, ("budget",))
    sampled = RequestConfig.make(0.7, 24, 1)
    nucleus = RequestConfig.make(0.7, 24, 1, top_p=0.9)
    greedy = RequestConfig.make(0.0, 24, 1)
    points = [
        _point(ar, sampled),  # compared with `spec` at `sampled`: draws
        _point(ar, nucleus),  # no speculative point samples with top_p 0.9: nothing to compare
        _point(ar, greedy),
        _point(ar_graph, sampled),  # other flags: no speculative point of its own
        _point(spec, sampled),
        _point(spec, greedy),
    ]
    out = with_samples(points, SampledChecks.of(distribution_plan().spec))
    assert [(p.samples, p.samples_from) for p in out] == [
        (("ar", "control"), None),
        ((), None),
        ((), None),
        ((), None),
        (("test",), None),
        ((), None),
    ]
    # Pure: the input points are left as they were.
    assert all(p.samples == () for p in points)


def test_a_point_at_another_load_but_other_sampling_draws_its_own() -> None:
    spec = ServerConfig.make("speculative", {"budget": 2}, ("budget",))
    c1, c4 = RequestConfig.make(0.7, 24, 1), RequestConfig.make(0.7, 24, 4)
    hotter = RequestConfig.make(1.0, 24, 4)
    cut = RequestConfig.make(0.7, 24, 4, top_k=40)
    checks = SampledChecks.of(plan_of(VLLM + SAMPLED_GRID + "determinism: {samples: 8}\n").spec)
    assert checks.baseline_roles == ("control",)
    out = with_samples([_point(spec, rc) for rc in (c1, c4, hotter, cut)], checks)
    first = out[0].point_id
    assert [(p.samples, p.samples_from) for p in out] == [
        (("test",), None),
        ((), first),
        (("test",), None),
        (("test",), None),
    ]


# --- what the samples cost -----------------------------------------------------------------------


def test_n_samples_is_roles_times_prompts_times_samples() -> None:
    plan = distribution_plan(samples=8)
    roles = sum(len(p.samples) for p in plan.points())
    assert roles == 3  # ar + control, test
    assert plan.n_samples == roles * 2 * 8 == 48
    assert sum(samples_count(p, plan.spec) for p in plan.points()) == plan.n_samples
    assert plan.to_dict()["n_samples"] == 48


def test_estimate_seconds_grows_with_the_samples() -> None:
    small, large = distribution_plan(samples=8), distribution_plan(samples=64)
    assert estimate_seconds(large) > estimate_seconds(small)
    # Without samples the same grid costs only its requests; the samples add rounds of
    # sample_concurrency (8) samples, each of min(max_tokens, 64) = 24 tokens at 12 tok/s:
    # AR 2 roles x 2 prompts x 8 = 32 samples (4 rounds), test 16 (2 rounds).
    none = plan_of(VLLM + SAMPLED_GRID + "determinism: {sampled: repeats, samples: 8}\n")
    assert estimate_seconds(small) - estimate_seconds(none) == pytest.approx(6 * 24 / 12)
    assert small.estimated_seconds == estimate_seconds(small)
    # More in flight: fewer rounds.
    wide = distribution_plan(samples=8, concurrency=32)
    assert estimate_seconds(wide) - estimate_seconds(none) == pytest.approx(2 * 24 / 12)


# --- the plan's notes ----------------------------------------------------------------------------


def sampled_notes(plan: Plan) -> list[str]:
    return [n for n in plan.notes if "sampled speculative point" in n]


def test_coupled_note_names_the_seed() -> None:
    plan = plan_of("grid: {budget: [8], topk: [1], temperature: [0, 0.7]}\n")
    (note,) = sampled_notes(plan)
    assert note.startswith("2 sampled speculative point(s) (temperature > 0): coupled")
    assert "token for token" in note and "seed 7" in note
    assert "unproven" not in note


def test_coupled_without_a_seed_says_unproven() -> None:
    unseeded = "workload:\n" + PROMPTS
    plan = plan_of("grid: {budget: [8], topk: [1], temperature: [0.7]}\n", unseeded)
    (note,) = sampled_notes(plan)
    assert note.startswith("1 sampled speculative point(s) (temperature > 0): coupled")
    assert "workload.seed is unset" in note and "unproven" in note


def test_distribution_note_counts_the_samples() -> None:
    plan = distribution_plan(samples=8)
    (note,) = sampled_notes(plan)
    assert note.startswith("2 sampled speculative point(s) (temperature > 0): distribution")
    assert "8 seeded samples per prompt" in note
    assert f"{plan.n_samples} samples of up to 24 tokens in all" in note
    assert "8 in flight" in note


def test_repeats_note_says_the_distribution_is_not_checked() -> None:
    plan = plan_of(VLLM + SAMPLED_GRID + "determinism: {sampled: repeats}\n")
    (note,) = sampled_notes(plan)
    assert "determinism.sampled: repeats" in note
    assert "proves determinism only" in note and "not checked" in note
    assert note.endswith("so they will be unproven")


def test_no_baseline_note_says_unproven() -> None:
    plan = plan_of(
        VLLM + "baseline: false\n" + SAMPLED_GRID + "determinism: {sampled: distribution}\n"
    )
    assert plan.hosts[0].steps[0].server_config.mode == "speculative"
    notes = sampled_notes(plan)
    assert any("no AR baseline" in n and "unproven" in n for n in notes)
    # Nothing could be compared with them: no samples are drawn at all.
    assert {p.samples for p in plan.points()} == {()}
    assert plan.n_samples == 0


def test_greedy_plans_have_no_sampling_note() -> None:
    plan = plan_of(VLLM + "grid: {budget: [2], temperature: [0]}\n")
    assert sampled_notes(plan) == []
    assert plan.n_samples == 0


# --- top_k ---------------------------------------------------------------------------------------


def test_a_top_k_grid_names_its_request_configs_and_drops_at_temperature_zero() -> None:
    plan = plan_of(VLLM + "grid: {budget: [2], temperature: [0, 0.7], top_k: [20, 40]}\n")
    configs = {rc.id: rc for step in plan.hosts[0].steps for rc in step.request_configs}
    assert set(configs) == {
        "t0-c1",
        "t0-c4",
        "t0.7-tk20-c1",
        "t0.7-tk20-c4",
        "t0.7-tk40-c1",
        "t0.7-tk40-c4",
    }
    assert configs["t0.7-tk40-c1"].top_k == 40
    assert configs["t0-c1"].top_k is None
    assert configs["t0.7-tk40-c1"].to_dict()["top_k"] == 40
    assert "top_k" not in configs["t0-c1"].to_dict()
    # The grid's b2 at two loads (the AR baseline takes its request configs): two greedy
    # points repeat others.
    assert "dropped 2 points: top_k has no effect at temperature 0 (greedy)" in plan.notes
    # Each top_k samples differently: each draws its own.
    drawing = {p.point_id for p in plan.points() if p.samples}
    assert drawing == {
        "local-ar-cg0-t0.7-tk20-c1",
        "local-ar-cg0-t0.7-tk40-c1",
        "local-b2-cg0-t0.7-tk20-c1",
        "local-b2-cg0-t0.7-tk40-c1",
    }


def test_top_k_follows_top_p_in_the_id() -> None:
    rc = RequestConfig.make(0.7, 32, 1, top_p=0.9, top_k=40)
    assert rc.id == "t0.7-p0.9-tk40-c1"
    open_loop = RequestConfig.make(0.7, 32, None, rate=2.0, top_k=5)
    assert open_loop.id == "t0.7-tk5-r2"
    assert rc.sampling_key != RequestConfig.make(0.7, 32, 1, top_p=0.9).sampling_key
    assert rc.sampling_key == RequestConfig.make(0.7, 32, 8, top_p=0.9, top_k=40).sampling_key


# --- later turns need an AR baseline -------------------------------------------------------------

TURNS = (
    "workload:\n"
    "  prompts:\n"
    "    - {id: one, text: hi}\n"
    "    - id: two\n"
    "      messages:\n"
    "        - {role: user, content: hi}\n"
    "        - {role: assistant, content: ''}\n"
    "        - {role: user, content: go on}\n"
    "      answers_from: [one]\n"
)


def test_later_turns_without_an_ar_baseline_are_refused() -> None:
    with pytest.raises(PlanError, match="baseline") as caught:
        plan_of("baseline: false\ngrid: {budget: [8], topk: [1]}\n", TURNS)
    assert caught.value.field == "baseline"
    assert "two" in str(caught.value)


def test_later_turns_with_a_baseline_or_a_baseline_run_plan() -> None:
    assert plan_of("grid: {budget: [8], topk: [1]}\n", TURNS).n_points == 2
    earlier = "runtime: {baseline_run: runs/earlier}\nbaseline: false\n"
    assert plan_of(earlier + "grid: {budget: [8], topk: [1]}\n", TURNS).n_points == 1


# --- sweeper plan --json -------------------------------------------------------------------------


def _plan_json(tmp_path: Path, body: str) -> dict:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\n" + body + WORKLOAD)
    result = CliRunner().invoke(app, ["plan", str(path), "--json"])
    assert result.exit_code == 0, result.output
    data: dict = json.loads(result.stdout)
    return data


def test_plan_json_states_the_sampled_power(tmp_path: Path) -> None:
    data = _plan_json(
        tmp_path, VLLM + SAMPLED_GRID + "determinism: {sampled: distribution, samples: 8}\n"
    )
    assert data["n_samples"] == 48
    assert data["sampled_power"].startswith("distribution test:")
    assert "alpha 0.01 per config" in data["sampled_power"]
    # 8 samples per prompt cannot see a 15% shift: the line says passes would be unproven.
    assert "raise determinism.samples" in data["sampled_power"]
    # The time of the samples is in the estimate.
    assert (
        data["estimated_seconds"]
        > _plan_json(
            tmp_path, VLLM + SAMPLED_GRID + "determinism: {sampled: repeats, samples: 8}\n"
        )["estimated_seconds"]
    )


def test_plan_json_has_no_sampled_power_without_samples(tmp_path: Path) -> None:
    data = _plan_json(tmp_path, "grid: {budget: [8], topk: [1], temperature: [0, 0.7]}\n")
    assert "sampled_power" not in data
    assert "n_samples" not in data


def test_plan_table_prints_the_sampled_power(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\n" + VLLM + SAMPLED_GRID + "determinism: {sampled: distribution}\n" + WORKLOAD
    )
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "distribution test:" in out
    assert "note: 2 sampled speculative point(s) (temperature > 0): distribution" in out


def test_coupled_forced_on_a_rejection_sampling_engine_says_it_will_be_unproven() -> None:
    plan = plan_of(VLLM + SAMPLED_GRID + "determinism: {sampled: coupled}\n")
    notes = sampled_notes(plan)
    assert any("not expected to advertise coupled sampling" in n for n in notes)
    assert plan.n_samples == 0


# --- scored ---------------------------------------------------------------------------------------

SGLANG = RUNTIMES["sglang"]


def test_scored_draws_the_speculative_samples_and_only_the_ar_control() -> None:
    """Scored needs no AR reference set: the AR baseline draws its control once, and only what
    its measured requests lack (7 of 8 per prompt here: `test_scored_draws_only_what_the_
    measured_tokens_lack`); a distribution test draws two full sets; each sample and each
    sampled measured request is scored once, plus one AR output per prompt rescored by the
    speculative server (its scoring path's agreement)."""
    scored = plan_of(VLLM + SAMPLED_GRID + "determinism: {samples: 8}\n")
    distribution = distribution_plan(samples=8)
    assert SampledChecks.of(scored.spec).check == "scored"
    assert all(host.checks.baseline_roles == ("control",) for host in scored.hosts)
    assert draws(scored)["local-ar-cg0-t0.7-c1"] == (("control",), None)
    assert draws(scored)["local-b2-cg0-t0.7-c1"] == (("test",), None)
    assert (scored.n_samples, distribution.n_samples) == (28, 48)
    assert scored.n_scores == 28 + 8 + 2 and distribution.n_scores == 0
    assert scored.restarts == distribution.restarts  # vLLM scores its own: no extra start
    (note,) = sampled_notes(scored)
    assert "7 per prompt drawn beside them (1 of them draw" in note
    assert "each server scores its own samples" in note


def test_sglang_scored_adds_an_ar_start_after_the_speculative_configs_of_each_host() -> None:
    body = SGLANG + "hosts: [local, {name: b, address: b}]\nshard: true\n"
    grid = "grid: {budget: [7, 16], topk: [1], block_size: [8], temperature: [0, 0.7]}\n"
    plan = plan_of(body + grid)
    for host in plan.hosts:
        *measured, scorer = host.steps
        assert scorer.scoring and not scorer.request_configs
        assert scorer.server_config.mode == "ar" and scorer.server_config.label == "ar-cg0-rs1"
        assert all(not s.scoring for s in measured)
        scored = host.scored_by(scorer)
        assert scored and {p.server_config.mode for p in scored} == {"speculative"}
        assert {p.request_config.temperature for p in scored} == {0.7}
    greedy = plan_of(body + grid.replace("[0, 0.7]", "[0]"))
    assert plan.restarts == greedy.restarts + 2  # one per host
    assert not any(s.scoring for h in greedy.hosts for s in h.steps)
    assert not any("baseline checks" in n for n in plan.notes)
    (note,) = sampled_notes(plan)
    assert "scored by the AR server, started once more on each host" in note
    steps = plan.to_dict()["hosts"][0]["steps"]
    assert steps[-1]["scoring"] is True and steps[-1]["request_configs"] == []


def test_scored_forced_on_an_engine_without_a_scoring_path_says_it_will_be_unproven() -> None:
    plan = plan_of(
        RUNTIMES["openai"] + "grid: {temperature: [0.7]}\ndeterminism: {sampled: scored}\n"
    )
    (note,) = sampled_notes(plan)
    assert "openai has no scoring path" in note and "unproven" in note


# --- what the measured requests provide ----------------------------------------------------------


def _provisions(plan: Plan) -> dict[str, Provision]:
    return {p.point_id: provision_of(p, plan.spec) for p in plan.points()}


def test_scored_draws_only_what_the_measured_tokens_lack() -> None:
    """Needed: the tokens of `samples` samples of `sample_length` per prompt (2 x 8 x 24 = 384:
    the power the plan states); each point's 2 measured requests give up to 2 x 24 = 48 of them
    (1 sample's worth per prompt), so 7 per prompt are drawn, once per server config and
    sampling, and the plan counts and times only those."""
    plan = plan_of(VLLM + SAMPLED_GRID + "determinism: {samples: 8}\n")
    provisions = _provisions(plan)
    spec_point = provisions["local-b2-cg0-t0.7-c1"]
    assert (spec_point.needed, spec_point.provided, spec_point.extra) == (8, 1, 7)
    assert provisions["local-ar-cg0-t0.7-c1"] == spec_point  # the AR control alike
    assert provisions["local-b2-cg0-t0-c1"].needed == 0  # greedy: no sampled proof
    per_prompt = {p.point_id: (p.samples, p.samples_per_prompt) for p in plan.points()}
    assert per_prompt["local-b2-cg0-t0.7-c1"] == (("test",), 7)
    assert per_prompt["local-ar-cg0-t0.7-c1"] == (("control",), 7)
    assert plan.n_samples == 2 * 2 * 7  # two drawing points (AR, speculative) x 2 prompts x 7
    # Each measured sampled request is scored (2 points x 2 loads x 2 requests) beside the
    # samples, and the speculative server rescores one AR output per prompt.
    assert plan.n_scores == 28 + 8 + 2


def test_no_sample_is_drawn_where_the_measured_tokens_suffice() -> None:
    """4 samples of 8 tokens per prompt (32 tokens) are needed; 3 repeats of up to 24 tokens
    give 72 per prompt: no point draws, the T > 0 proof costs only its scoring."""
    workload = WORKLOAD + "  repeats: 3\n"
    plan = plan_of(VLLM + SAMPLED_GRID + "determinism: {samples: 4, sample_tokens: 8}\n", workload)
    sampled = [p for p in plan.points() if p.request_config.temperature > 0]
    assert {(p.samples, p.samples_per_prompt, p.samples_from) for p in sampled} == {((), 0, None)}
    assert {provision_of(p, plan.spec).extra for p in sampled} == {0}
    # 3 x 24 tokens give 9 samples of 8 per prompt: all 4 needed.
    assert provision_of(sampled[0], plan.spec).provided == 4
    assert plan.n_samples == 0 and plan.n_scores == 4 * 2 * 3 + 2 * 2
    assert proof_time(plan).total == pytest.approx(
        math.ceil((4 * 2 * 3 + 2 * 2) / 8) * SCORE_STEPS / DEFAULT_TOK_S
    )


def test_held_prompts_provide_nothing() -> None:
    """A held prompt's measured requests mask EOS where the engine takes `min_tokens`, so they
    do not sample the target's distribution: they provide no sample."""
    held = WORKLOAD.replace("text: hi}", "text: hi, hold_output: true}")
    plan = plan_of(VLLM + SAMPLED_GRID + "determinism: {samples: 8}\n", held)
    point = next(p for p in plan.points() if p.point_id == "local-b2-cg0-t0.7-c1")
    # Only prompt b's request counts: 24 of the 384 tokens, under one sample per prompt.
    assert (provision_of(point, plan.spec).provided, point.samples_per_prompt) == (0, 8)


def test_distribution_draws_all_its_samples_and_says_why() -> None:
    provision = provision_of(
        next(p for p in distribution_plan(samples=8).points() if p.samples == ("test",)),
        distribution_plan(samples=8).spec,
    )
    assert (provision.needed, provision.provided, provision.extra) == (8, 0, 8)
    assert "two-sample test" in provision.why


def test_the_plan_says_what_is_needed_provided_and_drawn_and_why(tmp_path: Path) -> None:
    plan = plan_of(VLLM + SAMPLED_GRID + "determinism: {samples: 8}\n")
    (note,) = sampled_notes(plan)
    assert "needs 8 samples of 24 tokens per prompt" in note
    assert "measured requests give up to 1 per prompt" in note
    assert "7 per prompt drawn beside them" in note
    assert "detects a sampler" in note  # the power that needs them
    data = _plan_json(tmp_path, VLLM + SAMPLED_GRID + "determinism: {samples: 8}\n")
    proof = {row["point_id"]: row for row in data["sampled_proof"]}
    assert proof["local-b2-cg0-t0.7-c4"] == {
        "point_id": "local-b2-cg0-t0.7-c4",
        "needed": 8,
        "provided": 1,
        "extra": 7,
        "drawn_by": "local-b2-cg0-t0.7-c1",
        "why": proof["local-b2-cg0-t0.7-c1"]["why"],
    }
    assert "local-b2-cg0-t0-c1" not in proof
