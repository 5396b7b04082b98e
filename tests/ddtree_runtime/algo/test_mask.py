"""Tree mask and positions: visibility rules, inert padding, in-place writes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from ddtree_runtime.algo import mask as mask_module
from ddtree_runtime.algo.mask import fill_tree_mask
from ddtree_runtime.algo.tree import build_tree


def sample_tree():
    lp = torch.log(torch.tensor([[[0.6, 0.3], [0.5, 0.4], [0.9, 0.05]]] * 2, dtype=torch.float64))
    tok = torch.arange(12).view(2, 3, 2) + 100
    return build_tree(
        lp,
        tok,
        torch.tensor([1, 2]),
        torch.tensor([5, 2]),
        torch.tensor([2, 2]),
        torch.tensor([3, 3]),
        5,
    )


def test_mask_invariants() -> None:
    tree = sample_tree()
    prefix = torch.tensor([10, 3])
    q, kv = 6, 64
    mask = torch.full((4, 1, q, 128), 7.0)  # stale garbage: every active value must be rewritten
    positions = torch.full((4, q), -5)
    view = mask[:, :, :, :kv]
    fill_tree_mask(view, positions, tree, prefix)
    assert (mask[2:] == 7.0).all() and (mask[:, :, :, kv:] == 7.0).all()  # only [:n, :kv]
    for b in range(2):
        p = int(prefix[b])
        for j in range(q):
            row = mask[b, 0, j, :kv]
            assert set(row.unique().tolist()) <= {0.0, float("-inf")}
            seen = {int(c) for c in torch.nonzero(row == 0).flatten()}
            if tree.real[b, j]:
                anc, node = set(), j
                while node >= 0:
                    anc.add(p + node)
                    node = int(tree.parents[b, node])
                assert seen == set(range(p)) | anc  # prefix + ancestors + self
                assert int(positions[b, j]) == p + int(tree.depths[b, j])
            else:
                assert seen == {p + j}  # padding sees only itself: finite softmax, never NaN
        pad_cols = [p + j for j in range(q) if not tree.real[b, j]]
        assert pad_cols or b == 0  # request 1 has padding (budget 2 of 5)
        real_rows = tree.real[b]
        assert (mask[b, 0][real_rows][:, pad_cols] == float("-inf")).all()


def test_softmax_over_mask_rows_is_finite() -> None:
    tree = sample_tree()
    mask = torch.zeros((2, 1, 6, 64))
    fill_tree_mask(mask, torch.zeros((2, 6), dtype=torch.long), tree, torch.tensor([0, 5]))
    assert torch.isfinite(torch.softmax(mask, dim=-1)).all()


FAULT_LINE = "_FAULTS: set[str] = " + "set()"  # split, so this file never holds the line itself


@pytest.mark.parametrize("fault", ["pad_visible", "stale_positions"])
def test_a_fault_is_planted_in_a_copy_by_patching_one_line(tmp_path: Path, fault: str) -> None:
    """The recipe in algo/mask.py's docstring, as issue 11 uses it on a copy of the package."""
    source = Path(mask_module.__file__).read_text()
    lines = source.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.rstrip("\n") == FAULT_LINE]
    assert len(hits) == 1, "the fault switch must be exactly one line"
    lines[hits[0]] = f'_FAULTS: set[str] = {{"{fault}"}}\n'
    copy = tmp_path / "mask.py"
    copy.write_text("".join(lines))
    spec = importlib.util.spec_from_file_location("planted_mask", copy)
    assert spec is not None and spec.loader is not None
    planted = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(planted)
    assert {fault} == planted._FAULTS and set() == mask_module._FAULTS
    # The planted copy writes a different mask or positions for a padded tree.
    tree, prefix = sample_tree(), torch.tensor([10, 3])
    outputs = []
    for module in (mask_module, planted):
        mask, positions = torch.zeros((2, 1, 6, 64)), torch.zeros((2, 6), dtype=torch.long)
        module.fill_tree_mask(mask, positions, tree, prefix)
        outputs.append((mask, positions))
    (clean_mask, clean_pos), (bad_mask, bad_pos) = outputs
    assert not (torch.equal(clean_mask, bad_mask) and torch.equal(clean_pos, bad_pos))
