"""The papers' layout: datasets x methods, each method's best config per dataset, restarts as
intervals (a restart's speedup over the AR restarts' mean), and a reference's tau flag, which
fires only on tau and only beyond the tolerance (at the interval's top, where there are
restarts)."""

from __future__ import annotations

import pandas as pd
import pytest

from sweeper.analysis.datasets import dataset_points
from sweeper.analysis.objective import Interval
from sweeper.report.paper_layout import method_of, paper_table, reference_of
from sweeper.spec.reference import ReferenceRow, ReferenceSpec, ReferenceTable

CONFIG = {"host": "h", "engine": "ddtree_runtime", "block_size": 8, "cuda_graph": False}
LOAD = {"temperature": 0.0, "max_tokens": 8, "concurrency": 1}
#: (label, mode, budget, topk) of the server configs.
CONFIGS = [
    ("ar", "ar", 0, None),
    ("b8-k1-bs8-cg0", "speculative", 8, 1),
    ("b16-k1-bs8-cg0", "speculative", 16, 1),
    ("b16-k4-bs8-cg0", "speculative", 16, 4),
]


def _frames(
    rates: dict[tuple[str, int, str], float], rounds: dict[tuple[str, int, str], int]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Points (every config x restart in `rates`) and one request of 24 tokens per (point,
    dataset), whose e2e makes its rate `rates[label, restart, dataset]` tok/s."""
    points, requests = [], []
    for label, mode, budget, topk in CONFIGS:
        for restart in (0, 1):
            if not any(k[:2] == (label, restart) for k in rates):
                continue
            pid = f"{label}-rs{restart}" if restart else label
            server_label = f"{label}-rs{restart}" if restart else label
            row = {**CONFIG, **LOAD, "point_id": pid, "mode": mode, "budget": budget}
            row.update(topk=topk, server_label=server_label, restart=restart, status="ok")
            points.append({**row, "determinism": "exact"})
            for (lab, rs, dataset), rate in rates.items():
                if (lab, rs) != (label, restart):
                    continue
                requests.append(
                    {
                        "point_id": pid,
                        "prompt_id": f"{dataset}-1",
                        "dataset": dataset,
                        "output_tokens": 24,
                        "e2e": 24 / rate,
                        "verify_rounds": rounds.get((lab, rs, dataset)),
                        "verdict": "exact" if mode != "ar" else "n/a",
                        "error": None,
                    }
                )
    return pd.DataFrame(points), pd.DataFrame(requests)


def _table(table_rows: list[ReferenceRow], tolerance: float = 0.2) -> ReferenceSpec:
    table = ReferenceTable(name="paper", source="a test", rows=table_rows)
    return ReferenceSpec(table=table, tolerance=tolerance)


def test_method_of_a_config() -> None:
    assert method_of({"mode": "ar", "topk": None}) == "ar"
    assert method_of({"mode": "speculative", "topk": 1}) == "chain"
    assert method_of({"mode": "speculative", "topk": None}) == "chain"  # an engine without topk
    assert method_of({"mode": "speculative", "topk": 4.0}) == "tree"


def test_each_method_shows_its_best_config_per_dataset() -> None:
    rates = {
        ("ar", 0, "gsm8k"): 10.0,
        ("ar", 0, "mt-bench"): 10.0,
        ("b8-k1-bs8-cg0", 0, "gsm8k"): 20.0,  # the chain's best on gsm8k
        ("b8-k1-bs8-cg0", 0, "mt-bench"): 12.0,
        ("b16-k1-bs8-cg0", 0, "gsm8k"): 15.0,
        ("b16-k1-bs8-cg0", 0, "mt-bench"): 14.0,  # ... and on mt-bench
        ("b16-k4-bs8-cg0", 0, "gsm8k"): 30.0,
        ("b16-k4-bs8-cg0", 0, "mt-bench"): 25.0,
    }
    rounds = {k: 8 for k in rates if k[0] != "ar"}
    points, requests = _frames(rates, rounds)
    table = paper_table(dataset_points(points, requests))
    assert table.columns == ["ar", "chain", "tree"]
    assert [(r.temperature, r.dataset) for r in table.rows] == [(0.0, "gsm8k"), (0.0, "mt-bench")]
    gsm8k, mt_bench = table.rows
    assert gsm8k.cells["chain"].config == "b8 k1 bs8"
    assert gsm8k.cells["chain"].speedup == Interval.of([2.0])
    assert mt_bench.cells["chain"].config == "b16 k1 bs8"
    assert mt_bench.cells["chain"].speedup == Interval.of([1.4])
    assert gsm8k.cells["tree"].speedup == Interval.of([3.0])
    assert gsm8k.cells["tree"].tau == Interval.of([3.0])  # 24 tokens / 8 rounds
    assert gsm8k.cells["ar"].speedup == Interval.of([1.0]) == gsm8k.cells["ar"].tau
    assert table.flags == []
    by_config = paper_table(dataset_points(points, requests), by="config")
    assert by_config.columns == ["ar", "b8 k1 bs8", "b16 k1 bs8", "b16 k4 bs8"]
    assert by_config.rows[1].cells["b8 k1 bs8"].speedup == Interval.of([1.2])


def test_restarts_are_intervals_over_the_ar_restarts_mean() -> None:
    rates = {
        ("ar", 0, "gsm8k"): 10.0,
        ("ar", 1, "gsm8k"): 30.0,  # the AR restarts' mean rate is 20
        ("b16-k4-bs8-cg0", 0, "gsm8k"): 40.0,
        ("b16-k4-bs8-cg0", 1, "gsm8k"): 60.0,
    }
    rounds = {("b16-k4-bs8-cg0", 0, "gsm8k"): 8, ("b16-k4-bs8-cg0", 1, "gsm8k"): 6}
    points, requests = _frames(rates, rounds)
    dpoints = dataset_points(points, requests)
    assert sorted(dpoints["speedup"].dropna()) == [2.0, 3.0]
    (row,) = paper_table(dpoints).rows
    assert row.cells["tree"].speedup == Interval.of([2.0, 3.0])
    assert row.cells["tree"].tau == Interval.of([3.0, 4.0])
    assert row.cells["tree"].speedup.low is not None


@pytest.mark.parametrize(
    ("published_tau", "flagged"),
    [(3.6, False), (3.9, True), (10.0, True)],  # tolerance 20%: flagged below 3.12, 3.2, 8
)
def test_reference_flags_a_tau_below_its_tolerance(published_tau: float, flagged: bool) -> None:
    rates = {("ar", 0, "gsm8k"): 10.0, ("b16-k4-bs8-cg0", 0, "gsm8k"): 30.0}
    points, requests = _frames(rates, {("b16-k4-bs8-cg0", 0, "gsm8k"): 8})  # tau 3.0
    published = ReferenceRow(
        temperature=0, dataset="gsm8k", method="tree", speedup=1.0, tau=published_tau
    )
    table = paper_table(dataset_points(points, requests), reference=_table([published]))
    cell = table.rows[0].cells["tree"]
    assert cell.reference == published
    assert cell.tau_low is flagged
    assert len(table.flags) == flagged
    if flagged:
        assert table.flags[0].startswith("gsm8k T=0 tree (b16 k4 bs8): tau 3.00 is ")


def test_speedup_far_below_the_reference_is_never_flagged() -> None:
    rates = {("ar", 0, "gsm8k"): 10.0, ("b16-k4-bs8-cg0", 0, "gsm8k"): 11.0}
    points, requests = _frames(rates, {("b16-k4-bs8-cg0", 0, "gsm8k"): 8})
    published = ReferenceRow(temperature=0, dataset="gsm8k", method="tree", speedup=7, tau=3)
    table = paper_table(dataset_points(points, requests), reference=_table([published]))
    assert table.rows[0].cells["tree"].speedup == Interval.of([1.1])
    assert table.flags == []


def test_the_interval_top_decides_with_restarts() -> None:
    """Restart taus 2.4 and 3.2 (mean 2.8): below 3.6 x 0.8 = 2.88 on the mean, but the 95%
    interval reaches above it, so it is not flagged; with a published 10 it is."""
    rates = {
        ("ar", 0, "gsm8k"): 10.0,
        ("b16-k4-bs8-cg0", 0, "gsm8k"): 20.0,
        ("b16-k4-bs8-cg0", 1, "gsm8k"): 20.0,
    }
    rounds = {("b16-k4-bs8-cg0", 0, "gsm8k"): 10, ("b16-k4-bs8-cg0", 1, "gsm8k"): 7.5}
    points, requests = _frames(rates, rounds)  # type: ignore[arg-type]
    dpoints = dataset_points(points, requests)
    for published_tau, flagged in ((3.6, False), (10.0, True)):
        row = ReferenceRow(temperature=0, dataset="gsm8k", method="tree", tau=published_tau)
        table = paper_table(dpoints, reference=_table([row]))
        assert table.rows[0].cells["tree"].tau_low is flagged


def test_reference_is_read_back_from_a_manifest_spec() -> None:
    spec = _table([ReferenceRow(temperature=0, dataset="gsm8k", method="tree", tau=3)])
    assert reference_of({"reference": spec.model_dump()}) == spec
    assert reference_of({"name": "old run"}) is None


def test_a_reference_for_another_model_is_said() -> None:
    rates = {("ar", 0, "gsm8k"): 10.0, ("b16-k4-bs8-cg0", 0, "gsm8k"): 30.0}
    points, requests = _frames(rates, {("b16-k4-bs8-cg0", 0, "gsm8k"): 8})
    table = ReferenceTable(
        name="paper",
        source="a test",
        model="Qwen/Qwen3-8B",
        rows=[ReferenceRow(temperature=0, dataset="gsm8k", method="tree", tau=3)],
    )
    reference = ReferenceSpec(table=table)
    dpoints = dataset_points(points, requests)
    assert (
        paper_table(dpoints, reference=reference, served_model="/data/hf/Qwen3-8B").model_note == ""
    )
    other = paper_table(dpoints, reference=reference, served_model="smollm2-135m").model_note
    assert other == (
        "paper's figures are for Qwen/Qwen3-8B; this run served smollm2-135m: its taus are "
        "another model's"
    )


def test_a_withheld_speedup_is_no_method_s_best_and_says_why() -> None:
    rates = {
        ("ar", 0, "gsm8k"): 10.0,
        ("b8-k1-bs8-cg0", 0, "gsm8k"): 30.0,  # 3.0x at tau 1.5: impossible
        ("b16-k1-bs8-cg0", 0, "gsm8k"): 15.0,  # 1.5x at tau 3.0
        ("b16-k4-bs8-cg0", 0, "gsm8k"): 30.0,  # 3.0x at tau 3.0, its baseline's host busy
    }
    rounds = {("b8-k1-bs8-cg0", 0, "gsm8k"): 16, ("b16-k1-bs8-cg0", 0, "gsm8k"): 8}
    rounds[("b16-k4-bs8-cg0", 0, "gsm8k")] = 8
    points, requests = _frames(rates, rounds)
    points["baseline_busy"] = points["budget"] == 16
    points.loc[points["topk"] == 1, "baseline_busy"] = False
    (row,) = paper_table(dataset_points(points, requests)).rows
    chain, tree = row.cells["chain"], row.cells["tree"]
    assert chain.config == "b16 k1 bs8" and chain.withheld == ""  # not the impossible 3.0x
    assert tree.config == "b16 k4 bs8"  # the tree's only config: shown, marked
    assert tree.withheld == "a speedup measured on a busy host (it or its baseline)"
    by_config = paper_table(dataset_points(points, requests), by="config").rows[0].cells
    assert by_config["b8 k1 bs8"].withheld.startswith(
        "an impossible speedup (above tau): speedup 3.00x above tau 1.50: "
    )
