"""The scored proof's AR-vs-AR control covers every processor a point uses: each speculative
point is judged beside the AR point of its own request config, whose samples (its own, or shared
with another load's) were drawn with the same processors, so a control never vouches for a
request it did not make."""

from __future__ import annotations

from sweeper.plan import build_plan
from sweeper.spec import parse_spec

SPEC = (
    "name: t\n"
    "grid: {budget: [8], topk: [1], temperature: [0.7], repetition_penalty: [1.0, 1.3],"
    " frequency_penalty: [0, 0.5]}\n"
    "determinism: {sampled: scored, samples: 8}\n"
    "workload:\n"
    "  prompts: [{id: a, text: hi}]\n"
    "  concurrency: [1, 4]\n"
    "  seed: 7\n"
    "  max_tokens: 24\n"
    "  logit_bias: {13: -2.5}\n"
)


def test_each_points_control_is_drawn_with_its_own_processors() -> None:
    points = {p.point_id: p for p in build_plan(parse_spec(SPEC)).points()}
    speculative = [p for p in points.values() if p.server_config.mode != "ar"]
    assert len({p.request_config.sampling_key for p in speculative}) == 4
    for point in speculative:
        control = points[point.baseline_point_id or ""]
        drawn = points.get(control.samples_from or "", control)
        assert control.request_config == point.request_config
        assert drawn.request_config.sampling_key == point.request_config.sampling_key
        asked = drawn.request_config
        mine = point.request_config
        assert (asked.repetition_penalty, asked.frequency_penalty, asked.logit_bias) == (
            mine.repetition_penalty,
            mine.frequency_penalty,
            mine.logit_bias,
        )
