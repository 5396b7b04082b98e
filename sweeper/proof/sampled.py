"""A sampled point's distribution verdict from its samples (`determinism.sampled: distribution`).

Pure: sample rows (`samples.jsonl`) in, a verdict and the point's columns out. The test itself
is `sweeper.proof.distribution`; this module decides what its outcome proves:

- `shifted`: the speculative config's samples differ from its AR baseline's (p <= alpha), and
  the AR-vs-AR control (the baseline's two seed sets against each other) did not alarm;
- `distribution-ok`: no difference found by a test that detects, on this run's own baseline
  samples, a shift of at most `max_shift` (total variation per token) with 80% power;
- `unproven` (with why) in every other case: no samples, no baseline samples, a control that
  alarmed (the run cannot tell a shift from noise), or a test too weak to prove anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from sweeper.config import temperature_of
from sweeper.proof.determinism import SampledVerdict
from sweeper.proof.distribution import TEST_NAME, DistributionTest, two_sample_test
from sweeper.proof.power import MEASURED, Power, detectable_shift, pools_of
from sweeper.results.rows import is_failed, is_missing
from sweeper.spec import DeterminismSpec

#: The point columns a distribution verdict fills (`PointRecord`).
COLUMNS = (
    "distribution_p",
    "distribution_test",
    "distribution_n",
    "distribution_shift",
    "distribution_control_p",
)


def by_prompt(rows: Iterable[Mapping[str, Any]], role: str) -> dict[str, list[list[int]]]:
    """One role's sample token ids per prompt, in sample order (failed samples left out)."""
    out: dict[str, list[tuple[int, list[int]]]] = {}
    for row in rows:
        if row.get("role") != role or is_failed(row):
            continue
        ids = [int(t) for t in row.get("token_ids") or []]
        out.setdefault(str(row["prompt_id"]), []).append((int(row.get("index") or 0), ids))
    return {prompt: [ids for _, ids in sorted(found)] for prompt, found in sorted(out.items())}


def control_columns(rows: Iterable[Mapping[str, Any]], policy: DeterminismSpec) -> dict[str, Any]:
    """An AR point's own columns from its `ar` and `control` samples: the control's p-value
    and the test's power measured on the baseline's samples (both sets pooled)."""
    rows = list(rows)
    ar, control = by_prompt(rows, "ar"), by_prompt(rows, "control")
    test = two_sample_test(control, ar)
    if test is None:
        return {}
    pooled = {p: [*ar.get(p, []), *control.get(p, [])] for p in sorted({*ar, *control})}
    power = detectable_shift(pools_of(pooled), test.n, policy.alpha, basis=MEASURED)
    return {
        "distribution_test": TEST_NAME,
        "distribution_n": test.n,
        "distribution_control_p": test.p_value,
        "distribution_shift": power.shift,
    }


def judge(
    test_rows: Iterable[Mapping[str, Any]],
    baseline_rows: Iterable[Mapping[str, Any]],
    baseline_point: Mapping[str, Any] | None,
    policy: DeterminismSpec,
) -> tuple[SampledVerdict, dict[str, Any]]:
    """A speculative point's verdict from its `test` samples and its baseline's `ar` samples;
    the control's p-value and the power come from the baseline point's columns (computed when
    it was measured), else from its `control` samples here."""
    baseline_rows = list(baseline_rows)
    mine, theirs = by_prompt(test_rows, "test"), by_prompt(baseline_rows, "ar")
    if not theirs:
        why = "no AR baseline samples to compare with (no baseline, or its point failed)"
        return _unproven(why), {}
    if not mine:
        return _unproven("no samples of this config were drawn, or all of them failed"), {}
    test = two_sample_test(mine, theirs)
    if test is None:
        return _unproven("no prompt has 2+ samples on both sides"), {}
    own = dict(baseline_point or {})
    if _missing(own.get("distribution_control_p")):
        own = control_columns(baseline_rows, policy)
    control_p = _number(own.get("distribution_control_p"))
    shift = _number(own.get("distribution_shift"))
    columns = {
        "distribution_p": test.p_value,
        "distribution_test": test.test,
        "distribution_n": test.n,
        "distribution_shift": shift,
        "distribution_control_p": control_p,
    }
    return verdict_of(test, control_p, shift, policy), columns


def verdict_of(
    test: DistributionTest,
    control_p: float | None,
    shift: float | None,
    policy: DeterminismSpec,
) -> SampledVerdict:
    """What one test's outcome proves, given the run's control and power (module docstring)."""
    alpha = policy.alpha
    facts = f"{test.test}: p = {test.p_value:.4g}, N = {test.n} a side, {test.prompts} prompt(s)"
    if control_p is None:
        return _unproven(f"{facts}; no AR-vs-AR control, so no false-alarm check on this run")
    if control_p <= alpha:
        return _unproven(
            f"{facts}; the AR-vs-AR control alarmed too (p = {control_p:.4g} <= {alpha:g}): this "
            "run cannot tell a shift from noise"
        )
    if test.p_value <= alpha:
        way = f", {test.direction}" if test.direction else ""
        return SampledVerdict("shifted", f"{facts} <= alpha {alpha:g}{way}")
    power = Power(shift, test.n, test.prompts, test.tokens, alpha, MEASURED)
    if shift is None or shift > policy.max_shift:
        return _unproven(
            f"{facts}; too few samples to prove anything: {power.text()} (a pass needs "
            f"{policy.max_shift:.0%} or less; raise determinism.samples)"
        )
    return SampledVerdict("distribution-ok", f"{facts} > alpha {alpha:g}; {power.text()}")


def _unproven(why: str) -> SampledVerdict:
    return SampledVerdict("unproven", why)


def _missing(value: Any) -> bool:
    return is_missing(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    return None if is_missing(value) else float(value)


#: The scored test's columns a proof shows (`sweeper.proof.scored.judge`), numbers then words.
_SCORED_NUMBERS = (
    "scored_p",
    "scored_n_tokens",
    "scored_power",
    "scored_exact_share",
    "scored_control_p",
)
_SCORED_WORDS = ("scored_direction", "scored_impossible")


def proofs(points: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """How each speculative ok point at temperature > 0 was proven, for the report and
    `diagnose`: its check, verdict, the distribution test's p-value, samples a side, detectable
    shift and control p-value, the scored test's p-value, tokens, detectable temperature
    change, exact share, control p-value, direction and first impossible token (None where it
    had none), and why it is unproven."""
    out = []
    for row in points:
        if temperature_of(row) <= 0 or str(row.get("mode")) == "ar":
            continue
        if row.get("status") != "ok":
            continue
        why = row.get("unproven_reason") or row.get("sampled_detail")
        out.append(
            {
                "point_id": str(row.get("point_id")),
                "host": str(row.get("host")),
                "check": str(row.get("sampled_check") or "repeats"),
                "determinism": str(row.get("determinism")),
                **{c: _number(row.get(c)) for c in COLUMNS if c != "distribution_test"},
                "test": _text(row.get("distribution_test")),
                **{c: _number(row.get(c)) for c in _SCORED_NUMBERS},
                **{c: _text(row.get(c)) or None for c in _SCORED_WORDS},
                "why": why if isinstance(why, str) else "",
            }
        )
    return out


def proof_line(proof: Mapping[str, Any]) -> str:
    """One point's proof in a line: `<point>: distribution-ok (distribution: p 0.41, N 48 a
    side, detects >= 4.0% per token, control p 0.62)`; a scored point's `scored p 0.41 over
    8448 tokens (100% exact), detects 1.07x hotter or colder, control p 0.62`, and its first
    impossible token."""
    parts = [proof["check"]]
    if proof.get("distribution_p") is not None:
        parts.append(f"p {proof['distribution_p']:.4g}")
    if proof.get("distribution_n") is not None:
        parts.append(f"N {int(proof['distribution_n'])} a side")
    if proof.get("distribution_shift") is not None:
        parts.append(f"detects >= {proof['distribution_shift']:.1%} per token")
    if proof.get("distribution_control_p") is not None:
        parts.append(f"control p {proof['distribution_control_p']:.4g}")
    parts += _scored_parts(proof)
    line = f"{proof['point_id']}: {proof['determinism']} ({', '.join(parts)})"
    if proof.get("scored_impossible"):
        line += f"; first impossible token: {proof['scored_impossible']}"
    return line + (f": {proof['why']}" if proof.get("why") else "")


def _scored_parts(proof: Mapping[str, Any]) -> list[str]:
    """The scored test's figures in `proof_line`'s words ([] where it did not run)."""
    if proof.get("scored_p") is None:
        return []
    head = f"scored p {proof['scored_p']:.4g}"
    if proof.get("scored_n_tokens") is not None:
        head += f" over {int(proof['scored_n_tokens'])} tokens"
    if proof.get("scored_exact_share") is not None:
        head += f" ({proof['scored_exact_share']:.0%} exact)"
    if proof.get("scored_direction"):
        head += f", {proof['scored_direction']}"
    parts = [head]
    if proof.get("scored_power") is not None:
        parts.append(f"detects {math.exp(proof['scored_power']):.3g}x hotter or colder")
    if proof.get("scored_control_p") is not None:
        parts.append(f"scored control p {proof['scored_control_p']:.4g}")
    return parts
