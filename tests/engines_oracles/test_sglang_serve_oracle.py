"""SGLang 0.5.23's own HTTP routes and serving code, through sglang_serve_oracle.py.

What a streamed chat/completions request must look like for SGLang to accept it and give back
token ids, logprobs and per-request acceptance, and what its readiness and /server_info answer.
One oracle process serves every request below (~25 s), under a DFLASH config with block size 16.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engines_oracles.oracle_process import sglang_serve, sse_events

# Runs the engine's own code in its venv (tens of seconds to import): not in make test-quick.
pytestmark = pytest.mark.slow

ARGV = [
    *("--model-path", "{target}", "--device", "cuda", "--speculative-algorithm", "DFLASH"),
    *("--speculative-draft-model-path", "{draft}", "--speculative-num-draft-tokens", "16"),
]
MESSAGES = [{"role": "user", "content": "the sea"}]
# Two decode steps: "the" (no draft accepted), then "tide comes" (one of 15 drafts accepted).
STEPS = [
    {
        "text": "the",
        "ids": [6],
        "logprobs": [-0.1],
        "top_logprobs": [[-0.1, -2.5]],
        "top_ids": [[6, 7]],
        "verify_ct": 1,
        "correct_drafts": 0,
        "correct_drafts_histogram": [1],  # cumulative: one step accepted 0 drafts
    },
    {
        "text": " tide comes",
        "ids": [7, 8],
        "logprobs": [-0.2, -0.3],
        "top_logprobs": [[-0.2, -1.9], [-0.3, -1.0]],
        "top_ids": [[7, 9], [8, 9]],
        "verify_ct": 2,
        "correct_drafts": 1,
        "correct_drafts_histogram": [1, 1],  # ... and one accepted 1
    },
]
IDS = [6, 7, 8]


def _chat(name: str, headers: dict | None = None, **body: Any) -> dict[str, Any]:
    full = {"model": "m", "messages": MESSAGES, "stream": True, "max_tokens": 3, **body}
    return {
        "name": name,
        "path": "/v1/chat/completions",
        "body": full,
        "headers": headers or {},
        "steps": STEPS,
    }


REQUESTS = [
    {"name": "health_cold", "path": "/health"},
    {"name": "health_generate_cold", "path": "/health_generate"},
    {"name": "models_cold", "path": "/v1/models"},
    {"name": "warm_up", "mark_warmed_up": True},
    {"name": "health_warm", "path": "/health"},
    {"name": "server_info", "path": "/server_info"},
    {"name": "get_server_info", "path": "/get_server_info"},
    _chat("chat_return_token_ids", return_token_ids=True),
    {
        "name": "chat_bad_body",
        "path": "/v1/chat/completions",
        "body": {"model": "m", "messages": "not a list", "stream": True},
    },
    _chat("chat_plain", temperature=0),
    _chat("chat_sglext_body", return_output_ids_in_sglext=True, return_spec_tokens_details=True),
    _chat(
        "chat_sglext_header",
        headers={"x-sglext-return-output-ids": "1"},
        logprobs=True,
        top_logprobs=2,
    ),
    {
        "name": "completions",
        "path": "/v1/completions",
        "steps": STEPS,
        "body": {
            "model": "m",
            "prompt": "the sea",
            "stream": True,
            "max_tokens": 3,
            "return_token_ids": True,
            "logprobs": 2,
            "return_spec_tokens_details": True,
        },
    },
]


@pytest.fixture(scope="module")
def served() -> dict[str, dict[str, Any]]:
    return sglang_serve({"argv": ARGV, "ready": False, "requests": REQUESTS})


def _final_sglext(body: str) -> dict[str, Any]:
    chunks = [data for _, data in sse_events(body) if isinstance(data, dict)]
    sglext = [chunk for chunk in chunks if "sglext" in chunk]
    assert len(sglext) == 1, "sglext comes once, after the finish chunk"
    assert sglext[0]["choices"] == [] and chunks.index(sglext[0]) > 0
    return sglext[0]["sglext"]


def test_health_is_503_until_warm_up_and_models_answers_before(served: dict) -> None:
    assert served["health_cold"]["status"] == 503
    assert served["health_generate_cold"]["status"] == 503
    assert served["models_cold"]["status"] == 200
    assert served["health_warm"]["status"] == 200
    # /health generates one token through the scheduler once warm (its default); not a user
    # request, so the scripted scheduler does not count it.
    assert not served["health_warm"]["reached_scheduler"]


def test_server_info_is_resolved_args_plus_scheduler_state(served: dict) -> None:
    import json

    info = json.loads(served["server_info"]["body"])
    assert json.loads(served["get_server_info"]["body"]).keys() == info.keys()
    assert info["speculative_algorithm"] == "DFLASH"
    assert (info["speculative_num_draft_tokens"], info["speculative_eagle_topk"]) == (16, 1)
    assert info["version"] == "0.5.23" and info["status"] == "ready"
    assert isinstance(info["internal_states"], list) and len(info["internal_states"]) == 1
    assert "--speculative-num-draft-tokens 16" in info["launch_command"]


def test_streamed_chat_refuses_return_token_ids(served: dict) -> None:
    refused = served["chat_return_token_ids"]
    assert refused["status"] == 400 and not refused["reached_scheduler"]
    assert "return_token_ids is not supported with streaming" in refused["body"]
    bad = served["chat_bad_body"]
    assert bad["status"] == 400 and "valid list" in bad["body"]


def test_chat_gives_output_ids_only_when_asked(served: dict) -> None:
    plain = served["chat_plain"]
    assert plain["status"] == 200
    assert not any("sglext" in d for _, d in sse_events(plain["body"]) if isinstance(d, dict))
    for name in ("chat_sglext_body", "chat_sglext_header"):
        assert _final_sglext(served[name]["body"])["output_ids"] == [IDS], name


def test_chat_text_streams_in_choices_and_ends_with_done(served: dict) -> None:
    events = sse_events(served["chat_plain"]["body"])
    assert events[-1] == (None, "[DONE]")
    text = "".join(
        choice["delta"].get("content") or ""
        for _, data in events[:-1]
        for choice in data["choices"]
    )
    assert text == "the tide comes"


def test_temperature_zero_reaches_the_scheduler_as_greedy(served: dict) -> None:
    sampling = served["chat_plain"]["scheduler_request"]["sampling_params"]
    assert sampling["top_k"] == 1 and sampling["max_new_tokens"] == 3


def test_spec_tokens_details_give_per_request_acceptance(served: dict) -> None:
    details = _final_sglext(served["chat_sglext_body"]["body"])["spec_tokens_details"]
    # accept length = completion tokens / verify passes (bonus token included): 3 / 2.
    assert details["spec_accept_length"] == 1.5 and details["spec_verify_ct"] == 2
    # proposed = verify passes x (num_draft_tokens - 1) = 2 x 15.
    assert details["spec_num_proposed_drafts"] == 30 and details["spec_num_correct_drafts"] == 1


def test_our_reader_takes_the_accepted_histogram_and_nothing_else_as_exposure(
    served: dict,
) -> None:
    """The one exposure figure SGLang reports per request, read by the sweeper's SGLang reader
    from SGLang's own stream; the others stay unknown (None), never 0."""
    from sweeper.engines.sglang import SGLangReader
    from sweeper.results.records import EXPOSURE_COLUMNS

    reader = SGLangReader(chat=True)
    for _, data in sse_events(served["chat_sglext_body"]["body"]):
        if isinstance(data, dict):
            reader.feed(data)
    fields = reader.fields()
    assert fields["accepted_hist"] == [1, 1] and fields["verify_rounds"] == 2
    assert all(fields[k] is None for k in EXPOSURE_COLUMNS if k != "accepted_hist")


def test_chat_logprobs_carry_top2_per_token(served: dict) -> None:
    events = sse_events(served["chat_sglext_header"]["body"])
    entries = [
        entry
        for _, data in events
        if isinstance(data, dict)
        for choice in data["choices"]
        if choice.get("logprobs")
        for entry in choice["logprobs"]["content"]
    ]
    assert [e["token"] for e in entries] == ["the", "tide", "comes"]
    assert [[t["logprob"] for t in e["top_logprobs"]] for e in entries] == [
        [-0.1, -2.5],
        [-0.2, -1.9],
        [-0.3, -1.0],
    ]


def test_completions_stream_token_ids_per_chunk(served: dict) -> None:
    response = served["completions"]
    assert response["status"] == 200
    chunks = [d for _, d in sse_events(response["body"]) if isinstance(d, dict)]
    ids = [i for chunk in chunks for c in chunk["choices"] for i in c.get("token_ids") or []]
    assert ids == IDS
    tops = [
        top
        for chunk in chunks
        for choice in chunk["choices"]
        if choice.get("logprobs")
        for top in choice["logprobs"]["top_logprobs"]
    ]
    # Legacy completions logprobs: one {token text: logprob} dict per token.
    assert tops[0] == {"the": -0.1, "tide": -2.5}
    assert _final_sglext(response["body"])["spec_tokens_details"]["spec_verify_ct"] == 2
