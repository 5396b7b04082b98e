"""Sample margins (how far a sampled token's uniform lies inside its CDF interval) and the planted
faults that break sampling on drafted positions only.

The margin lets a controller comparing sampled DDTree output with AR at the same seed tell a
numerical near-tie (u within a hair of a CDF edge) from a bug; the faults are what it must catch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from ddtree_runtime.algo import mask
from ddtree_runtime.algo.sampling import sample_margins, sample_with_uniform
from ddtree_runtime.drafters import make_drafter
from ddtree_runtime.engine import Engine, EngineConfig, GenerationResult, SamplingParams
from ddtree_runtime.params import TokenLogprob
from ddtree_runtime.reference import divergence_index
from ddtree_runtime.server.formatting import TokenText, chat_logprobs, legacy_logprobs
from tests.ddtree_runtime.engine_helpers import (
    first_divergence,
    long_refs,
    oracle_engine,
    prompts_and_refs,
    run_greedy,
    tiny,
)

MAX_TOKENS = 24
SAMPLED = {"temperature": 0.9}
#: How far below 0 a drawn token's margin may read: the sampler's CDF and the margin's are summed
#: at different precisions, so a uniform on an edge may fall a rounding to either side.
ROUNDING = 1e-6
#: Per fault, sampling parameters under which tiny-random shows it on some of the 8 prompts: top-k
#: must truncate for "untruncated_drafts" to change anything.
FAULT_PARAMS: dict[str, dict[str, Any]] = {
    "hot_drafts": {"temperature": 0.9},
    "cold_drafts": {"temperature": 0.9},
    "untruncated_drafts": {"temperature": 1.0, "top_k": 3},
}


# ---- sample_margins ------------------------------------------------------------------------------


def test_sample_margin_by_hand() -> None:
    probs = torch.tensor([[0.2, 0.5, 0.3]], dtype=torch.float64)
    u = torch.tensor([0.69], dtype=torch.float64)
    token = sample_with_uniform(probs, u)
    assert token.tolist() == [1]
    margin = sample_margins(probs, u, token)
    assert margin.tolist() == pytest.approx([min(0.69 - 0.2, 0.7 - 0.69)])  # 0.01


def test_sample_margin_normalises_by_the_row_total() -> None:
    unnormalised = torch.tensor([2.0, 5.0, 3.0], dtype=torch.float64)
    u = torch.tensor(0.3, dtype=torch.float64)
    assert float(sample_margins(unnormalised, u, torch.tensor(1))) == pytest.approx(0.1)


def test_sample_margin_is_nonnegative_for_the_drawn_token_and_negative_off_it() -> None:
    # Binary fractions, so the edges are exact.
    probs = torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64).expand(7, 3)
    u = torch.tensor([0.0, 0.125, 0.25, 0.5, 0.75, 0.875, 0.999], dtype=torch.float64)
    tokens = sample_with_uniform(probs, u)
    assert tokens.tolist() == [0, 0, 1, 1, 2, 2, 2]
    margins = sample_margins(probs, u, tokens).tolist()
    assert margins == pytest.approx([0.0, 0.125, 0.0, 0.25, 0.0, 0.125, 0.001])
    # A token u does not select: minus u's distance to its interval.
    assert float(sample_margins(probs[0], u[3], torch.tensor(0))) == pytest.approx(-0.25)
    assert float(sample_margins(probs[0], u[1], torch.tensor(2))) == pytest.approx(-0.625)
    rows = torch.softmax(torch.randn(64, 17, dtype=torch.float64), dim=-1)
    draws = torch.rand(64, dtype=torch.float64)
    got = sample_margins(rows, draws, sample_with_uniform(rows, draws))
    assert bool((got > 0).all()) and bool((got <= 0.5).all())


# ---- the engine ----------------------------------------------------------------------------------


def ar_engine() -> Engine:
    return oracle_engine(0, 1, 2)


def ddtree_engine() -> Engine:
    return oracle_engine(16, 4, 8)


def sample(engine: Engine, logprobs: int | None = None, **fields: Any) -> list[GenerationResult]:
    prompts, _ = prompts_and_refs()
    params = [
        SamplingParams(max_tokens=MAX_TOKENS, seed=100 + i, logprobs=logprobs, **fields)
        for i in range(len(prompts))
    ]
    return engine.generate(prompts, params)


def test_sample_margins_are_the_ar_distributions_for_ar_and_ddtree_alike() -> None:
    ar = sample(ar_engine(), logprobs=2, **SAMPLED)
    ddtree = sample(ddtree_engine(), logprobs=2, **SAMPLED)
    assert sum(r.stats.accepted_tokens for r in ddtree) > 0  # several tokens per round, sometimes
    for a, d in zip(ar, ddtree, strict=True):
        assert d.token_ids == a.token_ids  # coupled sampling: same seed, same tokens
        assert a.logprobs is not None and d.logprobs is not None
        ar_margins = [lp.sample_margin for lp in a.logprobs]
        dd_margins = [lp.sample_margin for lp in d.logprobs]
        # Each token its own draw: >= 0 up to the sampler's float rounding at an edge.
        assert all(m is not None and -ROUNDING <= m <= 1.0 for m in (*ar_margins, *dd_margins))
        assert dd_margins == pytest.approx(ar_margins, abs=1e-12)  # float64: same up to rounding
    greedy = sample(ddtree_engine(), logprobs=2)
    assert all(lp.sample_margin is None for r in greedy for lp in r.logprobs or [])


# ---- planted faults: sampling on drafted positions only ------------------------------------------


@pytest.fixture(params=sorted(FAULT_PARAMS))
def fault(request: pytest.FixtureRequest) -> Iterator[str]:
    mask._FAULTS.add(request.param)
    try:
        yield request.param
    finally:
        mask._FAULTS.discard(request.param)


def test_planted_sampling_fault_breaks_only_sampled_ddtree(fault: str) -> None:
    fields = FAULT_PARAMS[fault]
    _, refs = prompts_and_refs()
    greedy = run_greedy(ddtree_engine(), [16] * len(refs))
    assert first_divergence([r.token_ids for r in greedy], refs) is None
    ddtree = [r.token_ids for r in sample(ddtree_engine(), **fields)]
    assert [r.token_ids for r in sample(ddtree_engine(), **fields)] == ddtree  # reproducible
    ar = [r.token_ids for r in sample(ar_engine(), **fields)]
    mask._FAULTS.discard(fault)
    assert [r.token_ids for r in sample(ar_engine(), **fields)] == ar  # AR: untouched
    assert ddtree != ar, f"{fault} changed no sampled output"


# ---- server formatting ---------------------------------------------------------------------------


def entries(margins: list[float | None]) -> list[TokenLogprob]:
    return [
        TokenLogprob(65 + i, -0.5, [(65 + i, -0.5), (66, -1.5)], m) for i, m in enumerate(margins)
    ]


def test_formatting_adds_sample_margins_only_when_sampled() -> None:
    text = TokenText(tiny().tokenizer)
    chat = chat_logprobs(entries([0.25, 0.125]), text, 2)["content"]
    assert [item["sample_margin"] for item in chat] == [0.25, 0.125]
    assert all("sample_margin" not in top for item in chat for top in item["top_logprobs"])
    greedy_chat = chat_logprobs(entries([None, None]), text, 2)["content"]
    assert all("sample_margin" not in item for item in greedy_chat)
    legacy = legacy_logprobs(entries([0.25, 0.125]), text, 2, 0)
    assert legacy["sample_margins"] == [0.25, 0.125]
    assert "sample_margins" not in legacy_logprobs(entries([None, None]), text, 2, 0)


# ---- relaxed acceptance: a token its own draw did not select -------------------------------------


def test_relaxed_acceptance_emits_tokens_with_negative_sample_margins_where_it_leaves_ar() -> None:
    """Below `accept_threshold` 1 a drafted token the seed's uniform does not select is emitted:
    its own sample margin is minus the uniform's distance to its interval, so the first
    divergence from AR at the same seed carries a negative margin, and every token before it a
    non-negative one (the judge's evidence that it is not numerics: `sweeper.proof.determinism`)."""
    m = tiny()
    drafter = make_drafter("oracle", m, references=long_refs())
    relaxed = Engine(
        m, drafter, EngineConfig(budget=16, topk=4, block_size=8, accept_threshold=0.05)
    )
    ar = sample(ar_engine(), logprobs=2, **SAMPLED)
    out = sample(relaxed, logprobs=2, **SAMPLED)
    left = 0
    for a, r in zip(ar, out, strict=True):
        assert r.logprobs is not None
        margins = [lp.sample_margin for lp in r.logprobs]
        assert None not in margins
        own = [float(m or 0.0) for m in margins]
        index = divergence_index(r.token_ids, a.token_ids)
        if index is None:
            assert min(own) >= -ROUNDING
            continue
        left += 1
        assert min(own[:index], default=0.0) >= -ROUNDING, own
        assert own[index] < -1e-3, own[index]
    assert left > 0, "the relaxed rule changed no output"
