"""The scored proof end to end on the real runtime serving smollm2-135m (speculative, n-gram
drafts): a chat sample drawn under a repetition penalty and a logit bias, scored by the same
server's `POST /score` through the product's adapter into the records the runner writes, and read
by the product's judge (`sweeper.proof.scored.scored`): every position rebuilt from the raw top
logprobs, each position's log-sum-exp (the raw logit's sign the penalty scales by) and the
prompt's ids (chat template applied) that /score returns, and the runtime's claimed p and above
hold. The same record with the penalty dropped is judged against the claims: they do not hold."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from ddtree_runtime.server.local_server import LocalServer
from sweeper.engines.base import Capabilities, RequestSpec
from sweeper.engines.ddtree_runtime import DDTreeRuntime
from sweeper.measure.scores import Output, score_outputs
from sweeper.proof.scored.judge import scored
from sweeper.results.scores import SELF
from sweeper.spec import DeterminismSpec, RuntimeSpec
from tests.lanes import slow_fixture

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"
PROMPT = "Repeat this list exactly, one item per line: apple, banana, cherry, apple, banana."
#: A penalised, biased sample: the penalty scales tokens the prompt and prefix hold, the biases
#: lower two ids (a raised one the scorer did not return could not be rebuilt).
SPEC = RequestSpec(
    "list", PROMPT, 24, 0.8, seed=7, chat=True, repetition_penalty=1.3,
    logit_bias=((11, -3.0), (28, -2.0)),
)  # fmt: skip


@pytest.fixture(scope="module")
@slow_fixture
def server() -> Iterator[LocalServer]:
    flags = ["--model", MODEL, "--draft", "ngram", "--budget", "8", "--topk", "2"]
    with LocalServer([*flags, "--block-size", "4", "--max-model-len", "512"]) as running:
        yield running


def drawn(server: LocalServer) -> tuple[list[int], int]:
    """The runtime's own sample of `SPEC` (its chat route): the ids it emitted, and how many
    prompt tokens it charged."""
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": SPEC.max_tokens,
        "temperature": SPEC.temperature,
        "seed": SPEC.seed,
        "repetition_penalty": SPEC.repetition_penalty,
        "logit_bias": {str(t): b for t, b in SPEC.logit_bias or ()},
        "return_token_ids": True,
    }
    answer = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    said = answer.json()
    return list(said["choices"][0]["token_ids"]), int(said["usage"]["prompt_tokens"])


def test_a_penalised_biased_sample_is_rebuilt_at_every_position_and_its_claims_hold(
    server: LocalServer,
) -> None:
    tokens, prompt_tokens = drawn(server)
    engine = DDTreeRuntime(RuntimeSpec(model=MODEL), None).bind(
        Capabilities("openai", "x", "x", scoring="exact", scoring_k=64)
    )
    output = Output("r", "local", "pt", "a1", "sample", "test", "list", 0, SPEC, tuple(tokens))
    (record,) = score_outputs(server.url, engine, MODEL, [output], SELF, 1)
    assert record.error is None, record.error
    row: dict[str, Any] = record.model_dump()
    assert len(row["prompt_token_ids"] or ()) == prompt_tokens
    assert all(p["logsumexp"] is not None for p in row["positions"])
    policy = DeterminismSpec()
    found = scored([row], policy, ("test",))
    assert found.failed == [] and [f.text() for f in found.unrebuilt] == []
    assert found.mismatched == [] and found.impossible == []
    assert found.tokens == len(tokens)
    # The penalty divided returned tokens' positive raw logits (seen in the prompt or the
    # prefix): what the judge rebuilt from each position's log-sum-exp.
    assert any(
        lp + at["logsumexp"] > 0
        for i, at in enumerate(row["positions"])
        for t, lp in at["top"]
        if t in row["prompt_token_ids"] or t in tokens[:i]
    )
    unpenalised = scored([{**row, "repetition_penalty": None}], policy, ("test",))
    assert unpenalised.unrebuilt == [] and len(unpenalised.mismatched) > 0
    # Scored as if drawn at top-k 1, the tokens the runtime claims removed (its boundary on the
    # processed scale, their logprob raw) are judged by the rebuild's evidence: top-k's cut.
    greedy = replace(output, spec=replace(SPEC, top_k=1))
    (cut,) = score_outputs(server.url, engine, MODEL, [greedy], SELF, 1)
    removed = [i for i, p in enumerate(cut.positions) if p.p == 0]
    found = scored([cut.model_dump()], policy, ("test",))
    assert found.mismatched == [] and found.unrebuilt == [] and removed
    proofs = found.impossible + found.near_ties
    assert [f.position for f in proofs] == removed
    assert {f.evidence.step for f in proofs} == {"top_k"}  # type: ignore[union-attr]
