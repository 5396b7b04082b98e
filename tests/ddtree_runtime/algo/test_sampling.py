"""Target choices: temperature / min-p / top-k / top-p filters and the seeded inverse-CDF sample."""

from __future__ import annotations

import pytest
import torch

from ddtree_runtime.algo.sampling import (
    choose,
    mass_above,
    mass_above_token,
    processed_probs,
    sample_with_uniform,
    uniform,
)


def test_inverse_cdf_and_filters() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    probs = processed_probs(logits, 1.0, 2, 1.0, 0.0)
    assert probs[0, 2:].sum() == 0 and abs(float(probs.sum()) - 1) < 1e-12
    nucleus = processed_probs(logits, 1.0, 0, 0.5, 0.0)
    assert nucleus[0].tolist() == [1.0, 0.0, 0.0, 0.0]
    u = torch.tensor([0.0, 0.7, 0.999999])
    assert sample_with_uniform(probs.expand(3, 4), u).tolist() == [0, 0, 1]
    assert uniform(1, 5) == uniform(1, 5) and uniform(1, 5) != uniform(2, 5)
    assert 0 <= uniform(0, 0) < 1


def test_choose_is_argmax_at_temperature_zero_and_a_sample_above() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0], [5.0, 0.0, 0.0]])
    assert choose(logits, 0.0, 0, 1.0, 0.0, None).tolist() == [1, 0]
    # u just below 1 lands on the last id with mass; top_k 1 leaves only the argmax.
    assert choose(logits, 1.0, 0, 1.0, 0.0, torch.tensor([0.999999, 0.999999])).tolist() == [2, 2]
    assert choose(logits, 1.0, 1, 1.0, 0.0, torch.tensor([0.999999, 0.999999])).tolist() == [1, 0]


def test_min_p_keeps_the_tokens_within_its_share_of_the_top_tempered_probability() -> None:
    """Min-p acts on the tempered distribution before top-k and top-p: a token is kept iff its
    tempered probability is at least min_p times the top token's; at temperature 0 it never
    moves the argmax."""
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]], dtype=torch.float64)
    # Tempered at 0.5 the ratios to the top are 1, e^-2, e^-4, e^-6: min-p 0.1 keeps two.
    probs = processed_probs(logits, 0.5, 0, 1.0, 0.1)
    assert probs[0, 2:].tolist() == [0.0, 0.0]
    assert torch.allclose(probs[0, :2], torch.softmax(logits[0, :2] / 0.5, dim=-1))
    # At temperature 1 the ratios are 1, e^-1, e^-2, e^-3: min-p 0.1 keeps three, then top-p
    # 0.8 cuts the renormalised three (0.665, 0.245: 0.909 > 0.8) to two.
    assert (processed_probs(logits, 1.0, 0, 1.0, 0.1)[0] > 0).tolist() == [True] * 3 + [False]
    assert (processed_probs(logits, 1.0, 0, 0.8, 0.1)[0] > 0).tolist() == [True] * 2 + [False] * 2
    # min-p 1 keeps only the top (and its ties).
    assert processed_probs(logits, 1.0, 0, 1.0, 1.0)[0].tolist() == [1.0, 0.0, 0.0, 0.0]
    u = torch.tensor([0.999999])
    assert choose(logits, 0.5, 0, 1.0, 0.1, u).tolist() == [1]  # the last kept, not id 3
    rows = torch.randn(64, 50, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert torch.equal(choose(rows, 0.0, 0, 1.0, 0.1, None), rows.argmax(dim=-1))


def test_the_mass_above_one_token_is_what_the_sorted_order_gives_it() -> None:
    gen = torch.Generator().manual_seed(3)
    probs = torch.softmax(torch.randn(5, 40, generator=gen, dtype=torch.float64), dim=-1)
    probs[0, 9] = probs[0, 4]  # a tie: the lower id is above the higher, not the reverse
    probs[1, 6] = probs[1, 30]
    probs[2] = 1 / 40  # every token tied
    probs[3, 0] = 0.0  # a removed token: everything kept is above it
    index = torch.tensor([[9], [6], [17], [0], [39]])
    by_sort = mass_above(probs)[0].gather(-1, index)[:, 0]
    got = mass_above_token(probs, index)
    assert torch.allclose(got, by_sort, rtol=0.0, atol=1e-15)
    assert got[0] > mass_above_token(probs, torch.tensor([[4]] * 5))[0]  # 9 ties 4, 4 first
    assert got[2] == pytest.approx(17 / 40)
