"""Sampled requests on the wire and back: `openai_body` and SGLang's `generate_body` carry top_k;
logprobs are asked at temperature 0 (top-2 margins) or for a coupled AR point's sample margins,
never where margins are refused; and the sample margins a coupled server streams (chunks built
by the bundled runtime's own formatting code) are read per token, none at all reading as []."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest

from ddtree_runtime.params import TokenLogprob
from ddtree_runtime.server.formatting import (
    ResponseHead,
    TokenText,
    chat_logprobs,
    legacy_logprobs,
    sse,
    usage,
)
from sweeper.engines.base import RequestSpec
from sweeper.engines.common import openai_body
from sweeper.engines.registry import engine_for
from sweeper.engines.sglang_stream import generate_body
from sweeper.engines.stream import ChunkReader, sample_margins_of
from sweeper.spec import RuntimeSpec

GREEDY = RequestSpec(prompt_id="a", prompt="hi", max_tokens=8, temperature=0.0)
SAMPLED = replace(GREEDY, temperature=0.7, seed=11, top_p=0.9, top_k=40)


def _chat(spec: RequestSpec) -> RequestSpec:
    return replace(spec, chat=True)


def _logprob_keys(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in ("logprobs", "top_logprobs") if k in body}


# --- openai_body ---------------------------------------------------------------------------------


@pytest.mark.parametrize("chat", [True, False])
def test_top_k_is_sent_when_set(chat: bool) -> None:
    spec = replace(SAMPLED, chat=chat)
    body = openai_body(spec, "m")
    assert (body["top_k"], body["top_p"], body["seed"]) == (40, 0.9, 11)
    assert body["temperature"] == 0.7 and body["model"] == "m"
    unset = openai_body(replace(spec, top_k=None, top_p=None), "m")
    assert "top_k" not in unset and "top_p" not in unset


def test_chat_logprobs_at_temperature_zero_and_for_sample_margins_only() -> None:
    asked = {"logprobs": True, "top_logprobs": 2}
    assert _logprob_keys(openai_body(_chat(GREEDY), None)) == asked
    # Sampled: only a coupled AR point asks (its sample margins).
    assert _logprob_keys(openai_body(_chat(SAMPLED), None)) == {}
    assert _logprob_keys(openai_body(_chat(replace(SAMPLED, sample_margins=True)), None)) == asked
    # A server top-2 margins are not asked of (a speculative one) is not asked greedy; a
    # coupled request asks for its sample margins all the same (the coupling includes them).
    assert _logprob_keys(openai_body(_chat(GREEDY), None, margins=False)) == {}
    coupled = _chat(replace(SAMPLED, sample_margins=True))
    assert _logprob_keys(openai_body(coupled, None, margins=False)) == asked


def test_completions_logprobs_at_temperature_zero_and_for_sample_margins_only() -> None:
    assert _logprob_keys(openai_body(GREEDY, None)) == {"logprobs": 2}
    assert _logprob_keys(openai_body(SAMPLED, None)) == {}
    assert _logprob_keys(openai_body(replace(SAMPLED, sample_margins=True), None)) == {
        "logprobs": 2
    }
    assert _logprob_keys(openai_body(GREEDY, None, margins=False)) == {}
    coupled = replace(SAMPLED, sample_margins=True)
    assert _logprob_keys(openai_body(coupled, None, margins=False)) == {"logprobs": 2}
    body = openai_body(coupled, None)
    assert body["prompt"] == "hi" and "messages" not in body and "model" not in body


def test_the_runtime_engine_asks_sample_margins_with_its_ids() -> None:
    engine = engine_for(RuntimeSpec())
    request = engine.request(_chat(replace(SAMPLED, sample_margins=True)), "m")
    assert request.path == "/v1/chat/completions"
    assert request.body["return_token_ids"] is True
    assert request.body["top_k"] == 40
    assert _logprob_keys(request.body) == {"logprobs": True, "top_logprobs": 2}


# --- generate_body -------------------------------------------------------------------------------


def test_generate_body_carries_top_k() -> None:
    body = generate_body(SAMPLED, [1, 2, 3], margins=True)
    assert body["sampling_params"] == {
        "max_new_tokens": 8,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 40,
        "sampling_seed": 11,
    }
    assert body["input_ids"] == [1, 2, 3]
    # SGLang gives no sample margins: a sampled request never asks logprobs.
    assert "return_logprob" not in generate_body(
        replace(SAMPLED, sample_margins=True), "hi", margins=True
    )
    unset = generate_body(replace(SAMPLED, top_k=None), "hi", margins=False)
    assert "top_k" not in unset["sampling_params"] and unset["text"] == "hi"
    greedy = generate_body(GREEDY, "hi", margins=True)
    assert greedy["return_logprob"] is True and greedy["top_logprobs_num"] == 2


# --- reading sample margins ----------------------------------------------------------------------


class _Tokenizer:
    """Decodes id n as " w<n>" (enough for the runtime's TokenText)."""

    def decode(self, ids: list[int]) -> str:
        return "".join(f" w{i}" for i in ids)


TEXT = TokenText(_Tokenizer())


def _entry(token_id: int, margin: float | None) -> TokenLogprob:
    return TokenLogprob(token_id, -0.5, [(token_id, -0.5), (token_id + 1, -1.25)], margin)


def _stream(chat: bool, events: list[list[TokenLogprob]]) -> list[dict[str, Any]]:
    """The runtime's stream chunks for these events (as `ddtree_runtime.server.app.stream`
    writes them), each through SSE and JSON as a client reads it."""
    head = ResponseHead("r1", "m", chat)
    chunks = []
    text = ""
    for n, entries in enumerate(events):
        ids = [e.token_id for e in entries]
        piece = "".join(TEXT(i) for i in ids)
        choice: dict[str, Any] = {"index": 0, "token_ids": ids}
        if chat:
            choice["logprobs"] = chat_logprobs(entries, TEXT, 2)
            choice["delta"] = {"content": piece}
        else:
            choice["logprobs"] = legacy_logprobs(entries, TEXT, 2, len(text))
            choice["text"] = piece
        choice["finish_reason"] = "length" if n == len(events) - 1 else None
        text += piece
        chunks.append(head.body([choice], chunk=True))
    final = head.body([], chunk=True)
    final["usage"] = usage(3, sum(len(e) for e in events))
    chunks.append(final)
    return [json.loads(sse(c).removeprefix("data: ")) for c in chunks]


SAMPLED_EVENTS = [[_entry(5, 0.25), _entry(6, 0.0625)], [_entry(7, 0.5)]]


def test_the_runtime_shapes_are_the_ones_read() -> None:
    chat = _stream(True, SAMPLED_EVENTS)[0]["choices"][0]
    assert chat["logprobs"]["content"][0]["sample_margin"] == 0.25
    completions = _stream(False, SAMPLED_EVENTS)[0]["choices"][0]
    assert completions["logprobs"]["sample_margins"] == [0.25, 0.0625]


@pytest.mark.parametrize("chat", [True, False])
def test_sample_margins_of_reads_each_token(chat: bool) -> None:
    first, second = (c["choices"][0] for c in _stream(chat, SAMPLED_EVENTS)[:2])
    assert sample_margins_of(first, chat) == [0.25, 0.0625]
    assert sample_margins_of(second, chat) == [0.5]
    assert sample_margins_of({"index": 0, "logprobs": None}, chat) == []


@pytest.mark.parametrize("chat", [True, False])
def test_a_token_without_a_margin_is_nan_in_place(chat: bool) -> None:
    (chunk, _) = _stream(chat, [[_entry(5, 0.25), _entry(6, None), _entry(7, 0.125)]])
    margins = sample_margins_of(chunk["choices"][0], chat)
    assert len(margins) == 3
    assert (margins[0], margins[2]) == (0.25, 0.125) and math.isnan(margins[1])


@pytest.mark.parametrize("chat", [True, False])
def test_the_reader_collects_sample_margins_beside_ids_and_top2_margins(chat: bool) -> None:
    for reader in (ChunkReader(chat), engine_for(RuntimeSpec()).reader(replace(GREEDY, chat=chat))):
        carried = [reader.feed(chunk) for chunk in _stream(chat, SAMPLED_EVENTS)]
        assert carried == [True, True, False]
        fields = reader.fields()
        assert fields["token_ids"] == [5, 6, 7]
        assert fields["sample_margins"] == [0.25, 0.0625, 0.5]
        assert fields["top2_margins"] == [0.75, 0.75, 0.75]
        assert fields["text"] == " w5 w6 w7"
        assert fields["finish_reason"] == "length"


@pytest.mark.parametrize("chat", [True, False])
def test_a_stream_without_sample_margins_gives_none(chat: bool) -> None:
    # Greedy: top-2 logprobs but no sample margin (the runtime adds the key only when sampled).
    greedy = [[_entry(5, None), _entry(6, None)], [_entry(7, None)]]
    chunks = _stream(chat, greedy)
    assert "sample_margins" not in json.dumps(chunks) and "sample_margin" not in json.dumps(chunks)
    reader = ChunkReader(chat)
    for chunk in chunks:
        reader.feed(chunk)
    fields = reader.fields()
    assert fields["sample_margins"] == []
    assert fields["top2_margins"] == [0.75, 0.75, 0.75]
    # No logprobs at all (a sampled request that did not ask): none either.
    plain = ChunkReader(chat)
    for chunk in chunks:
        for choice in chunk["choices"]:
            choice["logprobs"] = None
        plain.feed(chunk)
    assert plain.fields()["sample_margins"] == []
    assert plain.fields()["top2_margins"] == []
    assert plain.fields()["token_ids"] == [5, 6, 7]
