"""A scoring restart's agreement (`ScoredProof.settle`): the scoring server must have rescored
enough of the AR server's own outputs for its agreement to say anything; over fewer tokens than
`MIN_AGREEMENT_TOKENS` (none: the AR scores' positions emptied, the run resumed) the settled
verdict is `unproven`, saying so. Pure: recorded rows in, settled lines out (nothing left to
score, so no server is asked)."""

from __future__ import annotations

from typing import Any

from sweeper.engines.registry import engine_for
from sweeper.plan import build_plan
from sweeper.proof.agreement import MIN_AGREEMENT_TOKENS
from sweeper.proof.scored import control
from sweeper.runner.sampled import Known
from sweeper.runner.scoring import ScoredProof, Serving
from sweeper.spec import parse_spec
from tests.sweeper.proof.scored_data import records, target

SPEC = parse_spec(
    "name: t\nruntime: {engine: sglang, preset: sglang-ddtree, model: m}\n"
    "grid: {budget: [16], topk: [4], temperature: [0.7]}\n"
    "workload: {prompts: [{id: q0, text: hi}], seed: 7, max_tokens: 24}\n"
)
SCORER = "ar-cg0-rs1"
LOGITS = target(4, 24, 64, seed=1)


def _settled(ar_positions: int | None) -> dict[str, Any]:
    """The speculative point's settled line, its samples (correctly drawn) scored by the AR
    server restarted, the AR point's own scores keeping `ar_positions` positions each (None:
    all), as rescored by the scorer."""
    plan = build_plan(SPEC)
    ar, spec_point = sorted(plan.points(), key=lambda p: p.server_config.mode)
    own = records(LOGITS, 32, role="control", point_id=ar.point_id, seed=1)
    trimmed = [{**r, "positions": r["positions"][:ar_positions]} for r in own]
    rescored = [{**r, "scorer": SCORER} for r in trimmed]
    tests = [{**r, "scorer": SCORER} for r in records(LOGITS, 32, point_id=spec_point.point_id)]
    done = {
        ar.point_id: {"point_id": ar.point_id, "attempt": "a", **control(own, SPEC.determinism)},
        spec_point.point_id: {"point_id": spec_point.point_id, "attempt": "a",
                              "scored_pending": True},
    }  # fmt: skip
    known = Known(
        done=done,
        baseline_rows={},
        points={p.point_id: p for p in plan.points()},
        scores={ar.point_id: [*trimmed, *rescored], spec_point.point_id: tests},
    )
    serving = Serving("http://127.0.0.1:9", None, engine_for(SPEC.runtime), SCORER, SCORER)
    scored, settled = ScoredProof(SPEC).settle([spec_point], serving, known)
    assert scored == [] and len(settled) == 1
    return settled[0].model_dump()


def test_an_agreement_over_no_tokens_proves_nothing() -> None:
    line = _settled(0)
    assert (line["score_agreement"], line["score_agreement_n"]) == (None, 0)
    assert line["determinism"] == "unproven", line["sampled_detail"]
    assert f"agreement over 0 tokens < {MIN_AGREEMENT_TOKENS}" in line["unproven_reason"]


def test_an_agreement_over_enough_tokens_settles_the_verdict() -> None:
    line = _settled(None)
    assert line["score_agreement"] == 0.0 and line["score_agreement_n"] >= MIN_AGREEMENT_TOKENS
    assert line["determinism"] == "distribution-ok", line["sampled_detail"]
