"""A sampled point's scored verdict as its run records it (`determinism.sampled: scored`, and
beside coupling): judged from its scores against its AR baseline's control, held to the
scorer's agreement with the AR's own scores; `unproven` and pending while some of its samples
have no score yet; and, beside coupling, a second proof that decides the point's verdict only
where it finds a violation the token-for-token comparison did not see.

Pure: score rows and recorded columns in, a verdict and the point's columns out. Who scores
what, and when, is the runner's (`sweeper.runner.scoring`); the test itself is `scored.py`, the
agreement `agreement.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sweeper.proof import scored
from sweeper.proof.agreement import agreed, agreement
from sweeper.proof.determinism import SampledVerdict
from sweeper.proof.verdicts import VIOLATIONS, worst
from sweeper.results.scores import SELF
from sweeper.spec import DeterminismSpec
from sweeper.spec.model import SampledCheck


def judged(
    rows: Sequence[Mapping[str, Any]],
    ar_rows: Sequence[Mapping[str, Any]],
    *,
    scorer: str,
    label: str,
    control_point: Mapping[str, Any] | None,
    policy: DeterminismSpec,
) -> tuple[SampledVerdict, dict[str, Any]]:
    """A speculative point's verdict and columns from its samples' scores (`rows`) against its
    AR baseline's control (`control_point`), `unproven` where the scorer's scores of the AR
    outputs (among `ar_rows`, every scorer's) differ from the AR's own beyond the tolerance.
    `scorer`: as its score rows name it; `label`: as the point's `scored_by` column does."""
    verdict, columns = scored.judge(rows, policy, role="test", control_point=control_point)
    mine = [r for r in ar_rows if r.get("scorer") == scorer]
    delta, n = agreement(mine, [r for r in ar_rows if r.get("scorer") == SELF])
    columns = {
        **columns,
        "scored_by": label,
        "score_agreement": delta,
        "score_agreement_n": n,
        "scored_verdict": verdict.verdict,
        "scored_detail": verdict.detail,
    }
    return agreed(verdict, delta, n, policy), columns


def failures(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """Why some of a point's samples have no score (their server died, or refused); None where
    every one was scored."""
    failed = [r for r in rows if r.get("error")]
    return f"{len(failed)} of {len(rows)} samples: {failed[0]['error']}" if failed else None


def not_yet(reason: str) -> SampledVerdict:
    """A point whose samples could not all be scored (`reason`): `unproven` until a resumed run
    scores what is missing."""
    why = f"its samples could not be scored yet ({reason}); `sweeper run --resume` scores them"
    return SampledVerdict("unproven", why)


def deciding(check: SampledCheck | None, verdict: SampledVerdict | None) -> SampledVerdict | None:
    """The scored verdict where it is the point's (the scored check); None beside coupling,
    where the token-for-token verdict stands and the scored one joins it through `merge`."""
    return None if check == "coupled" else verdict


def merge(columns: Mapping[str, Any], scored_columns: Mapping[str, Any]) -> dict[str, Any]:
    """A coupled point's columns with the scored proof beside them: its verdict becomes the
    scored one where that is a violation the token-for-token comparison did not see."""
    out = {**columns, **scored_columns}
    second = scored_columns.get("scored_verdict")
    if second in VIOLATIONS and columns.get("determinism") not in VIOLATIONS:
        out["determinism"] = worst([str(columns.get("determinism")), str(second)])
        out["sampled_detail"] = f"scored beside coupling: {scored_columns.get('scored_detail')}"
    return out


def settled_columns(
    verdict: SampledVerdict, columns: Mapping[str, Any], *, pending: bool
) -> dict[str, Any]:
    """The columns a settled line sets: the scored test's, the verdict, and whether the point
    still awaits scores."""
    return {
        **columns,
        "scored_pending": pending,
        "determinism": verdict.verdict,
        "sampled_detail": verdict.detail,
        "unproven_reason": verdict.detail if verdict.verdict == "unproven" else "",
    }
