"""Target choices: temperature / top-k / top-p filters and the seeded inverse-CDF sample."""

from __future__ import annotations

import torch

from ddtree_runtime.algo.sampling import choose, processed_probs, sample_with_uniform, uniform


def test_inverse_cdf_and_filters() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    probs = processed_probs(logits, 1.0, 2, 1.0)
    assert probs[0, 2:].sum() == 0 and abs(float(probs.sum()) - 1) < 1e-12
    nucleus = processed_probs(logits, 1.0, 0, 0.5)
    assert nucleus[0].tolist() == [1.0, 0.0, 0.0, 0.0]
    u = torch.tensor([0.0, 0.7, 0.999999])
    assert sample_with_uniform(probs.expand(3, 4), u).tolist() == [0, 0, 1]
    assert uniform(1, 5) == uniform(1, 5) and uniform(1, 5) != uniform(2, 5)
    assert 0 <= uniform(0, 0) < 1


def test_choose_is_argmax_at_temperature_zero_and_a_sample_above() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0], [5.0, 0.0, 0.0]])
    assert choose(logits, 0.0, 0, 1.0, None).tolist() == [1, 0]
    # u just below 1 lands on the last id with mass; top_k 1 leaves only the argmax.
    assert choose(logits, 1.0, 0, 1.0, torch.tensor([0.999999, 0.999999])).tolist() == [2, 2]
    assert choose(logits, 1.0, 1, 1.0, torch.tensor([0.999999, 0.999999])).tolist() == [1, 0]
