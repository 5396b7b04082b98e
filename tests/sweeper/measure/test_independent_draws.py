"""The scored test treats every scored token as an independent draw. A seeded sampler draws the
same noise at the same position for the same seed (the runtime's uniform is a function of seed
and position), so two outputs at one seed are one draw: no seed is shared between the samples a
point draws; each measured request at temperature > 0 draws its own seed (its AR twin's, for the
coupled comparison), so each is scored, and where two share one (an older run's, all at the
workload's seed) one per seed is."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sweeper.measure.drive import measured_requests, point_load, point_prompts
from sweeper.measure.point import point_columns, request_rows
from sweeper.measure.samples import sample_specs
from sweeper.measure.scores import request_outputs
from sweeper.measure.workload import WorkloadResult
from sweeper.plan import build_plan
from sweeper.plan.model import provision_of
from sweeper.plan.points import Point
from sweeper.results.records import PointRecord, RequestRecord
from sweeper.results.store import RunStore
from sweeper.spec import Spec
from tests.sweeper.plan.test_sampling import SAMPLED_GRID, WORKLOAD, spec_of


def _sampled_points() -> tuple[Spec, list[Point]]:
    """The plan's sampled points, each drawing 4 samples per prompt (whatever its measured
    requests give: here only the seeds are judged)."""
    spec = spec_of(SAMPLED_GRID + "determinism: {sampled: scored, samples: 4}\n")
    points = [
        replace(p, samples_per_prompt=4)
        for p in build_plan(spec).points()
        if p.request_config.temperature > 0
    ]
    return spec, points


def test_no_seed_is_shared_between_the_samples_of_two_prompts() -> None:
    spec, points = _sampled_points()
    specs = sample_specs(points[0], spec.workload, spec.determinism, ["test", "control"])
    seeds = [request.seed for _, _, request in specs]
    assert len(specs) == 2 * 2 * 4  # roles x prompts x samples
    assert len(set(seeds)) == len(seeds)


def test_measured_requests_at_one_seed_are_scored_once() -> None:
    spec, points = _sampled_points()
    point = points[0]
    rows = [
        {"run_id": "r", "host": "h", "point_id": point.point_id, "attempt": "a", "prompt_id": p,
         "repeat": k, "seed": 7, "token_ids": [1, 2, 3], "error": None}
        for p in ("a", "b") for k in range(3)
    ]  # fmt: skip
    assert len(request_outputs(point, rows, spec.workload)) == 1
    unseeded = [{**row, "seed": None} for row in rows]
    assert len(request_outputs(point, unseeded, spec.workload)) == 6
    own = [{**row, "seed": n} for n, row in enumerate(rows)]
    assert len(request_outputs(point, own, spec.workload)) == 6


def test_each_choice_of_a_request_is_a_draw_of_its_own() -> None:
    """n > 1: a request's choices draw at seeds derived from its seed and their index, so each
    is scored, under an index of its own (request index x n + choice)."""
    spec, points = _sampled_points()
    point = points[0]
    rows = [
        {"run_id": "r", "host": "h", "point_id": point.point_id, "attempt": "a", "prompt_id": "a",
         "repeat": 0, "index": 1, "n": 3, "choice": c, "seed": 7, "token_ids": [1, 2, 3],
         "error": None}
        for c in range(3)
    ]  # fmt: skip
    assert [o.index for o in request_outputs(point, rows, spec.workload)] == [3, 4, 5]


def test_no_choice_of_a_sample_shares_a_seed_with_another_sample() -> None:
    """n > 1: vLLM draws choice i of a request at seed + i (its ParentRequest), so the samples'
    seeds are n apart: sample k's choice 1 is never sample k + 1's choice 0 (one draw twice)."""
    spec = spec_of(
        SAMPLED_GRID + "determinism: {sampled: scored, samples: 4}\n",
        WORKLOAD + "  n: 3\n",
    )
    point = next(p for p in build_plan(spec).points() if p.request_config.temperature > 0)
    specs = sample_specs(
        replace(point, samples_per_prompt=4), spec.workload, spec.determinism, ["test", "control"]
    )
    drawn = [(request.seed or 0) + choice for _, _, request in specs for choice in range(3)]
    assert len(drawn) == 2 * 2 * 4 * 3
    assert len(set(drawn)) == len(drawn)


def _sent(spec: Spec, point: Point) -> list[int | None]:
    rc = point.request_config
    load = point_load(rc, spec.workload, point.length)
    return [r.seed for r in measured_requests(point, point_prompts(rc, spec.workload), load)]


def test_measured_requests_draw_their_own_seeds_and_are_scored_as_the_plan_counts(
    tmp_path: Path,
) -> None:
    """At temperature > 0 each measured request carries a seed of its own, derived from the
    workload's seed, its request config and its index (a resumed run sends the same; the AR twin
    at the same load the same, for the coupled comparison; another load and the samples other
    ones); recorded in its request row, read back through the store, each is an output the
    scored proof scores, as many per prompt as the plan counted."""
    grid = "grid: {budget: [8], topk: [1], temperature: [0, 0.7]}\n"
    spec = spec_of(grid + "determinism: {sampled: scored, samples: 4}\n")
    points = {p.point_id: p for p in build_plan(spec).points()}
    point, other_load = points["local-b8-k1-bs8-cg0-t0.7-c1"], points["local-b8-k1-bs8-cg0-t0.7-c4"]
    seeds = _sent(spec, point)
    assert len(seeds) == len(set(seeds)) == 2 and None not in seeds
    assert _sent(spec, points[point.baseline_point_id or ""]) == seeds  # its AR twin
    assert _sent(spec, point) == seeds  # the same on resume
    assert not set(seeds) & set(_sent(spec, other_load))
    samples = sample_specs(point, spec.workload, spec.determinism, ["test", "control"])
    assert not set(seeds) & {r.seed for _, _, r in samples}
    # Greedy requests keep the workload's seed, as before.
    assert set(_sent(spec, points["local-b8-k1-bs8-cg0-t0-c1"])) == {7}

    rc = point.request_config
    load = point_load(rc, spec.workload, point.length)
    sent = measured_requests(point, point_prompts(rc, spec.workload), load)
    result = WorkloadResult(
        [
            (r, {"index": i, "token_ids": [i + 1] * 5, "output_tokens": 5})
            for i, r in enumerate(sent)
        ],
        1.0,
    )
    key = point_columns("r", point, "a1", "ddtree_runtime")
    rows = request_rows(result, key, near_tie_margin=None)
    store = RunStore.create(
        tmp_path,
        {"sweep": "s", "sweeper_version": "0", "spec": {"name": "s"}, "runtime_source_hash": "h"},
    )
    record = PointRecord(**key, status="ok", started_at="t0", finished_at="t1")
    store.append_point(record, [RequestRecord(**row) for row in rows])
    back = store.requests()
    assert [row["seed"] for row in back] == seeds
    outputs = request_outputs(point, back, spec.workload)
    assert [(o.role, o.source, o.prompt_id, o.index) for o in outputs] == [
        ("test", "request", "a", 0),
        ("test", "request", "b", 1),
    ]
    per_prompt = len(outputs) // len(spec.workload.prompts)
    assert per_prompt == provision_of(point, spec).provided == 1
