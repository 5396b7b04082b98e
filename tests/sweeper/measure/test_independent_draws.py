"""The scored test treats every scored token as an independent draw. A seeded sampler draws the
same noise at the same position for the same seed (the runtime's uniform is a function of seed
and position), so two outputs at one seed are one draw: no seed is shared between the samples a
point draws, and of the measured requests (all at the workload's seed) one per seed is scored."""

from __future__ import annotations

from sweeper.measure.samples import sample_specs
from sweeper.measure.scores import request_outputs
from sweeper.plan import build_plan
from sweeper.plan.points import Point
from sweeper.spec import Spec
from tests.sweeper.plan.test_sampling import SAMPLED_GRID, WORKLOAD, spec_of


def _sampled_points() -> tuple[Spec, list[Point]]:
    spec = spec_of(SAMPLED_GRID + "determinism: {sampled: scored, samples: 4}\n")
    points = [p for p in build_plan(spec).points() if p.request_config.temperature > 0]
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
    specs = sample_specs(point, spec.workload, spec.determinism, ["test", "control"])
    drawn = [(request.seed or 0) + choice for _, _, request in specs for choice in range(3)]
    assert len(drawn) == 2 * 2 * 4 * 3
    assert len(set(drawn)) == len(drawn)
