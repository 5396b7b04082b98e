"""Per-request stats: stage times through the clock, exposure counts and the accepted histogram."""

from __future__ import annotations

import dataclasses
import time

import pytest

from ddtree_runtime.stats import STAGES, TOTALLED, RequestStats, RoundShape, StageClock

NO_TIME = dict.fromkeys(STAGES, 0.0)


def test_stage_clock_adds_each_stage_and_refuses_unknown_ones() -> None:
    clock = StageClock()
    with clock.stage("draft"):
        time.sleep(0.01)
    with clock.stage("draft"):
        pass
    assert clock.seconds["draft"] >= 0.01 and clock.seconds["verify"] == 0.0
    with pytest.raises(KeyError, match="unknown stage 'emit'"), clock.stage("emit"):
        pass
    with pytest.raises(RuntimeError), clock.stage("tree"):
        raise RuntimeError("a failing stage is still timed")
    assert clock.seconds["tree"] > 0.0


def test_rounds_accumulate_exposure() -> None:
    stats = RequestStats(accepted_hist=[0] * 4)
    fixed_alone = RoundShape(verify_width=9, batch=1, fixed=True, cuda_graph=False)
    trimmed_shared = RoundShape(verify_width=5, batch=3, fixed=False, cuda_graph=False)
    graph = RoundShape(verify_width=9, batch=2, fixed=True, cuda_graph=True)
    stats.emitted_tokens = 3
    stats.add_round({**NO_TIME, "draft": 0.5}, fixed_alone, 3, 2, 2, 2)  # 5 padding rows
    stats.emitted_tokens += 1
    stats.add_round(NO_TIME, trimmed_shared, 4, 3, 1, 0)  # the batch's largest tree: no padding
    stats.emitted_tokens += 2
    stats.add_round(NO_TIME, graph, 8, 3, 4, 1)
    assert stats.verify_rounds == 3 and stats.tau == 2.0 and stats.draft_s == 0.5
    assert (stats.padded_rounds, stats.padding_rows) == (1, 5)
    assert (stats.fixed_shape_rounds, stats.cuda_graph_rounds, stats.batched_rounds) == (2, 1, 2)
    assert (stats.max_tree_depth, stats.max_tree_width, stats.max_tree_nodes) == (3, 4, 8)
    assert stats.max_verify_width == 9
    assert stats.accepted_tokens == 3 and stats.accepted_hist == [1, 1, 1, 0]


def test_histogram_grows_when_not_presized_and_totalled_fields_exist() -> None:
    stats = RequestStats()
    stats.add_round(NO_TIME, RoundShape(1, 1, False, False), 0, 0, 0, 0)
    stats.add_round(NO_TIME, RoundShape(4, 1, False, False), 3, 3, 1, 3)
    assert stats.accepted_hist == [1, 0, 0, 1]
    names = {f.name for f in dataclasses.fields(RequestStats)}
    assert set(TOTALLED) <= names
