"""STAND-IN for issue 39's scored test (helper i39proof owns this file): the contract's
signatures (`judge`, `control`, `expected_power`, `SCORED_COLUMNS`) with a plain statistic, so
the runner's collection path runs before the real judge is merged. At merge, i39proof's file
replaces this one whole.

Per scored token a randomized PIT u (exact: above + V p; top k: rebuilt from the raw top k under
the engine's order, the unreturned tail bounded; a token outside the top k uniform on [the top
k's processed mass, 1]); a token with processed probability 0 beyond `sampled_near_tie_margin`
is a violation; else a two-sided Kolmogorov-Smirnov test of u against uniform at alpha.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sweeper.proof.determinism import SampledVerdict
from sweeper.spec import DeterminismSpec

SCORED_COLUMNS = (
    "scored_p",
    "scored_direction",
    "scored_n_tokens",
    "scored_impossible",
    "scored_power",
    "scored_exact_share",
)


def _interval(position: Mapping[str, Any], row: Mapping[str, Any]) -> tuple[float, float, bool]:
    """(lo, hi, exact) of the token's PIT; (-1, -1) for an impossible token."""
    if row.get("basis") == "exact":
        p, above = float(position.get("p") or 0.0), float(position.get("above") or 0.0)
        return (-1.0, -1.0, True) if p <= 0 else (above, above + p, True)
    temperature = float(row["temperature"])
    top_p, top_k = row.get("top_p"), row.get("top_k")
    top = [(int(i), float(lp)) for i, lp in position.get("top") or []]
    if not top:
        return 0.0, 1.0, False
    raw_tail = max(0.0, 1.0 - sum(math.exp(lp) for _, lp in top))
    # The tail's tempered mass lies in [0, raw_tail * p_k^(1/T - 1)]: the stand-in takes half.
    tail = 0.5 * raw_tail * math.exp(top[-1][1]) ** (1.0 / temperature - 1.0)
    weights = np.array([math.exp(lp / temperature) for _, lp in top])
    keep = np.ones(len(top), dtype=bool)
    tail_kept = True
    if top_k and 0 < int(top_k) <= len(top):
        keep[int(top_k) :] = False
        tail_kept = False
    if top_p is not None and float(top_p) < 1.0:
        joint = "top_k+top_p" in (row.get("order") or [])
        z = float(weights.sum()) + tail if joint else float(weights[keep].sum()) + tail * tail_kept
        base = weights / z
        keep &= (np.cumsum(base) - base) < float(top_p)
        tail_kept = tail_kept and float(base[keep].sum()) < float(top_p)
    kept = weights * keep
    z = float(kept.sum()) + tail * tail_kept
    ids = [i for i, _ in top]
    token = int(position["token"])
    if token in ids:
        j = ids.index(token)
        if not keep[j]:
            return -1.0, -1.0, False
        above = float(kept[:j].sum()) / z
        return above, above + kept[j] / z, False
    if not tail_kept:
        return -1.0, -1.0, False
    return float(kept.sum()) / z, 1.0, False


def _us(rows: Iterable[Mapping[str, Any]], role: str):
    us: list[float] = []
    impossible: list[str] = []
    exact = total = 0
    for row in rows:
        if row.get("role") != role or row.get("error"):
            continue
        # V per token: reproducible, and independent between the outputs of a draw.
        key = f"{row.get('prompt_id')}/{row.get('index')}/{row.get('source')}/{row.get('seed')}"
        rng = np.random.default_rng(zlib.crc32(key.encode()))
        for j, position in enumerate(row.get("positions") or []):
            lo, hi, was_exact = _interval(position, row)
            total += 1
            exact += was_exact
            if hi < 0:
                impossible.append(f"{row.get('prompt_id')}#{row.get('index')} position {j}")
                continue
            us.append(lo + rng.random() * (hi - lo))
    return np.array(us), impossible, (exact / total if total else 0.0)


def _ks_p(us: np.ndarray) -> float:
    n = len(us)
    if n == 0:
        return 1.0
    u = np.sort(us)
    d = max(np.max(np.arange(1, n + 1) / n - u), np.max(u - np.arange(n) / n))
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    return float(min(1.0, max(0.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam)
                                             for k in range(1, 101)))))  # fmt: skip


def _columns(rows: Sequence[Mapping[str, Any]], role: str) -> tuple[dict[str, Any], list[str]]:
    us, impossible, exact = _us(rows, role)
    p = _ks_p(us)
    direction = "hotter" if len(us) and us.mean() > 0.5 else "colder"
    return {
        "scored_p": p,
        "scored_direction": direction,
        "scored_n_tokens": int(len(us) + len(impossible)),
        "scored_impossible": impossible[0] if impossible else None,
        "scored_power": None,
        "scored_exact_share": exact,
    }, impossible


def judge(
    rows: Iterable[Mapping[str, Any]],
    policy: DeterminismSpec,
    role: str = "test",
    *,
    control_point: Mapping[str, Any] | None = None,
) -> tuple[SampledVerdict, dict[str, Any]]:
    rows = list(rows)
    columns, impossible = _columns(rows, role)
    if not columns["scored_n_tokens"]:
        return SampledVerdict("unproven", "no scored tokens"), columns
    if impossible:
        return SampledVerdict("shifted", f"impossible token at {impossible[0]}"), columns
    if columns["scored_p"] <= policy.alpha:
        return SampledVerdict("shifted", f"PIT KS p = {columns['scored_p']:.4g}"), columns
    return SampledVerdict("distribution-ok", f"PIT KS p = {columns['scored_p']:.4g}"), columns


def control(
    rows: Iterable[Mapping[str, Any]], policy: DeterminismSpec, role: str = "ar"
) -> dict[str, Any]:
    return _columns(list(rows), role)[0]


@dataclass(frozen=True)
class ScoredPower:
    tokens: int

    def text(self) -> str:
        return f"scored: {self.tokens} tokens a config (stand-in: no power statement)"


def expected_power(tokens: int, policy: DeterminismSpec) -> ScoredPower:
    return ScoredPower(tokens)
