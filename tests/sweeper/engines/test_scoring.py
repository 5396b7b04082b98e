"""Scoring routes against crafted answers on loopback, for the edge cases real servers rarely
show (the routes themselves are tested against real vLLM, SGLang and the runtime): a vLLM whose
logprob limit is lower than asked is negotiated down to it, one that answers logits is refused,
an SGLang answer not aligned with the output is refused, a runtime without `/score` (an
older build) scores nothing; the runtime is sent every processor, the prefill scorers none, and
each returns the prompt's ids."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from sweeper.config import ServerConfig
from sweeper.engines.base import Capabilities, RequestSpec, ScoringError
from sweeper.engines.capabilities import scored_under
from sweeper.engines.ddtree_runtime import DDTreeRuntime
from sweeper.engines.sglang import SGLang
from sweeper.engines.vllm import VLLM
from sweeper.spec import RuntimeSpec

Answer = Callable[[str, dict[str, Any]], tuple[int, Any]]
AR = ServerConfig.make("ar", {"cuda_graph": False})
SPEC = RequestSpec("p", "hi", 4, 0.7, prompt_token_ids=(7, 8))


@contextmanager
def posting(answer: Answer) -> Iterator[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    """A loopback server answering each POST with `answer(path, body)`; the requests seen."""
    seen: list[tuple[str, dict[str, Any]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, body))
            status, reply = answer(self.path, body)
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()


def vllm_answer(limit: int, value: float = -0.5) -> Answer:
    def answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        k = body["prompt_logprobs"]
        if k > limit:
            message = (
                f"Requested prompt logprobs of {k}, which is greater than max allowed: {limit}"
            )
            return 400, {"error": {"message": message, "code": 400}}
        entry = {str(i): {"logprob": value - i, "rank": i + 1} for i in range(k)}
        return 200, {"choices": [{"prompt_logprobs": [None, *[entry] * (len(body["prompt"]) - 1)]}]}

    return answer


def test_a_vllm_with_a_lower_logprob_limit_is_asked_for_what_it_allows() -> None:
    engine = VLLM(RuntimeSpec(engine="vllm", model="m"))
    with posting(vllm_answer(limit=20)) as (url, seen), httpx.Client() as client:
        basis, k, order, said = engine.negotiate_scoring(client, url, AR, SPEC, "m", "0.32.0")
        assert (basis, k) == ("topk", 20) and "top 20" in said
        assert order == ("temperature", "min_p", "top_k", "top_p")
        caps = Capabilities("openai", "x", "x", scoring=basis, scoring_k=k, scoring_order=order)
        scored = engine.bind(caps).score(client, url, SPEC, [0, 3], "m")
    assert [body["prompt_logprobs"] for _, body in seen] == [64, 20, 20]
    assert seen[-1][1]["prompt"] == [7, 8, 0, 3] and seen[-1][1]["max_tokens"] == 1
    assert (scored.k, scored.order) == (20, order)
    assert [p["token"] for p in scored.positions] == [0, 3]
    assert len(scored.positions[1]["top"]) == 20 and scored.positions[1]["rank"] == 4


def test_a_vllm_that_answers_logits_is_refused() -> None:
    engine = VLLM(RuntimeSpec(engine="vllm", model="m")).bind(
        Capabilities("openai", "x", "x", scoring="topk", scoring_k=4)
    )
    with (
        posting(vllm_answer(limit=64, value=3.0)) as (url, _),
        httpx.Client() as client,
        pytest.raises(ScoringError, match="returns logits"),
    ):
        engine.score(client, url, SPEC, [0], "m")


def test_an_sglang_answer_not_aligned_with_the_output_is_refused() -> None:
    def answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        ids = body["input_ids"][body["logprob_start_len"] :]
        shifted = [[None, ids[0], None], *[[-0.1, t + 1, None] for t in ids[1:]]]
        tops = [None, *[[[-0.1, t, None]] for t in ids[1:]]]
        return 200, {"meta_info": {"input_token_logprobs": shifted, "input_top_logprobs": tops}}

    engine = SGLang(RuntimeSpec(engine="sglang", preset="sglang-dflash", model="m", draft="d"))
    engine = engine.bind(Capabilities("native", "x", "x", scoring="topk", scoring_k=4))
    with (
        posting(answer) as (url, seen),
        httpx.Client() as client,
        pytest.raises(ScoringError, match="not the output's positions"),
    ):
        engine.score(client, url, SPEC, [5, 6], None)
    assert seen[0][1]["logprob_start_len"] == 1  # the prompt's last token (SGLang's None there)


def test_a_runtime_without_the_score_route_scores_nothing() -> None:
    engine = DDTreeRuntime(RuntimeSpec(model="tiny-random"), None)

    def answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return 404, {"error": {"message": "Not Found", "code": "404"}}

    with posting(answer) as (url, _), httpx.Client() as client:
        basis, k, order, said = engine.negotiate_scoring(client, url, AR, SPEC, "m", None)
    assert (basis, k, order) == ("none", None, ()) and "HTTP 404" in said


@pytest.mark.parametrize("returns_top", [True, False])
def test_a_runtime_is_asked_for_its_top_logprobs_and_one_that_ignores_them_states_no_k(
    returns_top: bool,
) -> None:
    """The runtime's `/score` is asked for each position's top k (the temperature test's
    weights); a build older than `top_logprobs` ignores the field: exact, with no k."""
    engine = DDTreeRuntime(RuntimeSpec(model="tiny-random"), None)

    def answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        k = body["top_logprobs"] if returns_top else 0
        top = [[t, -1.0 - t] for t in range(k)]
        position = {"token": 0, "logprob": -1.0, "rank": 1, "p": 0.5, "above": 0.0, "top": top}
        return 200, {"order": ["temperature", "top_k", "top_p"], "positions": [position]}

    with posting(answer) as (url, seen), httpx.Client() as client:
        basis, k, order, said = engine.negotiate_scoring(client, url, AR, SPEC, "m", None)
    asked = seen[0][1]["top_logprobs"]
    assert asked >= 20 and seen[0][0] == "/score"
    assert (basis, order) == ("exact", ("temperature", "top_k", "top_p"))
    assert (k, said.endswith(f"top {asked}")) == ((asked, True) if returns_top else (None, False))


@pytest.mark.parametrize("top", [5, [[1]], [["a", -1.0]], {"1": -1.0}])
def test_a_runtime_answering_a_malformed_top_scores_nothing(top: Any) -> None:
    """A damaged `/score` answer is refused in one line, never counted as k top logprobs."""
    engine = DDTreeRuntime(RuntimeSpec(model="tiny-random"), None)

    def answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        position = {"token": 0, "logprob": -1.0, "rank": 1, "p": 0.5, "above": 0.0, "top": top}
        return 200, {"order": ["temperature"], "positions": [position]}

    with posting(answer) as (url, _), httpx.Client() as client:
        basis, k, order, said = engine.negotiate_scoring(client, url, AR, SPEC, "m", None)
    assert (basis, k, order) == ("none", None, ()) and "not a list of [id, logprob]" in said


#: A request with every rebuildable processor (issue 47's names).
PROCESSED = dataclasses.replace(
    SPEC,
    min_p=0.05,
    repetition_penalty=1.3,
    frequency_penalty=0.5,
    presence_penalty=0.25,
    logit_bias=((42, -5.0), (3, 1.5)),
)


def runtime_answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """The runtime's /tokenize and /score, one kept position per continuation token."""
    if path == "/tokenize":
        return 200, {"tokens": [5, 6, 7], "count": 3}
    positions = [
        {"token": t, "logprob": -1.0, "rank": 1, "p": 0.5, "above": 0.0, "top": [[t, -1.0]]}
        for t in body["continuation"]
    ]
    return 200, {"order": ["temperature", "min_p", "top_k", "top_p"], "positions": positions}


def test_the_runtime_scores_under_every_processor_and_its_prompt_ids_are_known() -> None:
    """/score takes the same processors as a request (logit bias keyed by id strings), and the
    prompt as ids: the ones the output was drawn after (a text prompt's from /tokenize, as the
    completion route encodes it), which the score carries for the judge's penalties."""
    engine = DDTreeRuntime(RuntimeSpec(model="tiny-random"), None)
    with posting(runtime_answer) as (url, seen), httpx.Client() as client:
        scored = engine.score(client, url, PROCESSED, [0, 3], "m")
        text = engine.score(client, url, dataclasses.replace(PROCESSED, prompt_token_ids=None),
                            [0], "m")  # fmt: skip
    body = seen[0][1]
    assert seen[0][0] == "/score" and body["prompt"] == [7, 8]
    assert {k: body[k] for k in ("min_p", "repetition_penalty", "frequency_penalty")} == {
        "min_p": 0.05,
        "repetition_penalty": 1.3,
        "frequency_penalty": 0.5,
    }
    assert body["presence_penalty"] == 0.25 and body["logit_bias"] == {"3": 1.5, "42": -5.0}
    assert scored.prompt_ids == (7, 8)
    assert [path for path, _ in seen[1:]] == ["/tokenize", "/score"]
    assert seen[2][1]["prompt"] == [5, 6, 7] and text.prompt_ids == (5, 6, 7)


def test_prefill_scorers_send_no_processors_and_return_the_prompt_ids() -> None:
    """vLLM's prompt logprobs are a prefill of prompt + output returning raw logprobs: the
    processors are rebuilt by the judge, never sent; the prompt's ids come back with the score.
    A score records the processors, the engine's logit order and scope from the catalog."""
    engine = VLLM(RuntimeSpec(engine="vllm", model="m")).bind(
        Capabilities("openai", "x", "x", scoring="topk", scoring_k=4)
    )
    with posting(vllm_answer(limit=64)) as (url, seen), httpx.Client() as client:
        scored = engine.score(client, url, PROCESSED, [0, 3], "m")
    assert scored.prompt_ids == (7, 8)
    assert not {"repetition_penalty", "logit_bias", "min_p"} & set(seen[0][1])
    assert scored_under("vllm", PROCESSED) == {
        "min_p": 0.05,
        "repetition_penalty": 1.3,
        "frequency_penalty": 0.5,
        "presence_penalty": 0.25,
        "logit_bias": '{"3":1.5,"42":-5.0}',
        "logit_order": ["logit_bias", "repetition_penalty", "frequency_penalty",
                        "presence_penalty"],
        "repetition_scope": "prompt+output",
    }  # fmt: skip
    sglang = scored_under("sglang", SPEC)
    assert sglang["repetition_scope"] == "output" and sglang["logit_order"][-1] == "logit_bias"
