"""What a distribution test proves (`proof/sampled.py`): shifted only with a quiet control,
distribution-ok only with a test strong enough to matter, unproven (with why) otherwise; and
the lines the report and `diagnose` print for each sampled point."""

from __future__ import annotations

from typing import Any

import numpy as np

from sweeper.proof.distribution import DistributionTest
from sweeper.proof.sampled import (
    by_prompt,
    control_columns,
    judge,
    proof_line,
    proofs,
    verdict_of,
)
from sweeper.spec import DeterminismSpec

#: Independent positions evenly over 4 tokens share few prefixes: a test on them detects only
#: larger shifts than on real samples, hence the looser bar.
POLICY = DeterminismSpec(alpha=0.01, max_shift=0.3)


def rows(role: str, width: int, n: int = 48, prompts: int = 3, seed: int = 0) -> list[dict]:
    """Sample rows of one role: 8 tokens each drawn evenly from `width` ids."""
    rng = np.random.default_rng(seed)
    return [
        {
            "role": role,
            "prompt_id": f"p{p}",
            "index": k,
            "token_ids": [int(t) for t in rng.integers(0, width, 8)],
            "error": None,
        }
        for p in range(prompts)
        for k in range(n)
    ]


def test_test_and_control_of_real_samples() -> None:
    baseline = rows("ar", 4, seed=1) + rows("control", 4, seed=2)
    own = control_columns(baseline, POLICY)
    assert own["distribution_control_p"] > POLICY.alpha
    assert own["distribution_n"] == 48
    assert own["distribution_shift"] is not None and own["distribution_shift"] <= 0.3
    ok, columns = judge(rows("test", 4, seed=3), baseline, own, POLICY)
    assert ok.verdict == "distribution-ok", ok.detail
    assert "80% power" in ok.detail and columns["distribution_p"] > POLICY.alpha
    hot, columns = judge(rows("test", 6, seed=4), baseline, own, POLICY)
    assert hot.verdict == "shifted", hot.detail
    assert "more spread than AR" in hot.detail
    assert columns["distribution_p"] <= POLICY.alpha
    # Without the baseline point's columns, the control and power come from its samples.
    again, _ = judge(rows("test", 6, seed=4), baseline, None, POLICY)
    assert again.verdict == "shifted"


def _test(p: float) -> DistributionTest:
    return DistributionTest(p, (p, p, p), (-1.0, 0.0, 0.0), 48, 3, 8, 999)


def test_no_pass_without_power_and_no_alarm_without_a_quiet_control() -> None:
    assert verdict_of(_test(0.4), 0.5, 0.05, POLICY).verdict == "distribution-ok"
    weak = verdict_of(_test(0.4), 0.5, 0.5, POLICY)
    assert weak.verdict == "unproven" and "raise determinism.samples" in weak.detail
    assert verdict_of(_test(0.4), 0.5, None, POLICY).verdict == "unproven"  # nothing detected
    assert verdict_of(_test(0.001), 0.5, 0.5, POLICY).verdict == "shifted"  # a find is a find
    noisy = verdict_of(_test(0.001), 0.004, 0.05, POLICY)
    assert noisy.verdict == "unproven" and "control alarmed" in noisy.detail
    assert verdict_of(_test(0.4), None, 0.05, POLICY).verdict == "unproven"


def test_missing_samples_are_unproven_with_why() -> None:
    baseline = rows("ar", 4) + rows("control", 4, seed=2)
    none, _ = judge([], baseline, None, POLICY)
    assert none.verdict == "unproven" and "no samples of this config" in none.detail
    alone, _ = judge(rows("test", 4), [], None, POLICY)
    assert alone.verdict == "unproven" and "no AR baseline samples" in alone.detail
    failed = [{**r, "error": "timeout"} for r in rows("test", 4)]
    assert judge(failed, baseline, None, POLICY)[0].verdict == "unproven"


def test_samples_by_prompt_keep_order_and_leave_failures_out() -> None:
    found = by_prompt(
        [
            {"role": "ar", "prompt_id": "a", "index": 1, "token_ids": [2]},
            {"role": "ar", "prompt_id": "a", "index": 0, "token_ids": [1]},
            {"role": "ar", "prompt_id": "a", "index": 2, "token_ids": [3], "error": "x"},
            {"role": "control", "prompt_id": "a", "index": 0, "token_ids": [9]},
        ],
        "ar",
    )
    assert found == {"a": [[1], [2]]}


def test_proofs_of_sampled_speculative_points() -> None:
    points: list[dict[str, Any]] = [
        {"point_id": "ar", "mode": "ar", "temperature": 0.7, "status": "ok"},
        {"point_id": "g", "mode": "speculative", "temperature": 0.0, "status": "ok"},
        {
            "point_id": "s",
            "host": "local",
            "mode": "speculative",
            "temperature": 0.7,
            "status": "ok",
            "sampled_check": "distribution",
            "determinism": "distribution-ok",
            "distribution_p": 0.41,
            "distribution_n": 48,
            "distribution_shift": 0.04,
            "distribution_control_p": 0.62,
            "unproven_reason": "",
        },
        {
            "point_id": "u",
            "mode": "speculative",
            "temperature": 0.7,
            "status": "ok",
            "sampled_check": "coupled",
            "determinism": "unproven",
            "unproven_reason": "unseeded sampling: nothing to compare",
        },
    ]
    found = proofs(points)
    assert [p["point_id"] for p in found] == ["s", "u"]
    assert proof_line(found[0]) == (
        "s: distribution-ok (distribution, p 0.41, N 48 a side, detects >= 4.0% per token, "
        "control p 0.62)"
    )
    assert proof_line(found[1]) == "u: unproven (coupled): unseeded sampling: nothing to compare"


def test_a_scored_points_proof_says_its_figures_and_its_first_impossible_token() -> None:
    evidence = "prompt poem sample 3 position 7: token 1234 (rank 57) outside the top-p nucleus"
    point = {
        "point_id": "s",
        "mode": "speculative",
        "temperature": 0.7,
        "status": "ok",
        "sampled_check": "scored",
        "determinism": "impossible-token",
        "scored_p": 0.0012,
        "scored_n_tokens": 8448,
        "scored_exact_share": 1.0,
        "scored_direction": "hotter",
        "scored_power": 0.0677,
        "scored_control_p": 0.62,
        "scored_impossible": evidence,
    }
    (found,) = proofs([point])
    assert proof_line(found) == (
        "s: impossible-token (scored, scored p 0.0012 over 8448 tokens (100% exact), hotter, "
        "detects 1.07x hotter or colder, scored control p 0.62); first impossible token: "
        + evidence
    )
