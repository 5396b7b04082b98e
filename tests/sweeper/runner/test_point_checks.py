"""The runner proves a sampled point by the check the point carries from the plan, whatever spec
it is handed: a runner given a spec that asks another check scores, draws and judges the point
as planned. Pure: planned points in, no server asked."""

from __future__ import annotations

from sweeper.plan import build_plan
from sweeper.progress import PlainProgress
from sweeper.runner.sampled import Known, SampledProof
from sweeper.runner.scoring import ScoredProof
from tests.sweeper.plan.test_point_checks import spec_of


def test_the_runner_reads_the_check_from_the_point_not_the_spec() -> None:
    plan = build_plan(spec_of("vllm", "auto"))  # scored, each server its own samples
    other = spec_of("vllm", "distribution")
    scoring, sampled = ScoredProof(other), SampledProof(other, PlainProgress())
    known = Known(done={}, baseline_rows={}, points={p.point_id: p for p in plan.points()})
    for point in plan.points():
        sampled_point = point.request_config.temperature > 0
        assert scoring.applies(point) is sampled_point, point.point_id
        # A distribution judge would test its samples; a scored point has none to test.
        assert sampled.judge(point, None, known) == (None, {}), point.point_id
