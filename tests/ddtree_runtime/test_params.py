"""Request checks: every bad sampling parameter is a ValueError naming it; good ones resolve."""

from __future__ import annotations

import pytest

from ddtree_runtime.params import RequestLimits, SamplingParams

LIMITS = RequestLimits(max_model_len=64, budget=8, topk=4, vocab_size=100)


@pytest.mark.parametrize(
    ("prompt", "fields", "needle"),
    [
        ([], {}, "at least one token"),
        ([1], {"max_tokens": 0}, "max_tokens must be >= 1"),
        ([1] * 60, {"max_tokens": 5}, "exceeds max_model_len (64)"),
        ([1], {"temperature": -0.1}, "temperature must be >= 0"),
        ([1], {"top_p": 0.0}, "top_p must be in (0, 1]"),
        ([1], {"top_p": 1.5}, "top_p must be in (0, 1]"),
        ([1], {"top_k": -1}, "top_k must be >= 0"),
        ([1], {"min_p": -0.1}, "min_p must be in [0, 1]"),
        ([1], {"min_p": 1.5}, "min_p must be in [0, 1]"),
        ([1], {"logprobs": -1}, "logprobs must be >= 0"),
        ([1], {"budget": 9}, "engine budget 8"),
        ([1], {"budget": -1}, "engine budget 8"),
        ([1], {"topk": 5}, "engine topk 4"),
        ([1], {"topk": 0}, "engine topk 4"),
        ([1, 100], {}, "prompt token ids must be in [0, 100)"),
        ([-1], {}, "prompt token ids must be in [0, 100)"),
        ([1], {"repetition_penalty": 0.0}, "repetition_penalty must be > 0"),
        ([1], {"frequency_penalty": 2.5}, "frequency_penalty must be in [-2, 2]"),
        ([1], {"presence_penalty": -2.1}, "presence_penalty must be in [-2, 2]"),
        ([1], {"logit_bias": {100: 1.0}}, "logit_bias token ids must be in [0, 100)"),
        ([1], {"logit_bias": {5: -101.0}}, "logit_bias values must be in [-100, 100]"),
        ([1], {"n": 2}, "one sequence (n = 1)"),
        ([1], {"n": 0}, "one sequence (n = 1)"),
    ],
)
def test_bad_parameters_are_named(prompt: list[int], fields: dict, needle: str) -> None:
    with pytest.raises(ValueError) as error:
        SamplingParams(**fields).check(prompt, LIMITS)
    assert needle in str(error.value)


def test_good_parameters_resolve_the_tree_from_the_engine_or_the_request() -> None:
    assert SamplingParams(max_tokens=63).check([5], LIMITS) == (8, 4)
    assert SamplingParams(budget=0, topk=1).check([5, 99], LIMITS) == (0, 1)
    speculative_none = RequestLimits(max_model_len=64, budget=0, topk=4, vocab_size=100)
    assert SamplingParams().check([5], speculative_none) == (0, 4)
    with pytest.raises(ValueError, match="engine budget 0"):
        SamplingParams(budget=1).check([5], speculative_none)


def test_n_choices_draw_at_their_own_seeds() -> None:
    """Choice 0 keeps the request's seed; the others get seeds of their own (distinct, also
    from a neighbouring request's choices); without a seed each choice takes a default one."""
    seeded = [c.seed for c in SamplingParams(n=4, seed=7).choices()]
    assert seeded[0] == 7 and len(set(seeded)) == 4
    assert not set(seeded[1:]) & {c.seed for c in SamplingParams(n=4, seed=8).choices()}
    assert all(c.n == 1 and c.seed is None for c in SamplingParams(n=3).choices())
    assert [c.seed for c in SamplingParams(n=4, seed=7).choices()] == seeded
