"""Determinism verdicts on crafted outputs: exact, near-tie, diverged, garbled, nondeterministic,
sampling (coupled, distribution, repeats), unproven, and the point status as the worst request
verdict."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest

from sweeper.proof.determinism import (
    PointVerdict,
    SampledVerdict,
    first_divergence,
    judge_point,
)
from sweeper.proof.garble import garble_components, garble_score
from sweeper.proof.scored.catalog import RUNTIME_MARGIN
from sweeper.proof.verdicts import worst
from sweeper.spec import DeterminismSpec

POEM = "The tide comes in, the tide goes out,\nthe gulls cry over the sand."
POEM_IDS = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
# Clear margins everywhere except token 6, where two tokens are almost equally likely.
MARGINS = [2.0, 1.5, 3.0, 0.9, 1.2, 2.2, 0.01, 1.0, 1.0, 1.0]
#: A spec that sets the greedy near-tie margin (nats) itself.
SPEC_MARGIN = DeterminismSpec(near_tie_margin=0.05)


def rec(prompt: str, repeat: int, ids: list[int], text: str, **extra: object) -> dict[str, object]:
    return {"prompt_id": prompt, "repeat": repeat, "token_ids": ids, "text": text, **extra}


def baseline(*prompts: str) -> list[dict[str, object]]:
    return [
        rec(p, r, POEM_IDS, POEM, top2_margins=MARGINS)
        for p in prompts or ("poem",)
        for r in (0, 1)
    ]


def judge(records: list[dict[str, object]], **kwargs: Any) -> PointVerdict:
    kwargs.setdefault("temperature", 0.0)
    return judge_point(records, baseline(), **kwargs)


def test_exact() -> None:
    result = judge([rec("poem", 0, POEM_IDS, POEM), rec("poem", 1, POEM_IDS, POEM)])
    assert result.status == "exact"
    assert [v.verdict for v in result.requests] == ["exact", "exact"]
    assert all(v.divergence_index is None for v in result.requests)


def test_near_tie_at_a_small_baseline_margin() -> None:
    ids = POEM_IDS[:6] + [99, 98, 97, 96]
    text = "The tide comes in, the tide rolls back,\nthe gulls cry over the sand."
    result = judge([rec("poem", 0, ids, text), rec("poem", 1, ids, text)], policy=SPEC_MARGIN)
    assert result.status == "near-tie"
    verdict = result.requests[0]
    assert verdict.divergence_index == 6
    assert verdict.margin == pytest.approx(0.01)
    # Stated, in nats, and whence.
    assert verdict.detail == (
        "baseline margin 0.01 nats < 0.05 nats (the spec's near_tie_margin) at token 6"
    )
    assert verdict.compared_with == "baseline"
    # The excerpts start at the same place and show both sides of the first differing character.
    assert verdict.char_offset == POEM.index("goes")
    assert "rolls back" in (verdict.excerpt or "")
    assert "goes out" in (verdict.reference_excerpt or "")


def test_diverged_where_the_baseline_was_confident() -> None:
    ids = POEM_IDS[:2] + [50, 51, 52, 53, 54, 55, 56, 57]
    text = "The tide rises high, the moon is bright,\nthe gulls sleep on the sand."
    result = judge([rec("poem", 0, ids, text), rec("poem", 1, ids, text)], policy=SPEC_MARGIN)
    assert result.status == "diverged"
    assert result.requests[0].divergence_index == 2
    assert result.requests[0].margin == pytest.approx(3.0)
    stated = "(baseline margin 3 nats, near-tie margin 0.05 nats: the spec's near_tie_margin)"
    assert stated in result.requests[0].detail


def test_near_tie_margin_comes_from_the_policy() -> None:
    ids = POEM_IDS[:2] + [50, 51, 52, 53, 54, 55, 56, 57]
    text = "The tide rises high, the moon is bright,\nthe gulls sleep on the sand."
    loose = DeterminismSpec(near_tie_margin=5.0)
    assert judge([rec("poem", 0, ids, text)], policy=loose).status == "near-tie"


def test_the_greedy_near_tie_margin_is_the_engines_calibrated_one() -> None:
    """A divergence where the baseline's top-1 minus top-2 is 0.01 nats: a near tie at the old
    spec default (0.05), but 10x the runtime's calibrated margin, which its records state (the
    measurement writes the catalog's): diverged, the margin stated in nats and whence. The spec
    still overrides it; a record that states none has no near ties."""
    ids = POEM_IDS[:6] + [99, 98, 97, 96]
    text = "The tide comes in, the tide rolls back,\nthe gulls cry over the sand."
    engine = {"engine": "ddtree_runtime", "near_tie_margin": RUNTIME_MARGIN}
    result = judge([rec("poem", 0, ids, text, **engine)])
    assert result.status == "diverged"
    assert result.requests[0].detail == (
        "differs from baseline at token 6 (baseline margin 0.01 nats, near-tie margin 0.001 "
        "nats: ddtree_runtime's calibrated margin)"
    )
    spec = judge(
        [rec("poem", 0, ids, text, **engine)], policy=DeterminismSpec(near_tie_margin=0.05)
    )
    assert spec.status == "near-tie"
    assert spec.requests[0].detail == (
        "baseline margin 0.01 nats < 0.05 nats (the spec's near_tie_margin) at token 6"
    )
    unknown = judge([rec("poem", 0, ids, text, engine="openai")]).requests[0]
    assert unknown.verdict == "diverged"
    assert unknown.detail.endswith(
        "near-tie margin 0 nats: openai has no calibrated margin, set determinism.near_tie_margin)"
    )


def test_prefix_counts_as_divergence_at_the_shorter_length() -> None:
    ids = POEM_IDS[:4]
    result = judge([rec("poem", 0, ids, POEM[:20])])
    assert result.status == "diverged"
    assert result.requests[0].divergence_index == 4


def test_garbled_output() -> None:
    ids = POEM_IDS[:3] + [0] * 7
    text = "The tide comes!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    result = judge([rec("poem", 0, ids, text), rec("poem", 1, ids, text)])
    assert result.status == "garbled"
    verdict = result.requests[0]
    assert verdict.divergence_index == 3
    assert verdict.garble is not None and verdict.garble > 0.5
    assert verdict.reference_garble == pytest.approx(garble_score(POEM))


def test_fragments_are_garbled_even_at_a_near_tie() -> None:
    ids = POEM_IDS[:6] + [7, 7, 7, 7]
    text = "The tide comes in, the.r ti.de go.es o,ut the.r gu.lls"
    assert judge([rec("poem", 0, ids, text)]).status == "garbled"


def test_nondeterministic_repeats_outrank_everything() -> None:
    other = POEM_IDS[:8] + [70, 71]
    records = [
        rec("poem", 0, POEM_IDS, POEM),
        rec("poem", 1, other, POEM[:50] + " sings"),
        rec("poem", 2, POEM_IDS, POEM),
    ]
    result = judge(records)
    assert result.status == "nondeterministic"
    # The repeats that gave the baseline's output are exact; the one that did not is the
    # violation, compared with repeat 0.
    assert [v.verdict for v in result.requests] == ["exact", "nondeterministic", "exact"]
    assert result.requests[1].divergence_index == 8
    assert [v.compared_with for v in result.requests] == ["baseline", "repeat 0", "baseline"]
    # Without a baseline (or where no repeat equals it) every repeat is nondeterministic.
    alone = judge_point(records, None, temperature=0.0)
    assert [v.verdict for v in alone.requests] == ["nondeterministic"] * 3
    assert all(v.divergence_index == 8 for v in alone.requests)
    assert [v.compared_with for v in alone.requests] == ["repeat 1", "repeat 0", "repeat 1"]


def test_point_status_is_the_worst_request_verdict() -> None:
    ids = POEM_IDS[:6] + [99, 98, 97, 96]
    b = baseline("poem", "code")
    records = [
        rec("poem", 0, POEM_IDS, POEM),
        rec("code", 0, ids, "The tide comes in, the tide rolls back"),
    ]
    result = judge_point(records, b, temperature=0.0, policy=SPEC_MARGIN)
    assert result.status == "near-tie"
    assert result.counts == {"exact": 1, "near-tie": 1}
    found = {(v.prompt_id, v.repeat): v.verdict for v in result.requests}
    assert found[("code", 0)] == "near-tie"


def test_worst_order() -> None:
    assert worst(["exact", "near-tie", "diverged", "garbled"]) == "garbled"
    assert worst(["exact", "nondeterministic", "garbled"]) == "garbled"
    assert worst(["diverged", "nondeterministic"]) == "nondeterministic"
    # A point is exact only when every request was proven exact.
    assert worst(["exact", "n/a"]) == "n/a"
    assert worst(["near-tie", "exact"]) == "near-tie"
    assert worst([]) == "n/a"


def test_baseline_itself_is_n_a_unless_its_repeats_disagree() -> None:
    b = baseline()
    assert judge_point(b, b, temperature=0.0, is_baseline=True).status == "n/a"
    broken = [rec("poem", 0, POEM_IDS, POEM), rec("poem", 1, POEM_IDS[:9] + [1], POEM)]
    assert judge_point(broken, None, temperature=0.0, is_baseline=True).status == "nondeterministic"


def test_nothing_to_compare_is_unproven() -> None:
    # No verdict without a proof: a speculative point compared with nothing is unproven (a
    # request of it is n/a), never the clean `n/a` a baseline point is.
    result = judge_point([rec("poem", 0, POEM_IDS, POEM)], None, temperature=0.0)
    assert result.status == "unproven"
    assert result.requests[0].verdict == "n/a"
    assert result.requests[0].detail == "no baseline output to compare"


def test_failed_requests_are_not_judged() -> None:
    records = [rec("poem", 0, [], "", error="timeout"), rec("poem", 1, POEM_IDS, POEM)]
    result = judge(records)
    assert [v.verdict for v in result.requests] == ["n/a", "exact"]
    # One request unproven: the point is not called exact (verdicts.py's order).
    assert result.status == "n/a"


def test_repeats_check_compares_only_the_repeats() -> None:
    sampled = [50, 51, 52]  # differs from the greedy baseline: that is fine when sampling
    same = [rec("poem", 0, sampled, "a"), rec("poem", 1, sampled, "a")]
    result = judge(same, temperature=0.7, seed=1234)
    assert result.status == "unproven"  # agreeing repeats prove determinism, nothing more
    assert result.requests[0].compared_with == ""
    differ = [rec("poem", 0, sampled, "abc"), rec("poem", 1, [50, 51, 9], "abd")]
    result = judge(differ, temperature=0.7, seed=1234)
    assert result.status == "nondeterministic"
    assert result.requests[1].divergence_index == 2
    assert result.requests[1].char_offset == 2


def test_unseeded_sampling_is_unproven() -> None:
    differ = [rec("poem", 0, [1, 2], "ab"), rec("poem", 1, [1, 3], "ac")]
    for check in ("repeats", "coupled"):
        result = judge(differ, temperature=0.7, seed=None, sampled_check=check)
        assert result.status == "unproven"
        assert result.requests[0].detail == "unseeded sampling: nothing to compare"


def sampled_baseline(margins: list[float]) -> list[dict[str, object]]:
    return [rec("poem", r, POEM_IDS, POEM, sample_margins=margins) for r in (0, 1)]


def test_coupled_sampling_is_compared_with_ar_at_the_same_seed() -> None:
    base = sampled_baseline([0.3] * 10)
    same = [rec("poem", 0, POEM_IDS, POEM), rec("poem", 1, POEM_IDS, POEM)]
    result = judge_point(same, base, temperature=0.7, seed=3, sampled_check="coupled")
    assert result.status == "exact"
    assert result.requests[0].compared_with == "baseline"
    assert "seed 3" in result.requests[0].detail
    # Repeats that agree with each other but not with AR: the repeats check cannot tell.
    wrong = [rec("poem", r, POEM_IDS[:4] + [99] * 6, POEM[:20] + "x") for r in (0, 1)]
    result = judge_point(wrong, base, temperature=0.7, seed=3, sampled_check="coupled")
    assert result.status == "diverged"
    assert result.requests[0].divergence_index == 4
    assert "sample margin 0.3" in result.requests[0].detail
    assert judge_point(wrong, base, temperature=0.7, seed=3).status == "unproven"  # repeats


def test_a_coupled_divergence_at_a_tiny_sample_margin_is_a_sampled_near_tie() -> None:
    margins = [0.3] * 10
    margins[4] = 0.0004  # the AR uniform lay 0.0004 from a CDF edge at token 4
    base = sampled_baseline(margins)
    wrong = [rec("poem", r, POEM_IDS[:4] + [99] * 6, POEM[:20] + "x") for r in (0, 1)]
    result = judge_point(wrong, base, temperature=0.7, seed=3, sampled_check="coupled")
    assert result.status == "near-tie"
    assert result.requests[0].margin == pytest.approx(0.0004)
    assert "sample margin 0.0004 < 0.001" in result.requests[0].detail
    policy = DeterminismSpec(sampled_near_tie_margin=0.0001)
    tight = judge_point(
        wrong, base, temperature=0.7, seed=3, sampled_check="coupled", policy=policy
    )
    assert tight.status == "diverged"
    # A coupled server's repeats must agree, as at temperature 0.
    split = [rec("poem", 0, POEM_IDS, POEM), rec("poem", 1, POEM_IDS[:9] + [1], POEM)]
    result = judge_point(split, base, temperature=0.7, seed=3, sampled_check="coupled")
    assert result.status == "nondeterministic"


def test_a_coupled_token_its_own_draw_did_not_select_diverged_whatever_ars_margin() -> None:
    """Relaxed acceptance emits a drafted token the seed's uniform lies far from (the output's
    own sample margin there is well below 0): not numerics, though AR's margin is tiny; a flip
    by numerics leaves the uniform at the new token's edge too (own margin near 0)."""
    margins = [0.3] * 10
    margins[4] = 0.0004  # AR's uniform 0.0004 from an edge: a near tie by AR's margin alone
    base = sampled_baseline(margins)
    ids = POEM_IDS[:4] + [99] * 6

    def spec(own_at_4: float) -> list[dict[str, object]]:
        own = [0.3] * 4 + [own_at_4] + [0.3] * 5
        return [rec("poem", r, ids, POEM[:20] + "x", sample_margins=own) for r in (0, 1)]

    result = judge_point(spec(-0.25), base, temperature=0.7, seed=3, sampled_check="coupled")
    assert result.status == "diverged"
    assert result.requests[0].divergence_index == 4
    assert "did not select (its uniform lies 0.25 outside" in result.requests[0].detail
    for edge in (0.0, -0.0004):  # at the new token's edge: numerics
        flipped = judge_point(spec(edge), base, temperature=0.7, seed=3, sampled_check="coupled")
        assert flipped.status == "near-tie", edge


def test_coupled_requests_at_their_own_seeds_pair_with_the_ar_twin_at_that_seed() -> None:
    """Each measured request draws its own seed: repeat r is compared with the AR's output at
    its seed (not the AR's first repeat), and repeats at other seeds differ without being
    nondeterministic; a request whose seed the AR never drew has nothing to compare."""
    other = POEM_IDS[:5] + [42] * 5
    base = [
        rec("poem", 0, POEM_IDS, POEM, seed=11, sample_margins=[0.3] * 10),
        rec("poem", 1, other, POEM, seed=12, sample_margins=[0.3] * 10),
    ]
    own = [rec("poem", 0, POEM_IDS, POEM, seed=11), rec("poem", 1, other, POEM, seed=12)]
    result = judge_point(own, base, temperature=0.7, seed=3, sampled_check="coupled")
    assert result.status == "exact"
    assert [(v.repeat, v.verdict) for v in result.requests] == [(0, "exact"), (1, "exact")]
    swapped = [rec("poem", 0, other, POEM, seed=11), rec("poem", 1, other, POEM, seed=12)]
    result = judge_point(swapped, base, temperature=0.7, seed=3, sampled_check="coupled")
    assert [(v.verdict, v.divergence_index) for v in result.requests] == [
        ("diverged", 5),
        ("exact", None),
    ]
    unmatched = [rec("poem", 0, POEM_IDS, POEM, seed=13)]
    result = judge_point(unmatched, base, temperature=0.7, seed=3, sampled_check="coupled")
    assert result.status == "unproven"


def test_distribution_checked_points_carry_their_tests_verdict() -> None:
    outputs = [rec("poem", 0, [1, 2], "ab"), rec("poem", 1, [1, 3], "ac")]
    for verdict in ("distribution-ok", "shifted", "unproven"):
        given = SampledVerdict(verdict, f"because {verdict}")
        result = judge_point(
            outputs, None, temperature=0.7, seed=1, sampled_check="distribution",
            sampled_verdict=given,
        )  # fmt: skip
        assert result.status == verdict  # repeats differ, and that proves nothing here
        assert {v.detail for v in result.requests} == {f"because {verdict}"}
    # No test made: unproven, never exact.
    result = judge_point(outputs, None, temperature=0.7, seed=1, sampled_check="distribution")
    assert result.status == "unproven"
    # A server that does not advertise the coupling the plan expected: its point verdict.
    why = SampledVerdict("unproven", "no coupling advertised")
    result = judge_point(
        outputs, baseline(), temperature=0.7, seed=1, sampled_check="coupled", sampled_verdict=why
    )
    assert result.status == "unproven"
    # Greedy points never take a sampled verdict.
    greedy = judge_point(baseline(), baseline(), temperature=0.0, sampled_verdict=why)
    assert greedy.status == "exact"


def test_records_from_a_dataframe() -> None:
    # As read back from parquet: NaN for a missing error, arrays for lists.
    frame = pd.DataFrame(
        [
            {"prompt_id": "poem", "repeat": 0, "token_ids": POEM_IDS, "text": POEM, "error": None},
            {
                "prompt_id": "poem",
                "repeat": 1,
                "token_ids": POEM_IDS,
                "text": POEM,
                "error": math.nan,
            },
        ]
    )
    base = pd.DataFrame(baseline())
    assert judge_point(frame, base, temperature=0.0).status == "exact"


def test_first_divergence() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    assert first_divergence([], []) is None


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("The sea is wide and deep, the tide comes in, the tide goes out.", 0.0, 0.05),
        ("def quicksort(items):\n    return sorted(items)\n", 0.0, 0.3),
        ("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12", 0.0, 0.05),
        ("apple\nbanana\ncherry\n1000000\n    indented", 0.0, 0.05),
        ("!!!!!!!!!!!!!!!!!!!!!!!!", 0.95, 1.0),
        ("The.r the.r ca,t sa.t on.the mat", 0.6, 1.0),
        ("#$%^&*@#$(*&^@#$&*^%@#$", 0.95, 1.0),
        ("", 0.0, 0.0),
    ],
)
def test_garble_score_separates_text_from_junk(text: str, low: float, high: float) -> None:
    assert low <= garble_score(text) <= high


def test_garble_components() -> None:
    parts = garble_components("Good words!!!!!!")
    assert parts.runs == pytest.approx(6 / 15)
    assert parts.fragments == 0
    assert parts.score == max(parts.runs, parts.fragments, parts.symbols)


def test_a_repeat_equal_to_the_baseline_is_exact_while_the_point_stays_nondeterministic() -> None:
    other = POEM_IDS[:8] + [70, 71]
    records = [rec("poem", 0, POEM_IDS, POEM), rec("poem", 1, other, POEM[:50] + " sings")]
    result = judge_point(records, baseline("poem"), temperature=0.0)
    assert result.status == "nondeterministic"
    assert [v.verdict for v in result.requests] == ["exact", "nondeterministic"]
    assert "repeat 1 disagrees at token 8" in result.requests[0].detail


def test_repeats_prove_determinism_never_losslessness() -> None:
    """The issue's wrong sampler (drafts sampled 1.6x hotter): repeated requests agree with each
    other, not with AR (first tokens 218, 114, 72 against AR's 224, 115, 32). Repeats prove the
    server deterministic at its seed, never that it samples the target's distribution: every
    request and the point are `unproven`, with why; disagreeing repeats stay a violation."""
    ar = {"a": [224, 9, 9], "b": [115, 9, 9], "c": [32, 9, 9]}
    hot = {"a": [218, 7, 7], "b": [114, 7, 7], "c": [72, 7, 7]}
    base = [rec(p, r, ids, "ar") for p, ids in ar.items() for r in (0, 1)]
    agree = [rec(p, r, ids, "hot") for p, ids in hot.items() for r in (0, 1)]
    result = judge_point(agree, base, temperature=0.7, seed=1234, sampled_check="repeats")
    assert result.status == "unproven"
    assert {v.verdict for v in result.requests} == {"unproven"}
    assert {v.detail for v in result.requests} == {
        "repeats identical at seed 1234 (deterministic); repeats prove determinism only, not "
        "that the outputs are the target's: not compared with the AR baseline"
    }
    split = [*agree[:5], rec("c", 1, [72, 7, 8], "hot")]
    result = judge_point(split, base, temperature=0.7, seed=1234, sampled_check="repeats")
    assert result.status == "nondeterministic"
    assert result.requests[-1].detail == "repeats disagree at token 2"
