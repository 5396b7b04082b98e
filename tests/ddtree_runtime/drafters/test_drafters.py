"""Drafters: n-gram lookup distributions, the oracle, and clear errors for bad specs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from ddtree_runtime.drafters import NgramDrafter, make_drafter
from tests.ddtree_runtime.engine_helpers import tiny


def test_ngram_counts_what_followed_the_longest_suffix_match() -> None:
    ctx = [1, 2, 3, 4, 1, 2, 3, 5, 9, 1, 2, 3]
    lp, tok = NgramDrafter().propose([ctx, [7, 8]], depth=3, k=2)
    assert lp.shape == tok.shape == (2, 3, 2)
    # suffix [1, 2, 3] occurred at 0 and 4: next token 4 or 5, then 1 or 9
    assert sorted(tok[0, 0].tolist()) == [4, 5]
    assert lp[0, 0].tolist() == pytest.approx([math.log(0.5)] * 2)
    assert sorted(tok[0, 1].tolist()) == [1, 9]
    assert torch.isinf(lp[1]).all()  # no match: root-only tree, a plain AR step


def test_ngram_is_sorted_descending() -> None:
    ctx = [1, 9, 1, 9, 1, 8, 2, 1]  # only [1] matches: followed by 9, 9, 8
    lp, tok = NgramDrafter().propose([ctx], depth=1, k=3)
    assert tok[0, 0, :2].tolist() == [9, 8]
    assert lp[0, 0].tolist() == pytest.approx([math.log(2 / 3), math.log(1 / 3), float("-inf")])


def test_clean_oracle_proposes_the_reference_continuation() -> None:
    m = tiny()
    ref = [3, 1, 4, 1, 5, 9, 2, 6]
    d = make_drafter("oracle", m, references=[ref], demote=0.0, drop=0.0)
    lp, tok = d.propose([ref[:3]], depth=4, k=3)
    assert tok[0, :, 0].tolist() == [1, 5, 9, 2]
    assert (lp[0, :, 0] > lp[0, :, 1]).all()


def test_bad_drafter_specs_are_clear(tmp_path: Path) -> None:
    m = tiny()
    with pytest.raises(ValueError, match="unknown drafter 'bogus'"):
        make_drafter("bogus", m)
    with pytest.raises(ValueError, match="needs a checkpoint path"):
        make_drafter("dflash:", m)
    with pytest.raises(ValueError, match="no config.json"):
        make_drafter(f"dflash:{tmp_path}", m)
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    with pytest.raises(ValueError, match="no block_size"):
        make_drafter(f"dflash:{tmp_path}", m)
    (tmp_path / "config.json").write_text('{"model_type": "llama", "block_size": 16}')
    with pytest.raises(ValueError, match="no target_layer_ids"):
        make_drafter(f"dflash:{tmp_path}", m)  # more checkpoint errors: test_dflash.py
    with pytest.raises(ValueError, match="test-only"):
        make_drafter("oracle", m)
