"""Effective config, not labels: the presets' own rules (PR #29907's DDTREE: a chain at budget
<= block_size - 1 with topk unused, else width min(max(budget // (block_size - 1) + 1, 2), topk
cap 6)) make the plan measure each behaviour once; and shard dealing never lets a host stand
for a factor's level."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sweeper.catalog.effective import effective
from sweeper.catalog.records import PRESETS
from sweeper.plan import build_plan
from sweeper.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[3]
DDTREE = PRESETS["sglang-ddtree"][1].effective


def test_the_pr_29907_width_rule() -> None:
    def shape(budget: int, topk: int | None, block: int = 16) -> str:
        params = {"budget": budget, "block_size": block, **({"topk": topk} if topk else {})}
        return str(effective(DDTREE, params)["shape"])

    assert shape(7, 1) == shape(7, 4) == "chain of 7"
    assert shape(15, 4) == "chain of 15"  # budget == block_size - 1: still the chain
    assert shape(16, 1).endswith("width 1, depth 15")  # the cap below the rule's minimum 2
    assert shape(16, 4).endswith("width 2, depth 15")  # 16 // 15 + 1 = 2
    assert shape(32, 4) == shape(32, 6) == shape(32, None)  # 32 // 15 + 1 = 3 < 4: the default
    assert shape(32, 4).endswith("width 3, depth 15")
    assert shape(64, 4).endswith("width 4, depth 15") and shape(64, None).endswith(
        "width 5, depth 15"
    )
    # DFLASH forces topk to 1 whatever the label says.
    dflash = PRESETS["sglang-dflash"][1].effective
    assert effective(dflash, {"block_size": 16})["topk"] == 1


def test_b300_twelve_labels_are_ten_behaviours_and_each_host_runs_both_graph_levels() -> None:
    plan = build_plan(load_spec(ROOT / "sweeps" / "b300.yaml"))
    speculative = [
        step.server_config
        for host in plan.hosts
        for step in host.steps
        if step.server_config.mode == "speculative"
    ]
    labels = [sc.label for sc in speculative] + [c for sc in speculative for c in sc.covers]
    assert len(labels) == 12 and len(speculative) == 10
    assert sorted(c for sc in speculative for c in sc.covers) == [
        "b7-k4-bs16-cg0",
        "b7-k4-bs16-cg1",
    ]
    notes = " ".join(plan.notes)
    assert "b7-k4-bs16-cg1 is b7-k1-bs16-cg1 (chain of 7" in notes
    for host in plan.hosts:
        configs = [s.server_config for s in host.steps if s.server_config.mode == "speculative"]
        for key in ("cuda_graph", "budget", "topk"):
            assert {sc.params[key] for sc in configs} == {sc.params[key] for sc in speculative}, (
                host.name,
                key,
            )
        # Each host's own AR baselines, one per cuda_graph level, judge its points.
        assert sorted(s.server_config.label for s in host.steps[:2]) == ["ar-cg0", "ar-cg1"]
        for point in host.points():
            assert point.host == host.name
            if point.baseline_point_id:
                assert point.baseline_point_id.startswith(f"{host.name}-ar-")
    # 2 AR + 2 speed-baseline twins (flashinfer) + 5 behaviours, on each host; then the AR
    # started once more to score the sampled points (PR #29907 refuses logprobs on DDTREE).
    assert Counter(len(h.steps) for h in plan.hosts) == Counter({10: 2})
    assert all(h.steps[-1].scoring and h.steps[-1].server_config.mode == "ar" for h in plan.hosts)


def test_shard_says_where_a_level_cannot_run_on_every_host() -> None:
    hosts = "hosts: [{name: a, address: a}, {name: b, address: b}, {name: c, address: c}]\n"
    spec = parse_spec(
        "name: t\n" + hosts + "shard: true\n"
        "grid: {budget: [8], topk: [1], cuda_graph: [true, false]}\n"
        "workload: {prompts: [{id: a, text: hi}]}\n"
    )
    notes = build_plan(spec).notes
    assert any("cuda_graph=True runs on a only" in n and "not on b, c" in n for n in notes), notes


def test_validate_refuses_label_duplicates_where_the_spec_asks(tmp_path: Path) -> None:
    text = (ROOT / "sweeps" / "b300.yaml").read_text()
    text = text.replace("shard: true", "shard: true\nsame_behaviour: refuse", 1)
    path = tmp_path / "b300.yaml"
    path.write_text(text)
    line = text.splitlines().index("  topk: [1, 4]") + 1
    with pytest.raises(Exception, match=rf"b300.yaml:{line}: grid.topk: topk 1 and 4 are one"):
        load_spec(path)
    assert "chain, topk unused" in str(_error(path))


def _error(path: Path) -> Exception:
    try:
        load_spec(path)
    except Exception as exc:  # noqa: BLE001 - the spec error, whatever its class
        return exc
    raise AssertionError("not refused")
