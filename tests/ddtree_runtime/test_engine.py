"""Engine exactness on tiny-random (float64): DDTree greedy == the independent AR reference."""

from __future__ import annotations

from typing import NamedTuple

import pytest
import torch

from ddtree_runtime.algo import mask
from ddtree_runtime.drafters import make_drafter
from ddtree_runtime.engine import Engine, EngineConfig, SamplingParams
from ddtree_runtime.reference import greedy_reference, reference_cache
from tests.ddtree_runtime.engine_helpers import (
    NEW_TOKENS,
    first_divergence,
    long_refs,
    mixed_budgets,
    oracle_engine,
    prompts_and_refs,
    run_greedy,
    tiny,
)
from tests.lanes import grid

BUDGETS = [1, 2, 4, 7, 16, 32]
TOPKS = [1, 2, 4, 8]
BLOCK_SIZES = [4, 8, 16]


# Budget 16, topk 4: deep branching trees in padded batches, in the edit-test loop (tests/lanes.py).
@pytest.mark.parametrize(("budget", "topk"), grid((16, 4), BUDGETS, TOPKS))
def test_exactness_matrix(budget: int, topk: int) -> None:
    prompts, refs = prompts_and_refs()
    assert len(prompts) >= 8 and all(len(r) == NEW_TOKENS for r in refs[:4])
    for block_size in BLOCK_SIZES:
        engine = oracle_engine(budget, topk, block_size, max_batch=3)
        results = run_greedy(engine, mixed_budgets(budget, len(prompts)))
        got = [r.token_ids for r in results]
        assert first_divergence(got, refs) is None, (block_size, first_divergence(got, refs))
        if budget >= 2 and block_size > 2:
            assert max(r.stats.tau for r in results) > 1.5  # deep trees were really accepted


def test_ngram_drafter_exact_with_padding() -> None:
    prompts, refs = prompts_and_refs()
    m = tiny()
    engine = Engine(m, make_drafter("ngram", m), EngineConfig(budget=16, topk=4, max_batch=3))
    results = run_greedy(engine, mixed_budgets(16, len(prompts)))
    assert first_divergence([r.token_ids for r in results], refs) is None


def test_speculative_none_is_plain_ar() -> None:
    prompts, refs = prompts_and_refs()
    m = tiny()
    engine = Engine(m, make_drafter("ngram", m), EngineConfig(speculative="none", max_batch=5))
    results = engine.generate(prompts, [SamplingParams(max_tokens=NEW_TOKENS)] * len(prompts))
    assert [r.token_ids for r in results] == refs
    assert all(r.stats.tau == 1.0 for r in results)


@pytest.mark.parametrize("cuda_graph", [False, True])
def test_ar_server_never_uses_the_tree_mask(cuda_graph: bool) -> None:
    """The AR server is the reference: with both tree-mask faults planted it stays equal to the
    independent HF loop (batched, so rows have different prefixes), while a DDTree engine breaks
    (test_broken_mask_variants_diverge). A fault in the tree path cannot hide in the baseline."""
    prompts, refs = prompts_and_refs()
    m = tiny()
    cfg = EngineConfig(speculative="none", max_batch=3, cuda_graph=cuda_graph)
    mask._FAULTS.update({"pad_visible", "stale_positions"})
    try:
        engine = Engine(m, make_drafter("ngram", m), cfg)
        results = engine.generate(prompts, [SamplingParams(max_tokens=NEW_TOKENS)] * len(prompts))
    finally:
        mask._FAULTS.clear()
    assert first_divergence([r.token_ids for r in results], refs) is None


def test_padding_token_equal_to_target_argmax_is_never_accepted() -> None:
    """Before every step the padding carries exactly the token the target picks at the root."""
    prompts, refs = prompts_and_refs()
    engine = oracle_engine(16, 2, 8, max_batch=1)
    for i in (0, 2, 5):
        engine.add_request(f"p{i}", prompts[i], SamplingParams(max_tokens=NEW_TOKENS, budget=3))
        got: list[int] = []
        while engine.has_work():
            engine.pad_token = refs[i][len(got)]  # the target's argmax at this step's root
            for e in engine.step():
                got += e.token_ids
        assert got == refs[i]
        assert engine.stats(f"p{i}").accepted_tokens > 0


def test_eos_inside_an_accepted_path_ends_generation_there() -> None:
    m = tiny()
    prompts, refs = prompts_and_refs()
    with_eos = [i for i, r in enumerate(refs) if r[-1] in m.eos_token_ids]
    assert with_eos, "tiny-random should stop with EOS on some built-in prompt"
    i = with_eos[0]
    # A noise-free oracle that knows the continuation past EOS: the accepted path runs through it.
    drafter = make_drafter("oracle", m, references=long_refs(), demote=0.0, drop=0.0)
    engine = Engine(m, drafter, EngineConfig(budget=16, topk=2, block_size=16, max_batch=2))
    (res,) = engine.generate([prompts[i]], [SamplingParams(max_tokens=200)])
    assert res.token_ids == refs[i]
    assert res.finish_reason == "stop"
    s = res.stats
    assert s.accepted_tokens + s.verify_rounds > s.emitted_tokens  # tokens past EOS were cut


def test_stop_string_and_max_tokens_cut_like_ar() -> None:
    m = tiny()
    prompts, refs = prompts_and_refs()
    text = m.tokenizer.decode(refs[0])
    clean = [j for j in range(10, len(text) - 2) if text[j : j + 2].isprintable()]
    stop = text[clean[0] : clean[0] + 2]
    drafter = make_drafter("oracle", m, references=long_refs(), demote=0.0, drop=0.0)
    outs = {}
    for budget in (0, 16):
        engine = Engine(m, drafter, EngineConfig(budget=16, topk=2, block_size=16, max_batch=2))
        params = [
            SamplingParams(max_tokens=NEW_TOKENS, stop=[stop], budget=budget),
            SamplingParams(max_tokens=11, budget=budget),
        ]
        outs[budget] = engine.generate([prompts[0], prompts[1]], params)
    ar, tree = outs[0], outs[16]
    assert [(r.token_ids, r.text, r.finish_reason) for r in tree] == [
        (r.token_ids, r.text, r.finish_reason) for r in ar
    ]
    assert tree[0].finish_reason == "stop" and tree[0].text == text[: text.find(stop)]
    assert stop not in tree[0].text
    assert tree[1].token_ids == refs[1][:11] and tree[1].finish_reason == "length"
    assert tree[0].stats.tau > 1.5


def test_cache_after_ddtree_rounds_equals_ar_cache() -> None:
    m = tiny()
    prompts, _ = prompts_and_refs()
    engine = oracle_engine(16, 4, 8, max_batch=3)
    for i, b in enumerate([16, 3, 0]):
        engine.add_request(f"r{i}", prompts[i], SamplingParams(max_tokens=40, budget=b))
    for _ in range(5):
        engine.step()
    assert any(r.stats.accepted_tokens > 2 for r in engine._active)
    for slot, r in enumerate(engine._active):
        committed = r.tokens[:-1]
        got = engine.cache.slot_kv(slot, len(committed))
        want = reference_cache(m.model, committed)
        for (gk, gv), (wk, wv) in zip(got, want, strict=True):
            torch.testing.assert_close(gk, wk, rtol=1e-9, atol=1e-9)
            torch.testing.assert_close(gv, wv, rtol=1e-9, atol=1e-9)


def test_abort_frees_the_slot_and_others_stay_exact() -> None:
    prompts, refs = prompts_and_refs()
    engine = oracle_engine(8, 2, 8, max_batch=2)
    for i in range(3):
        engine.add_request(f"r{i}", prompts[i], SamplingParams(max_tokens=NEW_TOKENS))
    out: dict[str, list[int]] = {"r1": [], "r2": []}
    for e in engine.step():
        if e.request_id != "r0":
            out[e.request_id] += e.token_ids
    engine.abort("r0")
    while engine.has_work():
        for e in engine.step():
            assert e.request_id != "r0"
            out[e.request_id] += e.token_ids
    assert out == {"r1": refs[1], "r2": refs[2]}


# Where padding comes from: a batch of different tree sizes at a trimmed width, or a lone request
# whose chain (7 nodes at block 8, topk 1) is smaller than the fixed width 1 + 16 (the seed's case).
class FaultSetting(NamedTuple):
    topk: int
    max_batch: int
    cuda_graph: bool
    mixed_budgets: bool


FAULT_SETTINGS = {
    "batched-trimmed": FaultSetting(topk=4, max_batch=3, cuda_graph=False, mixed_budgets=True),
    "alone-fixed": FaultSetting(topk=1, max_batch=1, cuda_graph=True, mixed_budgets=False),
}


@pytest.mark.parametrize("setting", list(FAULT_SETTINGS))
@pytest.mark.parametrize("fault", ["pad_visible", "stale_positions"])
def test_broken_mask_variants_diverge(fault: str, setting: str) -> None:
    """The exactness check is not vacuous: a real row seeing padding, or stale positions, fails,
    in a padded batch and, with the fixed verify width, for a request verified alone."""
    prompts, refs = prompts_and_refs()
    s = FAULT_SETTINGS[setting]
    budgets = mixed_budgets(16, len(prompts)) if s.mixed_budgets else [16] * len(prompts)
    mask._FAULTS.add(fault)
    try:
        engine = oracle_engine(16, s.topk, 8, max_batch=s.max_batch, cuda_graph=s.cuda_graph)
        results = run_greedy(engine, budgets)
    finally:
        mask._FAULTS.discard(fault)
    divergence = first_divergence([r.token_ids for r in results], refs)
    print(f"{fault} {setting}: {divergence}")
    assert divergence is not None
    stats = [r.stats for r in results]
    assert sum(x.padded_rounds for x in stats) > 0  # the padding path ran
    if s.max_batch == 1:  # ... for every request, never batched: the fixed width alone pads
        assert all(x.batched_rounds == 0 and x.padded_rounds > 0 for x in stats)


def test_bad_requests_are_rejected_clearly() -> None:
    engine = oracle_engine(4, 2, 4)
    with pytest.raises(ValueError, match="max_model_len"):
        engine.add_request("a", [1] * 2000, SamplingParams(max_tokens=100))
    with pytest.raises(ValueError, match="budget"):
        engine.add_request("b", [1], SamplingParams(budget=5))
    with pytest.raises(ValueError, match="topk"):
        engine.add_request("c", [1], SamplingParams(topk=3))
    with pytest.raises(ValueError, match="at least one token"):
        engine.add_request("d", [], SamplingParams())
    with pytest.raises(ValueError, match="budget must be an integer >= 0"):
        Engine(tiny(), make_drafter("ngram", tiny()), EngineConfig(budget=-1))


def test_logprobs_are_raw_log_softmax_of_the_target() -> None:
    m = tiny()
    prompts, refs = prompts_and_refs()
    engine = oracle_engine(8, 2, 8)
    (res,) = engine.generate([prompts[2]], [SamplingParams(max_tokens=6, logprobs=3)])
    assert res.logprobs is not None and len(res.logprobs) == 6
    ctx = list(prompts[2])
    for lp in res.logprobs:
        with torch.inference_mode():
            logits = m.model(input_ids=torch.tensor([ctx])).logits[0, -1]
        want = torch.log_softmax(logits, dim=-1)
        assert lp.logprob == pytest.approx(float(want[lp.token_id]), abs=1e-9)
        assert [t for t, _ in lp.top] == want.topk(3).indices.tolist()
        ctx.append(lp.token_id)
    assert greedy_reference(m.model, prompts[2], 6, m.eos_token_ids) == res.token_ids


def test_requests_added_from_another_thread_while_stepping() -> None:
    """The server's pattern: its event loop adds requests while the engine thread steps."""
    import threading

    prompts, refs = prompts_and_refs()
    engine = oracle_engine(8, 2, 8, max_batch=2)
    out: dict[str, list[int]] = {f"r{i}": [] for i in range(4)}
    done = threading.Event()

    def loop() -> None:
        finished = 0
        while finished < 4:
            for e in engine.step():
                out[e.request_id] += e.token_ids
                finished += e.finished

    worker = threading.Thread(target=loop)
    worker.start()
    for i in range(4):
        engine.add_request(f"r{i}", prompts[i], SamplingParams(max_tokens=NEW_TOKENS))
        done.wait(0.01)
    worker.join(timeout=300)
    assert not worker.is_alive()
    assert [out[f"r{i}"] for i in range(4)] == refs[:4]
    assert engine.info["cuda_graph_applied"] is False
    assert engine.info["cuda_graph_reason"] == "not applicable on cpu"


def test_unverified_fault_is_fast_and_wrong_at_its_budget_only() -> None:
    """The planted `unverified_b<N>` fault (the search's fast-but-wrong config): at budget 16
    drafts are accepted unverified, so more tokens per round and a divergence; a server at
    another budget under the same fault set stays exact."""
    prompts, refs = prompts_and_refs()
    mask._FAULTS.add("unverified_b16")
    try:
        wrong = run_greedy(oracle_engine(16, 4, 8, max_batch=3), [16] * len(prompts))
        right = run_greedy(oracle_engine(4, 4, 8, max_batch=3), [4] * len(prompts))
    finally:
        mask._FAULTS.discard("unverified_b16")
    assert first_divergence([r.token_ids for r in wrong], refs) is not None
    assert first_divergence([r.token_ids for r in right], refs) is None
    assert min(r.stats.tau or 0 for r in wrong) > 2.0  # the whole first-child chain every round
