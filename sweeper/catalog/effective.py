"""What a speculative config effectively runs under its engine's own rules (`EffectiveRules`,
plain data in the presets), so labels that are one behaviour are measured once.

`effective(rules, params)` maps a config's grid values to the behaviour the engine runs: for
PR #29907's DDTREE, a chain of `budget` drafts at budget <= block_size - 1 (topk unused), else a
tree of `budget` nodes, depth block_size - 1 and width min(max(budget // (block_size - 1) + 1,
2), topk cap). Every other value (cuda_graph, extra flags) is kept as given. `why` says, in
words, which rule made two labels one. Imports nothing of the sweeper but the mapping's data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweeper.catalog.mapping import EffectiveRules


def effective(rules: EffectiveRules | None, params: Mapping[str, Any]) -> dict[str, Any]:
    """The behaviour key of a speculative config's params (the params themselves without
    rules)."""
    out = dict(params)
    if rules is None:
        return out
    out.update(rules.forced)
    budget, block = out.get("budget"), out.get("block_size")
    if not isinstance(budget, int) or not isinstance(block, int):
        return out
    topk = out.get("topk")
    cap = topk if isinstance(topk, int) else rules.topk_default
    if rules.chain_at_budget_below_block and budget <= block - 1:
        # The drafter still denoises a block of block_size, so the block stays in the key.
        out.pop("topk", None)
        out["shape"] = f"chain of {budget}"
    elif rules.width_from_budget_per_block and cap is not None:
        width = min(max(budget // max(block - 1, 1) + 1, 2), cap)
        out.pop("topk", None)
        out["shape"] = f"tree of {budget} nodes, width {width}, depth {block - 1}"
    return out


def why(rules: EffectiveRules | None, params: Mapping[str, Any]) -> str:
    """The rule that decides a config's behaviour, in words (for plan notes)."""
    shape = effective(rules, params).get("shape")
    if rules is None or shape is None:
        return "same values"
    if str(shape).startswith("chain"):
        return f"{shape}: budget <= block_size - 1 drafts a chain, topk unused"
    return (
        f"{shape}: width = min(max(budget // (block_size - 1) + 1, 2), topk cap"
        f"{f' (default {rules.topk_default})' if rules.topk_default else ''})"
    )
