"""A request feature is a factor like any config value: a run where only the points sent a
repetition penalty of 1.3 diverge is located to `repetition_penalty`, though the points that
sent none record None (not sent), not 1.0."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.diagnosis.evidence import evidence, located, verdict
from sweeper.diagnosis.followup import plan_followup, plan_lines
from sweeper.diagnosis.runs import diagnose_requests, diagnose_run, run_requests
from sweeper.diagnosis.text import sentence
from sweeper.plan import build_plan
from sweeper.results.reader import read_run
from sweeper.results.records import Verdict
from sweeper.spec import Spec
from tests.sweeper.diagnosis.test_followup import _spec
from tests.sweeper.feature_run import AR, CHAIN, TREE, Point, write_run

PROMPTS = ("p0", "p1", "p2", "p3")


def test_divergences_that_follow_one_feature_are_located_to_it(tmp_path: Path) -> None:
    broken: dict[str, Verdict] = dict.fromkeys(PROMPTS, "diverged")
    penalty = {"repetition_penalty": 1.3}
    harmless = {"frequency_penalty": 0.5}
    points = [
        Point(AR),
        Point(AR, features=penalty),
        Point(AR, features=harmless),
        *(Point(server) for server in (TREE, CHAIN)),
        *(Point(server, features=penalty, verdicts=broken) for server in (TREE, CHAIN)),
        *(Point(server, features=harmless) for server in (TREE, CHAIN)),
    ]
    diagnosis = diagnose_run(read_run(write_run(tmp_path, points, PROMPTS)))
    assert diagnosis is not None
    assert diagnosis.broken == 16 and diagnosis.explained == 16 and diagnosis.outside == 0
    assert diagnosis.rule[0].condition.key() == ("repetition_penalty", "=", "1.3")
    assert diagnosis.status_of("repetition_penalty") == "implicated"
    # Not sent is a level of its own, never an unknown.
    levels = next(f for f in diagnosis.findings if f.column == "frequency_penalty").overall
    assert [(c.value, c.broken, c.judged) for c in levels] == [("0.5", 0, 24), ("not sent", 16, 48)]
    assert "repetition_penalty = 1.3" in sentence(diagnosis)


def test_the_follow_up_asks_for_the_focus_s_features(tmp_path: Path) -> None:
    """The follow-up's arms send what the focus sent; a penalty too few violations left
    unlocated (8 of them: no rule at p < 0.001) is ablated besides, in a spec without it."""
    broken: dict[str, Verdict] = dict.fromkeys(PROMPTS, "diverged")
    penalty = {"repetition_penalty": 1.3}
    points = [
        Point(AR),
        Point(AR, features=penalty),
        Point(TREE),
        Point(TREE, features=penalty, verdicts=broken),
    ]
    run = read_run(write_run(tmp_path, points, PROMPTS))
    requests, kinds = run_requests([run])
    diagnosis = diagnose_requests(requests, kinds)
    assert diagnosis.status_of("repetition_penalty") == "inconclusive"
    followup = plan_followup(_spec([1]), diagnosis, requests)
    assert followup.experiments[-1].name == "without repetition_penalty"
    main, without = (build_plan(spec).points() for spec in followup.specs)
    assert {p.request_config.repetition_penalty for p in main} == {1.3}
    assert {(p.server_config.mode, p.request_config.repetition_penalty) for p in without} == {
        ("ar", None),
        ("speculative", None),
    }


def test_a_feature_every_request_sent_is_named_as_not_separable(tmp_path: Path) -> None:
    """A workload-level feature (logit bias, stop) is one level in the whole run: no rule can
    name it, so the sentence names it as the suspect no grid value separates, and a feature
    nobody sent is not named."""
    biased = {"logit_bias": {28: -100.0}, "stop": ["mill"]}
    broken: dict[str, Verdict] = {"p0": "diverged", "p1": "diverged"}
    points = [
        Point(AR, features=biased),
        Point(AR, temperature=0.7, features=biased),
        Point(TREE, features=biased, verdicts=broken),
        Point(TREE, temperature=0.7, features=biased, verdicts={"p2": "diverged"}),
    ]
    diagnosis = diagnose_run(read_run(write_run(tmp_path, points, PROMPTS)))
    assert diagnosis is not None and diagnosis.broken == 6
    assert sentence(diagnosis).endswith(
        " Sent with every request, so this run cannot separate them: logit_bias, stop "
        "(`sweeper diagnose` runs the failing prompts without each)."
    )


#: The T = 0 penalty sweep's shape: one penalty at a time (none, repetition, frequency,
#: presence), AR and DDTree, eight prompts, one repeat; the penalties not used either not sent or
#: sent at their neutral values (a grid `repetition_penalty: [1.0, 0.8]` sends 1.0).
EIGHT = tuple(f"p{i}" for i in range(8))
ACTING = {"repetition_penalty": 0.8, "frequency_penalty": -1.0, "presence_penalty": -1.5}
NEUTRAL = {"repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}


@pytest.mark.parametrize("unused", [{}, NEUTRAL], ids=["not sent", "neutral"])
def test_a_fault_in_the_penalty_stage_is_located_to_the_penalties(
    tmp_path: Path, unused: dict[str, float]
) -> None:
    """A fault in the one stage the three penalties share breaks wherever any of them acts:
    no single penalty's column holds the violations, the family `penalties` does, in one
    condition; each penalty then reads as what the data says (here: cleared, it breaks at
    every value)."""
    configs = [dict(unused), *({**unused, name: v} for name, v in ACTING.items())]
    broken = [
        tuple(EIGHT[i] for i in range(8) if i != skip and i != skip + 1) for skip in (0, 2, 4)
    ]
    points = [Point(AR, features=f) for f in configs]
    points.append(Point(TREE, features=configs[0]))
    for features, failing in zip(configs[1:], broken, strict=True):
        points.append(Point(TREE, features=features, verdicts=dict.fromkeys(failing, "diverged")))
    requests, kinds = run_requests([read_run(write_run(tmp_path, points, EIGHT, repeats=1))])
    diagnosis = diagnose_requests(requests, kinds)
    assert (diagnosis.broken, diagnosis.explained, diagnosis.outside) == (18, 18, 0)
    rule = {t.condition.key() for t in diagnosis.rule}
    assert rule == {("mode", "=", "speculative"), ("penalties", "=", "on")}
    assert diagnosis.status_of("penalties") == "implicated"
    levels = next(f for f in diagnosis.findings if f.column == "penalties")
    assert [(c.value, c.broken, c.judged) for c in levels.overall] == [
        ("off", 0, 16),
        ("on", 18, 48),
    ]
    acting = "repetition_penalty=0.8, frequency_penalty=-1 or presence_penalty=-1.5"
    assert levels.detail.startswith(f"on: {acting}; in the rule")
    for member in ("repetition_penalty", "frequency_penalty", "presence_penalty"):
        assert diagnosis.status_of(member) == "cleared"
    assert (
        f"they live where mode = speculative and penalties = on (penalties on: {acting}): "
        "18 there (with 6 clean requests)"
    ) in sentence(diagnosis)
    # The focus's penalty is cleared, its family is not: the follow-up still runs without it.
    followup = plan_followup(_spec([1]), diagnosis, requests)
    (ablated,) = [e.ablates for e in followup.experiments if e.ablates is not None]
    assert ablated in ACTING and followup.focus[ablated] == ACTING[ablated]


def test_one_penalty_alone_needs_no_family(tmp_path: Path) -> None:
    """Where a run sends one penalty only, the family passes exactly its requests: it is not a
    factor of its own (no confound with its only member)."""
    penalty = {"repetition_penalty": 1.3}
    broken: dict[str, Verdict] = dict.fromkeys(PROMPTS, "diverged")
    points = [Point(AR), Point(AR, features=penalty), Point(TREE), Point(CHAIN)]
    points += [Point(server, features=penalty, verdicts=broken) for server in (TREE, CHAIN)]
    diagnosis = diagnose_run(read_run(write_run(tmp_path, points, PROMPTS)))
    assert diagnosis is not None
    assert diagnosis.status_of("penalties") is None
    assert diagnosis.status_of("repetition_penalty") == "implicated"


BIASED = {"logit_bias": {28: -100.0}, "stop": ["mill"]}


def _biased_run(tmp: Path) -> Path:
    """A run whose every request sent a logit bias and stop strings; DDTree broke on two
    prompts at T = 0."""
    points = [
        Point(AR, features=BIASED),
        Point(TREE, features=BIASED, verdicts={"p0": "diverged", "p1": "diverged"}),
    ]
    return write_run(tmp, points, PROMPTS)


def _biased_spec() -> Spec:
    data = _spec([1]).model_dump(mode="json")
    data["workload"].update(logit_bias={"28": -100}, stop=["mill"])
    return Spec.model_validate(data)


def test_a_feature_every_request_sent_is_ablated_in_the_follow_up(tmp_path: Path) -> None:
    """A workload-level feature no grid value separates gets an ablation pair: the focus without
    it vs with it, on the failing prompts; the run without it is its own spec (the workload
    carries it), with the AR baseline re-run under the same request."""
    requests, kinds = run_requests([read_run(_biased_run(tmp_path))])
    followup = plan_followup(_biased_spec(), diagnose_requests(requests, kinds), requests)
    ablations = [e for e in followup.experiments if e.name.startswith("without ")]
    assert [e.name for e in ablations] == ["without logit_bias", "without stop"]
    without, full = ablations[0].arms
    assert without.removed == ("logit_bias",) and full.removed == ()
    assert without.params == full.params and without.concurrency == full.concurrency == 1
    assert without.label == full.label + " without logit_bias"
    lines = plan_lines(followup)
    assert (
        f"experiment without logit_bias: the failing prompts without logit_bias vs with it, "
        f"each judged against AR under the same request: {without.label} vs {full.label}"
    ) in lines
    specs = followup.specs
    assert [s.name for s in specs] == [
        "planted-followup",
        "planted-followup-no-logit_bias",
        "planted-followup-no-stop",
    ]
    assert specs[0].workload.logit_bias == {28: -100.0} and specs[0].workload.stop == ["mill"]
    assert specs[1].workload.logit_bias is None and specs[1].workload.stop == ["mill"]
    plan = build_plan(specs[1])
    assert {p.server_config.mode for p in plan.points()} == {"ar", "speculative"}
    assert {p.request_config.logit_bias for p in plan.points()} == {None}
    assert {p.request_config.stop for p in plan.points()} == {("mill",)}
    assert [p.id for p in specs[1].workload.prompts] == ["p0", "p1"]


def test_exact_without_the_feature_and_broken_with_it_locates_it(tmp_path: Path) -> None:
    """The follow-up's requests, written as a run: the arm without the logit bias is exact on
    the failing prompts, the full arm diverges, the arm without the stop strings diverges
    too: the evidence and the verdict locate the logit bias."""
    run = read_run(_biased_run(tmp_path / "run"))
    requests, kinds = run_requests([run])
    followup = plan_followup(_biased_spec(), diagnose_requests(requests, kinds), requests)
    failing: dict[str, Verdict] = {"p0": "diverged", "p1": "diverged"}
    stop_only = {"stop": BIASED["stop"]}
    bias_only = {"logit_bias": BIASED["logit_bias"]}
    measured = [
        Point(AR, features=BIASED),
        Point(AR, features=stop_only),
        Point(AR, features=bias_only),
        Point(TREE, features=BIASED, verdicts=failing),
        Point(TREE, features=stop_only),
        Point(TREE, features=bias_only, verdicts=failing),
    ]
    follow = read_run(write_run(tmp_path / "follow", measured, ("p0", "p1"), repeats=4))
    followed, _ = run_requests([follow])
    table = evidence(followup.experiments, followed)
    shown = {r["experiment"]: r["shows"] for r in table}
    assert shown["without logit_bias"] == (
        "located: logit_bias (exact without it, broken with it: 0/8 vs 8/8)"
    )
    assert shown["without stop"] == "both arms break: without stop cleared"
    assert located(followup.experiments, followed) == ("logit_bias",)
    combined = diagnose_run(run, follow)
    assert combined is not None
    assert verdict(combined, followup.experiments, followed).endswith(
        " Located by ablation: logit_bias (exactness restored without it, on the same prompts)."
    )
