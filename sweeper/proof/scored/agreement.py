"""Whether a scoring server's path is the AR server's: both scored the same AR outputs, and their
raw probabilities must agree token by token (`determinism.score_agreement`) over at least
`MIN_AGREEMENT_TOKENS` tokens, else the scored verdict that server gave is `unproven`.

Pure: score rows (`ScoreRecord`) in, the agreement and the verdict it leaves out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from sweeper.proof.determinism import SampledVerdict
from sweeper.results.scores import score_key
from sweeper.spec import DeterminismSpec

#: The fewest tokens an agreement must compare: a stated floor, not a test's level (any token
#: beyond the tolerance fails the agreement). Over none (the AR's scores lost their positions)
#: it compared nothing; over a handful, a scoring path that differs only at some positions (late
#: in an output, or past some length) is barely looked at. 16: one short output.
MIN_AGREEMENT_TOKENS = 16


def output_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """Which output a score is of, whoever scored it (`score_key` without its scorer)."""
    return score_key(row)[:-1]


def agreement(
    mine: Iterable[Mapping[str, Any]], theirs: Iterable[Mapping[str, Any]]
) -> tuple[float | None, int]:
    """The largest difference of a token's raw probability between two scorers' records of the
    same outputs, and how many tokens were compared (None, 0: none in common)."""
    by_key = {output_key(r): r for r in theirs if not r.get("error")}
    largest, n = 0.0, 0
    for row in mine:
        other = by_key.get(output_key(row))
        if other is None or row.get("error"):
            continue
        for a, b in zip(row.get("positions") or [], other.get("positions") or [], strict=False):
            if int(a["token"]) != int(b["token"]):
                continue
            largest = max(largest, abs(_prob(a["logprob"]) - _prob(b["logprob"])))
            n += 1
    return (largest if n else None), n


def agreed(
    verdict: SampledVerdict, delta: float | None, n: int, policy: DeterminismSpec
) -> SampledVerdict:
    """The scored `verdict` where the agreement holds (`delta` over `n` tokens, from
    `agreement`), else `unproven` saying why (the verdict it replaces kept in the detail)."""
    if n < MIN_AGREEMENT_TOKENS:
        why = (
            f"agreement over {n} tokens < {MIN_AGREEMENT_TOKENS}: too few of the AR server's "
            "own scored outputs were rescored by the scoring server to show that its scoring "
            "path is the AR's"
        )
    elif delta is not None and delta > policy.score_agreement:
        why = (
            f"the scoring server's probabilities differ from the AR server's own by up to "
            f"{delta:.4g} on the same AR samples ({n} tokens), beyond "
            f"determinism.score_agreement {policy.score_agreement:g}: the scoring path is "
            "not the AR's"
        )
    else:
        return verdict
    return SampledVerdict("unproven", f"{why} ({verdict.verdict}: {verdict.detail})")


def _prob(logprob: Any) -> float:
    value = float(logprob)
    return math.exp(value) if math.isfinite(value) else 0.0
