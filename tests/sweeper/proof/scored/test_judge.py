"""The scored test (`proof/scored/judge.py`) on synthetic samplers whose fault is known: a correct
one passes with its power stated, a hotter or colder one is shifted (and says which way), one that
ignores top-p draws impossible tokens (shown with their evidence); without a quiet AR control
nothing is proven; near ties above the control's rate count as violations; a sampler colder on a few
positions only, which the score misses, is caught by the colder ratio at its level."""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest

from sweeper.proof.scored.judge import (
    COLD_SHARE,
    HOT_SHARE,
    SCORED_COLUMNS,
    SIMULATIONS,
    control,
    expected_power,
    judge,
    scored,
    simulations,
)
from sweeper.proof.verdicts import SEVERITY, VIOLATIONS
from sweeper.results.records import PointRecord, extra_config_columns
from sweeper.spec import DeterminismSpec
from sweeper.stats.steps import simulated_sums, tail_p_values
from tests.sweeper.proof.scored.scored_data import processed, ranked, records, target

POLICY = DeterminismSpec()
LOGITS = target(4, 24, 64, seed=1)
#: Samples per prompt: 3,072 tokens a point.
N = 32


@functools.cache
def control_point(basis: str, k: int) -> dict[str, Any]:
    return control(records(LOGITS, N, role="ar", basis=basis, k=k, seed=1), POLICY)


def verdict(basis: str = "exact", k: int = 8, **drawn: Any) -> tuple[str, str, dict[str, Any]]:
    rows = records(LOGITS, N, basis=basis, k=k, seed=2, **drawn)
    found, columns = judge(rows, POLICY, control_point=control_point(basis, k))
    assert set(columns) == set(SCORED_COLUMNS)
    return found.verdict, found.detail, columns


def test_a_correct_sampler_passes_with_its_power_stated() -> None:
    found, detail, columns = verdict()
    assert found == "distribution-ok", detail
    assert "hotter or colder at every token with 80% power" in detail
    assert 0 < columns["scored_power"] <= POLICY.scored_max_shift
    assert columns["scored_exact_share"] == 1.0 and columns["scored_n_tokens"] == 4 * 24 * N
    assert columns["scored_control_p"] > POLICY.alpha


@pytest.mark.parametrize(
    ("basis", "k", "factor", "way"),
    [("exact", 8, 1.6, "hotter"), ("exact", 8, 0.6, "colder"), ("topk", 32, 1.6, "hotter"),
     ("topk", 32, 0.6, "colder")],
)  # fmt: skip
def test_a_hotter_or_colder_sampler_is_shifted_and_says_which_way(
    basis: str, k: int, factor: float, way: str
) -> None:
    found, detail, columns = verdict(basis, k, drawn_as={"temperature": 0.7 * factor})
    assert found == "shifted", detail
    assert columns["scored_direction"] == way and way in detail
    assert columns["scored_p"] <= POLICY.alpha


def test_a_correct_sampler_on_the_top_k_basis_is_no_violation() -> None:
    found, detail, columns = verdict("topk", 32)
    assert found not in VIOLATIONS, detail
    assert columns["scored_exact_share"] == 0.0  # the tail always matters untruncated


@pytest.mark.parametrize("basis", ["exact", "topk"])
def test_ignoring_top_p_draws_impossible_tokens_shown_with_their_evidence(basis: str) -> None:
    found, detail, columns = verdict(basis, 16, top_p=0.9, drawn_as={"top_p": None})
    assert found == "impossible-token", detail
    first = columns["scored_impossible"]
    assert re.match(r"prompt q\d sample \d+ position \d+: token \d+ \(rank \d+\)", first)
    assert "(rank " in first and "nats below the top-p boundary" in first
    assert columns["scored_impossible_n"] > 0 and first in detail


def test_the_same_sampler_truncated_as_asked_draws_none() -> None:
    found, detail, columns = verdict("exact", 8, top_p=0.9)
    assert found == "distribution-ok", detail
    assert columns["scored_impossible_n"] == 0


def test_nothing_is_proven_without_a_quiet_control() -> None:
    rows = records(LOGITS, N, seed=2)
    alone, _ = judge(rows, POLICY)
    assert alone.verdict == "unproven" and "no AR control" in alone.detail
    # An AR server whose own samples fail (here: scored as if drawn 1.6x colder than they were).
    hot_ar = control(records(LOGITS, N, role="ar", seed=1, drawn_as={"temperature": 1.12}), POLICY)
    assert hot_ar["scored_control_p"] <= POLICY.alpha
    alarmed, _ = judge(rows, POLICY, control_point=hot_ar)
    assert alarmed.verdict == "unproven" and "fail the same test" in alarmed.detail


def test_a_hot_scorer_cannot_hide_a_hot_sampler() -> None:
    """The same 1.6x hotter processing in the sampler and in the p and above its scorer claims
    (its raw logprobs right), on the test and the AR control alike: the claims are rebuilt from
    the raw logprobs at the asked parameters, do not match, and name where; the PIT taken from
    the rebuilt values shows the control's sampler hot."""
    hot = {"temperature": 0.7 * 1.6}
    ar = control(records(LOGITS, N, role="ar", seed=1, drawn_as=hot, scored_as=hot), POLICY)
    assert ar["scored_control_p"] <= POLICY.alpha
    rows = records(LOGITS, N, seed=2, drawn_as=hot, scored_as=hot)
    found, _ = judge(rows, POLICY, control_point=control_point("exact", 8))
    assert found.verdict == "unproven", found.detail
    assert "the ones rebuilt from its raw logprobs at the asked parameters" in found.detail
    assert re.search(r"first: prompt q0 sample 0 position \d+: token \d+ claimed p ", found.detail)


def test_no_samples_or_a_failed_scorer_prove_nothing() -> None:
    none, columns = judge([], POLICY, control_point=control_point("exact", 8))
    assert none.verdict == "unproven" and columns == {}
    failed = [{**records(LOGITS, 1, seed=2)[0], "positions": [], "error": "HTTP 400: logprobs"}]
    verdict_, _ = judge(failed, POLICY, control_point=control_point("exact", 8))
    assert verdict_.verdict == "unproven" and "HTTP 400: logprobs" in verdict_.detail
    # A pass over the samples that were scored says nothing of one that was not.
    rows = records(LOGITS, N, seed=2)
    unreadable = {**rows[0], "order": ["top_p", "temperature"]}
    partial, _ = judge([unreadable, *rows[1:]], POLICY, control_point=control_point("exact", 8))
    assert partial.verdict == "unproven" and "could not be scored" in partial.detail
    assert "temperature must come first" in partial.detail


def _with_near_ties(rows: list[dict[str, Any]], every: int) -> list[dict[str, Any]]:
    """Every `every`-th sample's first token replaced by the likeliest one the asked top-p
    removes there (its raw logprobs its own, so the claim holds when rebuilt from them), a near
    tie: its scorer states a margin just wider than its distance in nats to the nucleus's last
    token (the boundary)."""
    out = []
    for i, row in enumerate(rows):
        if i % every == 0:
            z = LOGITS[int(row["prompt_id"][1:]), 0]
            kept = processed(z, row["temperature"], top_p=row["top_p"]) > 0
            raw = z - np.log(np.exp(z).sum())
            order = [int(t) for t in ranked(raw)]
            token = next(t for t in order if not kept[t])
            boundary = float(raw[kept].min())
            claim = {"p": 0.0, "above": 1.0, "gap": 0.001, "boundary": boundary}
            tie = {**row["positions"][0], "token": token, "logprob": float(raw[token]),
                   "rank": order.index(token) + 1, **claim}  # fmt: skip
            margin = boundary - float(raw[token]) + 1e-3
            row = {**row, "positions": [tie, *row["positions"][1:]], "near_tie_margin": margin}
        out.append(row)
    return out


def test_near_ties_are_numerics_unless_above_the_controls_rate() -> None:
    ar_rows = records(LOGITS, N, role="ar", seed=1, top_p=0.9)
    rows = _with_near_ties(records(LOGITS, N, seed=2, top_p=0.9), every=2)
    quiet = control(ar_rows, POLICY)
    tied, _ = judge(rows, POLICY, control_point=quiet)
    assert tied.verdict == "impossible-token" and "counted as violations" in tied.detail
    numerics = control(_with_near_ties(ar_rows, every=2), POLICY)
    assert numerics["scored_control_near_ties"] == 64
    calm, columns = judge(rows, POLICY, control_point=numerics)
    assert calm.verdict == "distribution-ok", calm.detail
    assert columns["scored_near_ties"] == 64


def test_a_verdict_is_reproducible() -> None:
    rows = records(LOGITS, 8, seed=3)
    first = judge(rows, POLICY, control_point=control_point("exact", 8))[1]["scored_p"]
    assert judge(rows, POLICY, control_point=control_point("exact", 8))[1]["scored_p"] == first


def test_the_plans_power_grows_with_the_tokens() -> None:
    few, many = expected_power(500, POLICY), expected_power(20_000, POLICY)
    assert few.shift is not None and many.shift is not None and many.shift < few.shift
    assert "hotter or colder at every token" in many.text() and "expected" in many.text()


def test_impossible_token_is_a_violation_between_shifted_and_diverged() -> None:
    assert "impossible-token" in VIOLATIONS
    assert (
        SEVERITY.index("shifted") < SEVERITY.index("impossible-token") < SEVERITY.index("diverged")
    )


def test_the_scored_columns_are_declared_point_columns_never_grid_flags() -> None:
    """A column no record model declares is read as a grid flag (a config's identity): the
    scored test's columns are declared, and a judged point's columns validate as a record."""
    assert extra_config_columns(SCORED_COLUMNS) == []
    _, _, columns = verdict()
    point = PointRecord(
        run_id="r", host="local", point_id="p", attempt="a", server_config_id="sc",
        engine="ddtree", mode="speculative", temperature=0.7, max_tokens=24, concurrency=1,
        status="ok", started_at="t0", finished_at="t1", **columns,
    )  # fmt: skip
    assert {c: getattr(point, c) for c in SCORED_COLUMNS} == columns


#: Every third position drawn half as hot, the rest as asked (as drafted positions' fault).
THIRDS = range(0, 24, 3)


def _score_cold_p(rows: list[dict[str, Any]]) -> float:
    """The summed temperature score's lower tail alone (the colder side before the ratio)."""
    found = scored(rows, POLICY, ("test",))
    assert found.scores is not None
    _, high = found.direction()
    sums = simulated_sums([s.edges for s in found.scores], [s.values for s in found.scores],
                          SIMULATIONS, np.random.default_rng(found.seed))  # fmt: skip
    return tail_p_values(high * found.norm(), high * found.norm(), sums)[1]


def test_a_sampler_colder_on_a_few_positions_is_caught_where_the_score_misses_it() -> None:
    """384 tokens, a third of them drawn 2x colder: the colder ratio sees it; the score's lower
    tail, noisy with the tail's rare large steps, does not, even at the colder part's level."""
    rows = records(LOGITS, 4, seed=119, drawn_as={"temperature": 0.35}, faulty=THIRDS)
    found, columns = judge(rows, POLICY, control_point=control_point("exact", 8))
    assert found.verdict == "shifted" and columns["scored_direction"] == "colder", found.detail
    assert _score_cold_p(rows) > COLD_SHARE * POLICY.alpha


def test_the_colder_part_keeps_its_level_on_a_correct_sampler() -> None:
    """Its p-values on a correct sampler's tokens (40 points of 384 tokens) are not small more
    often than uniform ones: at most 10 of 40 at or below 0.1 (4 expected; 11 or more has
    probability 0.002 under the null)."""
    small = 0
    for seed in range(40):
        found = scored(records(LOGITS, 4, seed=1000 + seed), POLICY, ("test",))
        _, cold, _ = found.p_values()
        small += cold <= 0.1
    assert small <= 10


@pytest.mark.parametrize("alpha", [0.2, 0.01, 0.001])
def test_enough_simulations_that_each_part_can_reject_at_alpha(alpha: float) -> None:
    smallest = 1 / (simulations(alpha) + 1)
    assert smallest <= alpha * min(HOT_SHARE, COLD_SHARE) / 2


def test_an_impossible_token_is_a_violation_though_the_control_statistic_alarms() -> None:
    """A token the processed distribution gives probability 0 needs no statistic: where the
    AR control drew none (its cuts rebuilt right), the control's own score alarming at its
    rate alpha does not make the sampler's impossible token unproven."""
    cold_ar = records(LOGITS, N, role="ar", seed=1, top_p=0.9, drawn_as={"temperature": 0.42})
    alarmed_ar = control(cold_ar, POLICY)
    assert (
        alarmed_ar["scored_control_p"] <= POLICY.alpha
        and not alarmed_ar["scored_control_impossible"]
    )
    rows = records(LOGITS, N, seed=2, top_p=0.9, drawn_as={"top_p": None})
    found, columns = judge(rows, POLICY, control_point=alarmed_ar)
    assert found.verdict == "impossible-token", found.detail
    assert columns["scored_impossible_n"] > 0


def test_a_control_without_its_impossible_token_count_proves_nothing() -> None:
    """The AR control's impossible-token count is what lets a point's impossible token stand
    beside an alarming control, and what makes a control with its own impossible tokens
    disqualify the test: a control missing it (a damaged or hand-edited record) is not read as
    none."""
    ar = control(records(LOGITS, N, role="ar", seed=1, top_p=0.9), POLICY)
    rows = records(LOGITS, N, seed=2, top_p=0.9, drawn_as={"top_p": None})
    assert judge(rows, POLICY, control_point=ar)[0].verdict == "impossible-token"
    missing = {k: v for k, v in ar.items() if k != "scored_control_impossible"}
    found, _ = judge(rows, POLICY, control_point=missing)
    assert found.verdict == "unproven" and "impossible-token count" in found.detail, found.detail
