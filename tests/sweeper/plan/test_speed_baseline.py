"""Two baselines: `runtime.speed_baseline` adds, beside each exactness AR baseline (the
speculative configs' own flags), an AR twin started with the production flags; every
speculative point names both, and only the twin's command differs."""

from __future__ import annotations

from sweeper.engines.sglang import SGLang
from sweeper.plan import build_plan
from sweeper.spec import parse_spec

SPEC = """name: t
hosts: [{name: a, address: a}, {name: b, address: b}]
shard: true
runtime:
  engine: sglang
  preset: sglang-ddtree
  model: m
  draft: d
  extra_args: [--page-size, "1", --attention-backend, triton]
  speed_baseline: {attention_backend: fa3, page_size: null}
grid: {budget: [7, 16], topk: [4], block_size: [16], cuda_graph: [true, false]}
workload: {prompts: [{id: a, text: hi}]}
"""


def test_each_host_gets_both_baselines_and_points_name_both() -> None:
    spec = parse_spec(SPEC)
    plan = build_plan(spec)
    engine = SGLang(spec.runtime)
    for host in plan.hosts:
        labels = [step.server_config.label for step in host.steps]
        assert labels[:4] == ["ar-cg1", "ar-cg0", "ar-speed-cg1", "ar-speed-cg0"]
        argv = {
            step.server_config.label: engine.command(step.server_config)[0] for step in host.steps
        }
        assert argv["ar-cg1"][-4:] == ["--page-size", "1", "--attention-backend", "triton"]
        assert argv["ar-speed-cg1"][-2:] == ["--attention-backend", "fa3"]
        assert "--page-size" not in argv["ar-speed-cg1"]
        for point in host.points():
            if point.server_config.mode == "speculative":
                cg = "cg1" if point.server_config.params["cuda_graph"] else "cg0"
                assert point.baseline_point_id == f"{host.name}-ar-{cg}-t0-c1"
                assert point.speed_baseline_point_id == f"{host.name}-ar-speed-{cg}-t0-c1"
    assert any(note.startswith("speed baseline:") for note in plan.notes)
