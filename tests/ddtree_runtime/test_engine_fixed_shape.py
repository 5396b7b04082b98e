"""The fixed verify width (``cuda_graph`` requested) on CPU: exact, padded at batch 1, reported.

With ``cuda_graph`` every verify runs at 1 + budget, as a captured graph needs, even where no
graph exists: a lone request's smaller tree then goes through the padding path, as on a GPU.
Without it the width is trimmed to the batch's largest tree, so a lone request never pads.
"""

from __future__ import annotations

import pytest

from ddtree_runtime.algo import mask
from ddtree_runtime.engine import SamplingParams
from tests.ddtree_runtime.engine_helpers import (
    NEW_TOKENS,
    first_divergence,
    mixed_budgets,
    oracle_engine,
    prompts_and_refs,
    run_greedy,
)
from tests.lanes import grid


# Budget 16, topk 4, alone (a lone request's smaller trees pad): in the edit-test loop
# (tests/lanes.py).
@pytest.mark.parametrize(
    ("budget", "topk", "max_batch"), grid((16, 4, 1), [1, 4, 16], [1, 4], [1, 3])
)
def test_fixed_width_is_exact_alone_and_batched(budget: int, topk: int, max_batch: int) -> None:
    prompts, refs = prompts_and_refs()
    engine = oracle_engine(budget, topk, 8, max_batch=max_batch, cuda_graph=True)
    assert engine.info["fixed_verify_shape"] == 1 + budget
    assert engine.info["cuda_graph_applied"] is False  # no graph on CPU, only its shape
    results = run_greedy(engine, mixed_budgets(budget, len(prompts)))
    got = [r.token_ids for r in results]
    assert first_divergence(got, refs) is None, first_divergence(got, refs)
    stats = [r.stats for r in results]
    assert all(s.fixed_shape_rounds == s.verify_rounds > 0 for s in stats)
    assert all(s.cuda_graph_rounds == 0 for s in stats)
    assert all(s.max_verify_width == 1 + budget for s in stats)
    # Budget-0 requests (every third in mixed_budgets) verify a root alone in a 1+budget width.
    assert sum(s.padded_rounds for s in stats) > 0
    if max_batch == 1:
        assert all(s.batched_rounds == 0 for s in stats)
    if budget >= 2:
        assert max(s.tau for s in stats) > 1.5


def test_exposure_of_a_lone_chain_in_the_fixed_width() -> None:
    """The seed's case: budget 16, topk 1, block 8: a 7-node chain in a 17-wide verify."""
    prompts, refs = prompts_and_refs()
    clean = dict(demote=0.0, drop=0.0)  # every chain is the continuation, accepted whole
    fixed = oracle_engine(16, 1, 8, max_batch=1, cuda_graph=True, **clean)
    (res,) = fixed.generate([prompts[0]], [SamplingParams(max_tokens=NEW_TOKENS)])
    assert res.token_ids == refs[0] and len(res.token_ids) == NEW_TOKENS
    s = res.stats
    assert s.verify_rounds == NEW_TOKENS // 8  # 7 accepted + 1 bonus per round
    assert s.padded_rounds == s.fixed_shape_rounds == s.verify_rounds
    assert s.padding_rows == (17 - 1 - 7) * s.verify_rounds
    assert (s.max_tree_depth, s.max_tree_width, s.max_tree_nodes) == (7, 1, 7)
    assert s.max_verify_width == 17
    assert (s.cuda_graph_rounds, s.batched_rounds) == (0, 0)
    assert s.accepted_hist == [0] * 7 + [s.verify_rounds]
    assert s.accepted_tokens == 7 * s.verify_rounds

    trimmed = oracle_engine(16, 1, 8, max_batch=1, cuda_graph=False, **clean)
    assert trimmed.info["fixed_verify_shape"] is None
    (same,) = trimmed.generate([prompts[0]], [SamplingParams(max_tokens=NEW_TOKENS)])
    assert same.token_ids == res.token_ids
    t = same.stats
    assert (t.padded_rounds, t.padding_rows, t.fixed_shape_rounds) == (0, 0, 0)
    assert t.max_verify_width == 8 and t.accepted_hist == s.accepted_hist


def test_batched_requests_report_sharing_and_the_smaller_tree_pads() -> None:
    prompts, refs = prompts_and_refs()
    engine = oracle_engine(16, 1, 8, max_batch=2, demote=0.0, drop=0.0)
    params = [SamplingParams(max_tokens=16, budget=b) for b in (16, 3)]
    big, small = engine.generate(prompts[:2], params)
    assert big.token_ids == refs[0][:16] and small.token_ids == refs[1][:16]
    assert big.stats.batched_rounds > 0 and small.stats.batched_rounds > 0
    assert big.stats.padded_rounds == 0  # its 7-node chain sets the trimmed width
    assert (
        small.stats.padded_rounds > 0 and small.stats.padding_rows >= 4 * small.stats.padded_rounds
    )
    assert small.stats.max_tree_nodes == 3 and big.stats.max_tree_nodes == 7


def test_a_padding_fault_hides_from_a_lone_request_unless_the_width_is_fixed() -> None:
    """Why the fixed width matters on CPU: trimmed, a lone request never pads, so a fault in
    the padding path is invisible at batch 1 (the issue's concurrency-1 sweep saw all exact)."""
    prompts, refs = prompts_and_refs()
    mask._FAULTS.add("pad_visible")
    try:
        trimmed = run_greedy(oracle_engine(16, 1, 8, max_batch=1), [16] * len(prompts))
        fixed = run_greedy(oracle_engine(16, 1, 8, max_batch=1, cuda_graph=True), [16] * 4)
    finally:
        mask._FAULTS.discard("pad_visible")
    assert first_divergence([r.token_ids for r in trimmed], refs) is None
    assert all(r.stats.padded_rounds == 0 for r in trimmed)
    assert first_divergence([r.token_ids for r in fixed], refs[:4]) is not None
