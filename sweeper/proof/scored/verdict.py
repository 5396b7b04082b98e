"""A sampled point's scored verdict as its run records it (`determinism.sampled: scored`, and
beside coupling): judged from its scores against its AR baseline's control, held to the
scorer's agreement with the AR's own scores; `unproven` and pending while some of its samples
have no score yet; and, beside coupling, a second proof that decides the point's verdict only
where it finds a violation the token-for-token comparison did not see.

Pure: score rows and recorded columns in, a verdict and the point's columns out, one call per
decision: at the point's measurement (`at_measurement`, `unscorable`), when its scorer settles
it (`settled`, `pending`), and as its columns are merged (`merge`). Who scores what, and when,
is the runner's (`sweeper.runner.scoring`); the test itself is `judge.py`, the agreement
`agreement.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sweeper.proof.determinism import SampledVerdict
from sweeper.proof.scored.agreement import agreed, agreement
from sweeper.proof.scored.judge import judge
from sweeper.proof.verdicts import VIOLATIONS, worst
from sweeper.results.scores import SELF
from sweeper.spec import DeterminismSpec
from sweeper.spec.model import SampledCheck

Judged = tuple[SampledVerdict | None, dict[str, Any]]


def at_measurement(
    check: SampledCheck | None,
    rows: Sequence[Mapping[str, Any]],
    ar_rows: Sequence[Mapping[str, Any]],
    *,
    scorer: str,
    control_point: Mapping[str, Any] | None,
    policy: DeterminismSpec,
) -> Judged:
    """A speculative point's scored verdict and columns as its measurement records them, its
    own server having scored its samples (`rows`) and rescored the AR outputs (among
    `ar_rows`) as `scorer`: pending where some samples have no score (the scored check), else
    `judged`; beside coupling no verdict (the token-for-token one stands; `merge` adds this
    one's violation)."""
    failed = _failures(rows)
    if failed and check == "scored":
        verdict = _not_yet(failed)
        return verdict, {"scored_pending": True, "scored_by": SELF, "scored_detail": verdict.detail}
    verdict, columns = judged(
        rows, ar_rows, scorer=scorer, label=SELF, control_point=control_point, policy=policy
    )
    return _deciding(check, verdict), columns


def unscorable(check: SampledCheck | None, evidence: str, *, ar: bool) -> Judged:
    """A point whose server does not score its outputs (`evidence`: what it said): `unproven`
    where it is judged (an AR point's are only the control)."""
    why = f"this server does not score its outputs ({evidence})"
    verdict = None if ar else SampledVerdict("unproven", why)
    return _deciding(check, verdict), {"scored_detail": why}


def settled(
    rows: Sequence[Mapping[str, Any]],
    ar_rows: Sequence[Mapping[str, Any]],
    *,
    scorer: str,
    label: str,
    control_point: Mapping[str, Any] | None,
    policy: DeterminismSpec,
) -> dict[str, Any]:
    """The settled line's columns of a point whose samples a later server scored (`rows`, as
    `scorer`): still `pending` where some have no score, else its verdict (`judged`)."""
    failed = _failures(rows)
    if failed:
        return pending(failed)
    verdict, columns = judged(
        rows, ar_rows, scorer=scorer, label=label, control_point=control_point, policy=policy
    )
    return _settled_columns(verdict, columns, pending=False)


def pending(reason: str) -> dict[str, Any]:
    """The settled line's columns of a point whose samples could not all be scored (`reason`):
    `unproven` and pending, until a resumed run scores what is missing."""
    verdict = _not_yet(reason)
    return _settled_columns(verdict, {"scored_detail": verdict.detail}, pending=True)


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
    verdict, columns = judge(rows, policy, role="test", control_point=control_point)
    mine = [r for r in ar_rows if r.get("scorer") == scorer]
    delta, n = agreement(mine, [r for r in ar_rows if r.get("scorer") == SELF])
    twins = sum(1 for r in rows if r.get("twin_of"))
    detail = verdict.detail
    if twins:
        detail += f" ({twins} of {len(rows)} outputs identical to their AR twin's: its scores)"
    columns = {
        **columns,
        "scored_by": label,
        "score_agreement": delta,
        "score_agreement_n": n,
        "scored_verdict": verdict.verdict,
        "scored_detail": detail,
    }
    verdict = SampledVerdict(verdict.verdict, detail)
    if rows and twins == len(rows):  # the AR server scored every one: no path to agree with
        return verdict, columns
    return agreed(verdict, delta, n, policy), columns


def merge(columns: Mapping[str, Any], scored_columns: Mapping[str, Any]) -> dict[str, Any]:
    """A coupled point's columns with the scored proof beside them: its verdict becomes the
    scored one where that is a violation the token-for-token comparison did not see."""
    out = {**columns, **scored_columns}
    second = scored_columns.get("scored_verdict")
    if second in VIOLATIONS and columns.get("determinism") not in VIOLATIONS:
        out["determinism"] = worst([str(columns.get("determinism")), str(second)])
        out["sampled_detail"] = f"scored beside coupling: {scored_columns.get('scored_detail')}"
    return out


def _failures(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """Why some of a point's samples have no score (their server died, or refused); None where
    every one was scored."""
    failed = [r for r in rows if r.get("error")]
    return f"{len(failed)} of {len(rows)} samples: {failed[0]['error']}" if failed else None


def _not_yet(reason: str) -> SampledVerdict:
    why = f"its samples could not be scored yet ({reason}); `sweeper run --resume` scores them"
    return SampledVerdict("unproven", why)


def _deciding(check: SampledCheck | None, verdict: SampledVerdict | None) -> SampledVerdict | None:
    """The scored verdict where it is the point's (the scored check); None beside coupling."""
    return None if check == "coupled" else verdict


def _settled_columns(
    verdict: SampledVerdict, columns: Mapping[str, Any], *, pending: bool
) -> dict[str, Any]:
    return {
        **columns,
        "scored_pending": pending,
        "determinism": verdict.verdict,
        "sampled_detail": verdict.detail,
        "unproven_reason": verdict.detail if verdict.verdict == "unproven" else "",
    }
