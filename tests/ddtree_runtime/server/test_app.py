"""The OpenAI-compatible server, against one real `tiny-random` server process on loopback."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ddtree_runtime.server.local_server import LocalServer
from tests.ddtree_runtime.server.rawhttp import raw_post

MODEL = "tiny-random"
MAX_MODEL_LEN = 256

pytestmark = pytest.mark.slow

EXPOSURE_TOTALS = (
    "verify_rounds",
    "padded_rounds",
    "padding_rows",
    "fixed_shape_rounds",
    "cuda_graph_rounds",
    "batched_rounds",
)
EXPOSURE = (
    *EXPOSURE_TOTALS,
    "max_tree_depth",
    "max_tree_width",
    "max_tree_nodes",
    "max_verify_width",
    "accepted_hist",
)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    flags = ["--model", MODEL, "--max-model-len", str(MAX_MODEL_LEN), "--launch-id", "test-1"]
    with LocalServer(flags) as running:
        yield running


def post(server: LocalServer, path: str, body: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    return httpx.post(f"{server.url}{path}", content=content, headers=headers, timeout=60)


def completion(server: LocalServer, **fields: Any) -> dict[str, Any]:
    body = {"model": MODEL, "prompt": "The quick brown fox", "max_tokens": 12, "temperature": 0}
    response = post(server, "/v1/completions", {**body, **fields})
    assert response.status_code == 200, response.text
    return dict(response.json())


def stream_events(server: LocalServer, path: str, body: dict[str, Any]) -> list[Any]:
    """Every SSE data payload, parsed; the literal '[DONE]' stays a string."""
    events: list[Any] = []
    with httpx.stream("POST", f"{server.url}{path}", json=body, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                data = line.removeprefix("data: ")
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_health_models_and_server_info(server: LocalServer) -> None:
    assert httpx.get(f"{server.url}/health").json() == {"status": "ok"}
    models = httpx.get(f"{server.url}/v1/models").json()
    assert models["data"][0]["id"] == MODEL
    assert models["data"][0]["max_model_len"] == MAX_MODEL_LEN
    info = httpx.get(f"{server.url}/server_info").json()
    canonical = json.dumps(info["fingerprint_inputs"], sort_keys=True, separators=(",", ":"))
    assert info["fingerprint"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert info["launch_id"] == "test-1"
    assert info["pid"] == server.process.pid
    assert info["config"]["max_model_len"] == MAX_MODEL_LEN
    assert info["config"]["port"] == server.port
    assert info["fingerprint_inputs"]["source_hash"] == info["source_hash"]
    assert info["model"]["weights_hash"] == info["fingerprint_inputs"]["weights_hash"]
    assert info["engine"]["cuda_graph_applied"] is False
    assert info["engine"]["fixed_verify_shape"] is None  # trimmed per round without --cuda-graph
    assert {"requests", "verify_rounds", "emitted_tokens", "tau", "in_flight"} <= set(info["stats"])
    assert set(EXPOSURE_TOTALS) | {"accepted_hist"} <= set(info["stats"])


def test_completion_carries_usage_stats_token_ids_and_logprobs(server: LocalServer) -> None:
    body = completion(server, logprobs=3, return_token_ids=True)
    choice = body["choices"][0]
    ids = choice["token_ids"]
    assert body["object"] == "text_completion"
    assert choice["finish_reason"] in {"length", "stop"}
    assert body["usage"]["completion_tokens"] == len(ids) > 0
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + len(ids)
    stats = body["ddtree"]
    assert stats["emitted_tokens"] == len(ids)
    assert stats["tau"] == pytest.approx(stats["emitted_tokens"] / stats["verify_rounds"])
    assert set(EXPOSURE) <= set(stats)
    assert len(stats["accepted_hist"]) == 8  # block_size 8: 0..7 accepted drafted tokens
    assert sum(stats["accepted_hist"]) == stats["verify_rounds"]
    assert stats["fixed_shape_rounds"] == stats["cuda_graph_rounds"] == 0
    assert stats["max_verify_width"] <= 1 + 16
    logprobs = choice["logprobs"]
    assert len(logprobs["tokens"]) == len(logprobs["token_logprobs"]) == len(ids)
    assert all(lp <= 0 for lp in logprobs["token_logprobs"])
    assert all(len(top) == 3 for top in logprobs["top_logprobs"])
    assert logprobs["text_offset"][0] == 0
    # Temperature 0 picks the most likely token: nothing in the top list beats it.
    for chosen, top in zip(logprobs["token_logprobs"], logprobs["top_logprobs"], strict=True):
        assert max(top.values()) <= chosen + 1e-4


def test_streamed_completion_equals_non_streamed(server: LocalServer) -> None:
    whole = completion(server, return_token_ids=True)
    body = {
        "model": MODEL,
        "prompt": "The quick brown fox",
        "max_tokens": 12,
        "temperature": 0,
        "stream": True,
        "return_token_ids": True,
        "stream_options": {"include_usage": True},
    }
    events = stream_events(server, "/v1/completions", body)
    assert events[-1] == "[DONE]"
    usage_chunk, chunks = events[-2], events[:-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == whole["usage"]
    assert usage_chunk["ddtree"]["emitted_tokens"] == len(whole["choices"][0]["token_ids"])
    streamed_ids = [t for c in chunks for t in c["choices"][0]["token_ids"]]
    assert streamed_ids == whole["choices"][0]["token_ids"]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_chat_completion_and_stream_with_logprobs(server: LocalServer) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say something."}],
        "max_tokens": 8,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 2,
        "return_token_ids": True,
    }
    response = post(server, "/v1/chat/completions", body)
    assert response.status_code == 200, response.text
    whole = response.json()
    choice = whole["choices"][0]
    assert whole["object"] == "chat.completion"
    assert choice["message"]["role"] == "assistant"
    content = choice["logprobs"]["content"]
    assert len(content) == len(choice["token_ids"]) == whole["usage"]["completion_tokens"]
    for item in content:
        assert set(item) == {"token", "logprob", "bytes", "top_logprobs"}
        assert item["bytes"] == list(item["token"].encode())
        assert len(item["top_logprobs"]) == 2
    events = stream_events(server, "/v1/chat/completions", {**body, "stream": True})
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == choice["message"]["content"]
    ids = [t for c in chunks[1:] for t in c["choices"][0]["token_ids"]]
    assert ids == choice["token_ids"]
    streamed = [e for c in chunks[1:] for e in c["choices"][0]["logprobs"]["content"]]
    assert [e["logprob"] for e in streamed] == pytest.approx([e["logprob"] for e in content])


def test_sampled_logprobs_carry_sample_margins_and_server_info_says_coupled(
    server: LocalServer,
) -> None:
    sampling = httpx.get(f"{server.url}/server_info").json()["sampling"]
    assert sampling["coupled"] is True
    assert set(sampling) == {"coupled", "uniform", "inverse_cdf", "sample_margins"}
    sampled = {"temperature": 0.9, "seed": 7, "max_tokens": 8}
    legacy = completion(server, **sampled, logprobs=1)["choices"][0]["logprobs"]
    assert len(legacy["sample_margins"]) == len(legacy["tokens"]) > 0
    # Each token its own draw: >= 0 up to the sampler's float rounding at an edge.
    assert all(-1e-6 <= m <= 1.0 for m in legacy["sample_margins"])
    assert "sample_margins" not in completion(server, logprobs=1)["choices"][0]["logprobs"]
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say something."}],
        **sampled,
        "logprobs": True,
        "top_logprobs": 1,
    }
    response = post(server, "/v1/chat/completions", body)
    assert response.status_code == 200, response.text
    content = response.json()["choices"][0]["logprobs"]["content"]
    assert content and all(-1e-6 <= item["sample_margin"] <= 1.0 for item in content)
    assert all("sample_margin" not in top for item in content for top in item["top_logprobs"])
    greedy = post(server, "/v1/chat/completions", {**body, "temperature": 0})
    assert all(
        "sample_margin" not in item for item in greedy.json()["choices"][0]["logprobs"]["content"]
    )


def test_score_rates_a_sampled_completion_with_the_samplers_own_distribution(
    server: LocalServer,
) -> None:
    """A sampled completion (this server is speculative: drafted and verified) scored by the
    route's plain prefill: every token inside the processed distribution, its raw logprob the
    one the completion reported, advertised in /server_info. A token the sampler could not
    draw (outside top-k 1) scores p 0 with how far outside it fell."""
    params = {"temperature": 0.8, "top_p": 0.9, "top_k": 20, "min_p": 0.05}
    drawn = completion(server, seed=11, logprobs=1, return_token_ids=True, **params)
    choice = drawn["choices"][0]
    tokens = choice["token_ids"]
    prompt = {"prompt": "The quick brown fox"}
    response = post(server, "/score", score(continuation=tokens, **prompt, **params))
    assert response.status_code == 200, response.text
    body = response.json()
    info = httpx.get(f"{server.url}/server_info").json()["scoring"]
    stated = ("route", "basis", "logit_order", "repetition_scope", "order")
    assert info == {key: body[key] for key in stated}
    assert body["order"] == ["temperature", "min_p", "top_k", "top_p"]
    assert body["logit_order"][0] == "logit_bias" and body["repetition_scope"] == "prompt+output"
    # The ids scored before the continuation: the completion route's own encoding of the text.
    encoded = post(server, "/tokenize", {"model": MODEL, "prompt": prompt["prompt"]}).json()
    assert body["prompt_token_ids"] == encoded["tokens"] and body["prompt_tokens"] == len(
        encoded["tokens"]
    )
    assert body["basis"] == "exact"
    positions = body["positions"]
    assert [p["token"] for p in positions] == tokens
    assert all(p["p"] > 0 and p["gap"] is None and p["boundary"] is None for p in positions)
    assert all(p["above"] + p["p"] <= 1 + 1e-9 for p in positions)
    reported = choice["logprobs"]["token_logprobs"]
    assert [p["logprob"] for p in positions] == pytest.approx(reported, abs=1e-4)
    assert all(p["rank"] >= 1 for p in positions)
    assert all(p["top"] == [] for p in positions)  # none asked
    ranked = post(server, "/score", score(continuation=tokens, top_logprobs=4, **prompt, **params))
    for position in ranked.json()["positions"]:
        top = position["top"]
        # A raw logit is its logprob plus the position's log-sum-exp: their exp sums to 1.
        assert sum(math.exp(lp) for _, lp in top) <= 1 + 1e-9 and math.isfinite(
            position["logsumexp"]
        )
        logprobs = [lp for _, lp in top]
        assert len(top) == 4 and logprobs == sorted(logprobs, reverse=True)
        if position["rank"] <= 4:  # the drawn token among them, at its rank
            assert top[position["rank"] - 1] == [position["token"], position["logprob"]]
    chat_form = score(continuation=tokens[:3], messages=[{"role": "user", "content": "hi"}])
    assert post(server, "/score", {**chat_form, "prompt": None}).status_code == 200
    greedy = post(server, "/score", score(continuation=[0, 1, 2], top_k=1)).json()["positions"]
    outside = [p for p in greedy if p["rank"] > 1]
    assert outside and all(p["p"] == 0 and p["gap"] > 0 and p["above"] == 1 for p in outside)
    # The boundary crossed: top-k 1 keeps the top token, whose raw logprob is above theirs.
    assert all(p["boundary"] > p["logprob"] for p in outside)
    # Min-p's boundary is its threshold: the top raw logprob + T ln(min_p), T 0.7 here.
    cut = score(continuation=[0, 1, 2], min_p=0.5, top_logprobs=1)
    for p in post(server, "/score", cut).json()["positions"]:
        threshold = p["top"][0][1] + 0.7 * math.log(0.5)
        assert (p["p"] == 0) == (p["logprob"] < threshold)
        assert p["boundary"] == (pytest.approx(threshold) if p["p"] == 0 else None)


def test_a_grammar_holds_the_answer_and_its_score(server: LocalServer) -> None:
    """A regex and a JSON schema hold the tiny model's bytes to them, EOS ending the answer
    where the grammar ends; /score gives p 0 to a token the grammar forbids there."""
    digits = completion(server, regex="[0-9]{2}", max_tokens=8)["choices"][0]
    assert re.fullmatch("[0-9]{2}", digits["text"]) and digits["finish_reason"] == "stop"
    schema = {"type": "string", "enum": ["yes", "no"]}
    answer = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    response = post(server, CHAT, chat(max_tokens=8, temperature=0, response_format=answer))
    assert response.status_code == 200, response.text
    assert json.loads(response.json()["choices"][0]["message"]["content"]) in ("yes", "no")
    ids = post(server, "/tokenize", {"prompt": "7x"}).json()["tokens"]
    positions = post(server, S, score(continuation=ids, regex="[0-9]{2}")).json()["positions"]
    assert positions[0]["p"] > 0 and positions[1]["p"] == 0
    assert positions[1]["gap"] is None and positions[1]["boundary"] is None  # never a near tie
    free = post(server, S, score(continuation=ids)).json()["positions"]
    assert free[1]["p"] > 0 and free[1]["logprob"] == positions[1]["logprob"]  # raw: unmasked


def test_n_choices_are_independent_draws_each_with_its_index(server: LocalServer) -> None:
    """n > 1: one draw per choice, each at its own seed (choice 0 at the request's), streamed
    and not alike, usage summed; at temperature 0 every choice is the greedy output."""
    fields = {"prompt": "Once upon a time", "max_tokens": 12, "return_token_ids": True}
    sampled = completion(server, n=3, temperature=0.9, seed=5, **fields)
    choices = sampled["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2]
    ids = [c["token_ids"] for c in choices]
    assert len({tuple(i) for i in ids}) == 3  # independent: three different draws
    alone = completion(server, temperature=0.9, seed=5, **fields)["choices"][0]["token_ids"]
    assert ids[0] == alone
    assert sampled["usage"]["completion_tokens"] == sum(len(i) for i in ids)
    assert sampled["ddtree"]["emitted_tokens"] == sum(len(i) for i in ids)
    greedy = completion(server, n=3, **fields)["choices"]
    assert [c["token_ids"] for c in greedy] == [greedy[0]["token_ids"]] * 3
    body = {"model": MODEL, "n": 3, "temperature": 0.9, "seed": 5, "stream": True, **fields}
    events = stream_events(server, C, {**body, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    streamed: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for chunk in events[:-2]:
        (choice,) = chunk["choices"]
        streamed[choice["index"]] += choice["token_ids"]
    assert [streamed[i] for i in range(3)] == ids
    assert events[-2]["usage"] == sampled["usage"]
    chat_body = {**chat(n=2, temperature=0.9, seed=5, max_tokens=6), "stream": True}
    roles = [c["choices"][0] for c in stream_events(server, CHAT, chat_body)[:-1]]
    assert [r["index"] for r in roles[:2]] == [0, 1]
    assert all(r["delta"].get("role") == "assistant" for r in roles[:2])


def test_processors_are_applied_and_scored_alike(server: LocalServer) -> None:
    """Logit bias and penalties reach the sampler: banned tokens never appear, and /score, asked
    the same processors, gives every drawn token p > 0 and other probabilities than without."""
    fields = {"max_tokens": 16, "return_token_ids": True}
    greedy = completion(server, **fields)["choices"][0]["token_ids"]
    ban = {str(t): -100 for t in set(greedy)}
    processors = {"logit_bias": ban, "repetition_penalty": 1.3, "frequency_penalty": 0.5}
    banned = completion(server, **fields, **processors)["choices"][0]["token_ids"]
    assert banned and not set(banned) & set(greedy)
    asked = {"temperature": 0.8, "presence_penalty": 0.7, **processors}
    drawn = completion(server, seed=3, **fields, **asked)["choices"][0]["token_ids"]
    prompt = {"prompt": "The quick brown fox", "continuation": drawn}
    scored = post(server, S, score(**prompt, **asked)).json()["positions"]
    assert all(p["p"] > 0 for p in scored)
    plain = post(server, S, score(**prompt, temperature=0.8)).json()["positions"]
    assert [p["p"] for p in plain] != [p["p"] for p in scored]
    assert [p["logprob"] for p in plain] == [p["logprob"] for p in scored]  # raw either way


def test_stop_string_ends_the_completion_before_it(server: LocalServer) -> None:
    text = completion(server, max_tokens=24)["choices"][0]["text"]
    # A stop string that first occurs inside the output (not at its very start).
    start = next((i for i in range(1, len(text) - 1) if text.find(text[i : i + 2]) == i), None)
    if start is None:
        pytest.skip(f"no usable stop string in {text!r}")
    stop = text[start : start + 2]
    stopped = completion(server, max_tokens=24, stop=[stop, "never-appears"])["choices"][0]
    assert stopped["finish_reason"] == "stop"
    assert stopped["text"] == text[:start]


def test_tokenize_counts_what_the_completion_is_charged(server: LocalServer) -> None:
    tokenized = post(server, "/tokenize", {"model": MODEL, "prompt": "The quick brown fox"})
    assert tokenized.status_code == 200, tokenized.text
    body = tokenized.json()
    assert body["count"] == len(body["tokens"]) > 0 and body["max_model_len"] == MAX_MODEL_LEN
    usage = completion(server, prompt=body["tokens"])["usage"]
    assert usage["prompt_tokens"] == body["count"]
    wrong = post(server, "/tokenize", {"model": "other", "prompt": "x"})
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "model"


def test_min_tokens_and_ignore_eos_hold_the_output_length(server: LocalServer) -> None:
    stopped = completion(server, max_tokens=24, stop=["e", "a", "o", " "])["choices"][0]
    assert stopped["finish_reason"] == "stop"  # tiny-random's text soon holds one of them
    fields = {"max_tokens": 24, "stop": ["e", "a", "o", " "], "return_token_ids": True}
    held = completion(server, **fields, min_tokens=24, ignore_eos=True)["choices"][0]
    assert held["finish_reason"] == "length" and len(held["token_ids"]) == 24
    too_many = post(server, "/v1/completions", comp(max_tokens=4, min_tokens=5))
    assert too_many.status_code == 400 and "min_tokens" in too_many.json()["error"]["message"]


def test_seeded_sampling_is_reproducible(server: LocalServer) -> None:
    fields = {"temperature": 1.0, "seed": 1234, "max_tokens": 16, "return_token_ids": True}
    first = completion(server, **fields)["choices"][0]["token_ids"]
    assert completion(server, **fields)["choices"][0]["token_ids"] == first


async def test_simultaneous_requests_equal_one_at_a_time(server: LocalServer) -> None:
    prompts = ["Once upon a time", "1 2 3 4", "def main():", "Hello, my name is", "Zebra"]
    alone = [completion(server, prompt=p, return_token_ids=True) for p in prompts]
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        responses = await asyncio.gather(
            *[
                client.post(
                    "/v1/completions",
                    json={
                        "model": MODEL,
                        "prompt": p,
                        "max_tokens": 12,
                        "temperature": 0,
                        "return_token_ids": True,
                    },
                )
                for p in prompts
            ]
        )
    together = [r.json()["choices"][0]["token_ids"] for r in responses]
    assert together == [a["choices"][0]["token_ids"] for a in alone]


async def test_simultaneous_requests_are_verified_together(server: LocalServer) -> None:
    before = httpx.get(f"{server.url}/server_info").json()["stats"]
    body = {"model": MODEL, "prompt": "zzz", "max_tokens": 24, "temperature": 0}
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        responses = await asyncio.gather(
            *[client.post("/v1/completions", json=body) for _ in range(4)]
        )
    ddtree = [r.json()["ddtree"] for r in responses]
    rounds = sum(d["verify_rounds"] for d in ddtree)
    after = httpx.get(f"{server.url}/server_info").json()["stats"]
    steps = after["engine_steps"] - before["engine_steps"]
    # One at a time would take `rounds` steps; batched, the four share most of them.
    assert steps < rounds * 0.75, (steps, rounds)
    assert all(d["batched_rounds"] > 0 for d in ddtree)
    # /server_info's totals are the sums of the requests' own figures.
    for name in EXPOSURE_TOTALS:
        assert after[name] - before[name] == sum(d[name] for d in ddtree), name
    hist = [a - b for a, b in zip(after["accepted_hist"], before["accepted_hist"], strict=True)]
    assert hist == [sum(col) for col in zip(*(d["accepted_hist"] for d in ddtree), strict=True)]


C = "/v1/completions"
CHAT = "/v1/chat/completions"


def comp(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "prompt": "hi", **fields}


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **fields}


S = "/score"


def score(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "prompt": "hi", "continuation": [5, 6], "temperature": 0.7, **fields}


BAD_SCHEMA = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "frob"}}}

# (name, path, body, the param the error names or None)
BAD_REQUESTS: list[tuple[str, str, Any, str | None]] = [
    ("malformed json", C, b'{"model": "tiny-random", "prompt": ', None),
    ("not an object", C, b"[1, 2, 3]", None),
    ("missing prompt", C, {"model": MODEL}, "prompt"),
    ("missing model", C, {"prompt": "hi"}, "model"),
    ("max_tokens as string", C, comp(max_tokens="5"), "max_tokens"),
    ("stream as string", C, comp(stream="yes"), "stream"),
    ("max_tokens too large", C, comp(max_tokens=100000), "max_tokens"),
    ("context too long", C, comp(prompt="a" * 300, max_tokens=4), "max_tokens"),
    ("prompt + max_tokens too long", C, comp(prompt="a" * 200, max_tokens=100), "max_tokens"),
    ("unknown model", C, comp(model="gpt-4"), "model"),
    ("n 0", C, comp(n=0), "n"),
    ("n too many", C, comp(n=10**6), "n"),
    ("repetition_penalty 0", C, comp(repetition_penalty=0), "repetition_penalty"),
    ("frequency_penalty > 2", C, comp(frequency_penalty=2.5), "frequency_penalty"),
    ("chat presence_penalty < -2", CHAT, chat(presence_penalty=-2.5), "presence_penalty"),
    ("logit_bias > 100", C, comp(logit_bias={"5": 101}), "logit_bias"),
    ("logit_bias key not an id", C, comp(logit_bias={"a": 1}), "logit_bias"),
    ("logit_bias key -1", C, comp(logit_bias={"-1": 1}), "logit_bias"),
    ("logit_bias id past the vocab", C, comp(logit_bias={"257": 1}), None),
    ("chat logit_bias id past the vocab", CHAT, chat(logit_bias={"300": 1}), None),
    ("score repetition_penalty -1", S, score(repetition_penalty=-1), "repetition_penalty"),
    ("score logit_bias id past the vocab", S, score(logit_bias={"257": 1}), "logit_bias"),
    ("logprobs > 5", C, comp(logprobs=6), "logprobs"),
    ("negative temperature", C, comp(temperature=-0.5), "temperature"),
    ("top_p 0", C, comp(top_p=0), "top_p"),
    ("top_p > 1", C, comp(top_p=1.5), "top_p"),
    ("empty prompt", C, comp(prompt=""), "prompt"),
    ("token id out of range", C, comp(prompt=[1, 10**9]), "prompt"),
    ("empty stop string", C, comp(stop=[""]), "stop"),
    ("chat top_logprobs > 5", CHAT, chat(logprobs=True, top_logprobs=6), "top_logprobs"),
    ("chat no messages", CHAT, chat(messages=[]), "messages"),
    ("chat bad role", CHAT, chat(messages=[{"role": "robot", "content": "hi"}]), None),
    ("chat content not text", CHAT, chat(messages=[{"role": "user", "content": 5}]), None),
    ("chat unknown model", CHAT, chat(model="other"), "model"),
    ("chat max_tokens too large", CHAT, chat(max_tokens=100000), "max_tokens"),
    ("score greedy", S, score(temperature=0), "temperature"),
    ("score min_p > 1", S, score(min_p=1.5), "min_p"),
    ("score min_p NaN", S, score(min_p=math.nan), "min_p"),
    ("min_p negative", C, comp(min_p=-0.1), "min_p"),
    ("chat min_p > 1", CHAT, chat(min_p=1.01), "min_p"),
    ("min_p Infinity", C, comp(min_p=math.inf), "min_p"),
    ("score no continuation", S, score(continuation=[]), "continuation"),
    ("score id out of range", S, score(continuation=[1, 10**9]), "continuation"),
    ("score too long", S, score(continuation=[5] * 300), "continuation"),
    ("score prompt and messages", S, score(messages=[{"role": "user", "content": "hi"}]), "prompt"),
    ("score unknown model", S, score(model="other"), "model"),
    ("score too many top logprobs", S, score(top_logprobs=10**6), "top_logprobs"),
    # Python's JSON parsers take these literals (json.dumps writes inf as Infinity, nan as NaN)
    # and read 1e999 as inf; a sampler must never see them.
    ("score temperature Infinity", S, score(temperature=math.inf), "temperature"),
    (
        "score temperature 1e999",
        S,
        json.dumps(score()).replace("0.7", "1e999").encode(),
        "temperature",
    ),
    ("temperature Infinity", C, comp(temperature=math.inf), "temperature"),
    ("chat temperature NaN", CHAT, chat(temperature=math.nan), "temperature"),
    ("bad json schema", C, comp(response_format=BAD_SCHEMA), None),
    ("unknown response_format", CHAT, chat(response_format={"type": "xml"}), None),
    ("bad regex", C, comp(regex="(abc"), None),
    (
        "regex and response_format",
        C,
        comp(regex="a", response_format={"type": "json_object"}),
        None,
    ),
    ("score bad regex", S, score(regex="(abc"), None),
]


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_bad_request_is_an_openai_400(
    server: LocalServer, path: str, body: Any, param: str | None
) -> None:
    response = post(server, path, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"]
    if param is not None:
        assert error["param"] == param


def test_server_keeps_serving_after_bad_requests(server: LocalServer) -> None:
    for _, path, body, _ in BAD_REQUESTS:
        assert post(server, path, body).status_code == 400
    assert httpx.get(f"{server.url}/health").status_code == 200
    assert completion(server)["choices"][0]["finish_reason"] in {"length", "stop"}


def test_unknown_route_is_an_openai_404(server: LocalServer) -> None:
    response = httpx.get(f"{server.url}/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "invalid_request_error"


def limits(server: LocalServer) -> dict[str, int]:
    return dict(httpx.get(f"{server.url}/server_info").json()["limits"])


@pytest.mark.quiet  # it times /health
def test_health_answers_while_an_8_mb_prompt_is_refused(server: LocalServer) -> None:
    body = json.dumps(score(prompt="a" * 8_000_000)).encode()
    latencies: list[float] = []
    done = threading.Event()

    def poll_health() -> None:
        while not done.is_set() or len(latencies) < 5:
            started = time.monotonic()
            ok = httpx.get(f"{server.url}/health", timeout=60).status_code == 200
            latencies.append(time.monotonic() - started if ok else float("inf"))
            time.sleep(0.02)

    poller = threading.Thread(target=poll_health)
    poller.start()
    try:
        status, answer = raw_post(server.port, S, [body], len(body))
    finally:
        done.set()
        poller.join()
    assert status in (400, 413), answer
    assert answer["error"]["type"] == "invalid_request_error"
    assert max(latencies) < 0.5, f"/health took {max(latencies):.2f} s"


def test_a_body_over_the_cap_is_refused_unread(server: LocalServer) -> None:
    """Declared too long (the 80 MB that once took 13 GB): refused on its head alone. Sent
    chunked, never ended: refused once past the cap."""
    status, answer = raw_post(server.port, S, [], 80_000_000)
    cap = limits(server)["max_body_bytes"]
    assert status == 413 and f"{cap} bytes" in answer["error"]["message"], answer
    prefix = b'{"model": "tiny-random", "continuation": [5], "temperature": 0.5, "prompt": "'
    pieces = [prefix, *(b"a" * 65536 for _ in range(8_000_000 // 65536))]
    status, answer = raw_post(server.port, C, pieces, None, end=False)
    assert status == 413, answer
    assert answer["error"]["type"] == "invalid_request_error"
    assert completion(server)["choices"][0]["finish_reason"] in {"length", "stop"}


def test_a_prompt_too_long_to_fit_is_refused_before_tokenizing(server: LocalServer) -> None:
    """More characters than max_model_len tokens of the longest token can hold: 400 naming the
    prompt (or messages) and the cap, on every route that tokenizes text."""
    cap = MAX_MODEL_LEN * len("<|endoftext|>")  # tiny-random's longest token
    text = "a" * (cap + 1)
    cases = [
        (S, score(prompt=text), "prompt"),
        (S, score(prompt=None, messages=[{"role": "user", "content": text}]), "messages"),
        (C, comp(prompt=text), "prompt"),
        (CHAT, chat(messages=[{"role": "user", "content": text}]), "messages"),
        ("/tokenize", {"model": MODEL, "prompt": text}, "prompt"),
    ]
    for path, body, param in cases:
        response = post(server, path, body)
        assert response.status_code == 400, (path, response.text)
        error = response.json()["error"]
        assert error["param"] == param and f"{cap} characters" in error["message"], error
    assert limits(server)["max_prompt_chars"] == cap


def in_flight_after(server: LocalServer, timeout_s: float) -> dict[str, Any]:
    """Server stats once nothing is in flight (or at the deadline)."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats = httpx.get(f"{server.url}/server_info").json()["stats"]
        if stats["in_flight"] == 0 or time.monotonic() > deadline:
            return dict(stats)
        time.sleep(0.05)


def test_client_gone_aborts_a_non_streaming_request(server: LocalServer) -> None:
    before = in_flight_after(server, 10)
    body = {"model": MODEL, "prompt": "zzz", "max_tokens": 250, "temperature": 0}
    # Gone after 0.2 s: the server polls for a gone client every 0.25 s, and 250 tokens take
    # about a second here (at 0.5 s a quiet machine once finished them before the poll saw it).
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/v1/completions", json=body, timeout=0.2)
    after = in_flight_after(server, 10)
    assert after["in_flight"] == 0
    assert after["aborted"] == before["aborted"] + 1
    assert after["requests"] == before["requests"]


def test_client_disconnect_aborts_the_request(server: LocalServer) -> None:
    before = in_flight_after(server, 10)
    # Greedy "zzz" runs to max_tokens on tiny-random (no EOS), so there is work left to abort.
    body = {"model": MODEL, "prompt": "zzz", "max_tokens": 250, "temperature": 0, "stream": True}
    with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                break  # one chunk, then hang up
    after = in_flight_after(server, 10)
    assert after["in_flight"] == 0
    assert after["aborted"] == before["aborted"] + 1
    assert after["requests"] == before["requests"]  # it never completed


def test_cuda_graph_on_cpu_fixes_the_verify_width_and_reports_the_padding() -> None:
    """A lone request at budget 16, topk 1 (chains of at most 7) in a 17-wide verify: padded."""
    flags = ["--model", MODEL, "--max-model-len", str(MAX_MODEL_LEN), "--cuda-graph"]
    flags += ["--budget", "16", "--topk", "1", "--max-batch", "1"]
    with LocalServer(flags) as fixed:
        info = httpx.get(f"{fixed.url}/server_info").json()
        assert info["config"]["cuda_graph"] is True
        assert info["engine"]["cuda_graph_applied"] is False
        assert info["engine"]["cuda_graph_reason"] == "not applicable on cpu"
        assert info["engine"]["fixed_verify_shape"] == 17
        body = {"model": MODEL, "prompt": "abcabcabcabc", "max_tokens": 24, "temperature": 0}
        events = stream_events(
            fixed,
            "/v1/completions",
            {**body, "stream": True, "stream_options": {"include_usage": True}},
        )
        whole = post(fixed, "/v1/completions", body).json()
        stats = httpx.get(f"{fixed.url}/server_info").json()["stats"]
    for ddtree in (events[-2]["ddtree"], whole["ddtree"]):
        rounds = ddtree["verify_rounds"]
        assert ddtree["fixed_shape_rounds"] == ddtree["padded_rounds"] == rounds > 0
        assert ddtree["padding_rows"] >= (17 - 1 - 7) * rounds
        assert ddtree["max_verify_width"] == 17 and ddtree["max_tree_width"] <= 1
        assert ddtree["cuda_graph_rounds"] == ddtree["batched_rounds"] == 0
    assert stats["fixed_shape_rounds"] == stats["verify_rounds"] > 0
