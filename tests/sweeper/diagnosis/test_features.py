"""A request feature is a factor like any config value: a run where only the points sent a
repetition penalty of 1.3 diverge is located to `repetition_penalty`, though the points that
sent none record None (not sent), not 1.0."""

from __future__ import annotations

from pathlib import Path

from sweeper.diagnosis.followup import plan_followup
from sweeper.diagnosis.runs import diagnose_requests, diagnose_run, run_requests
from sweeper.diagnosis.text import sentence
from sweeper.plan import build_plan
from sweeper.results.reader import read_run
from sweeper.results.records import Verdict
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
    followup = plan_followup(_spec([1]), diagnose_requests(requests, kinds), requests)
    assert followup.spec is not None
    plan = build_plan(followup.spec)
    assert {p.request_config.repetition_penalty for p in plan.points()} == {1.3}


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
        " Sent with every request, so this run cannot separate them: logit_bias, stop."
    )
