"""The sglang engine against two real SGLang releases' HTTP apps, served live on loopback.

0.5.23 and 0.5.15 (the newest release before 2026-07-12, when the OpenAI id extensions began to
land: the surface of the mid-2026 builds PR #29907's branch was cut from) each serve their own
HTTP app, TokenizerManager and OpenAI serving code (sglang_serve_oracle.py `listen`) over a
scheduler that answers every prompt with the same ids and refuses logprobs as PR #29907's
scheduler does on DDTREE requests (scripted_scheduler.py). The engine negotiates with each as
it would with a real server: on 0.5.15 it must take the native `/generate` path, and every
request it then sends must carry ids back and never ask the speculative server for logprobs.
`/set_internal_state` is answered by each release's own handler (sglang_compat.py
`internal_state_setter`), so the accept thresholds negotiate and switch as on that release.
One oracle process per release (~25 s to import SGLang on an idle 2-core machine).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sweeper.config import ServerConfig
from sweeper.engines.base import Capabilities, EngineError, RequestSpec
from sweeper.engines.capabilities import probe
from sweeper.engines.sglang import SGLang
from sweeper.engines.sglang_negotiate import PROMPT_IDS_AT, chat_route_ids, tokenize
from sweeper.engines.sglang_switch import ROUTE, SWITCH_KEYS, SWITCHABLE
from sweeper.engines.sglang_switch import switch as switch_knobs
from sweeper.results.manifest import PROMPT_CHAT_ROUTE, PROMPT_PLAIN_CHAT
from sweeper.spec import RuntimeSpec
from tests.engines_oracles.oracle_process import (
    HERE,
    OLD_SGLANG_VERSION,
    ORACLE_ENV,
    SGLANG_VERSION,
    require_sglang,
    sse_events,
)
from tests.sweeper.conftest import free_port

# Runs the engine's own code in its venv (tens of seconds to import): not in make test-quick.
pytestmark = pytest.mark.slow

# Stock DFLASH is the built-in nearest DDTREE (PR #29907 runs DFLASH's request validation on
# DDTREE requests); the scheduler plays that validation's logprob refusal.
ARGV = [
    *("--model-path", "{target}", "--device", "cuda", "--speculative-algorithm", "DFLASH"),
    *("--speculative-draft-model-path", "{draft}", "--speculative-num-draft-tokens", "16"),
]
RUNTIME = RuntimeSpec.model_validate(
    {"engine": "sglang", "preset": "sglang-ddtree", "model": "m", "draft": "d"}
)
DDTREE = ServerConfig.make(
    "speculative", {"budget": 16, "topk": 4, "block_size": 8}, ("budget", "topk", "block_size")
)
PROMPTS = {"tide": "the tide comes in", "sea": "the sea goes out", "user": "user assistant"}
REFUSAL = "DFLASH speculative decoding does not support return_logprob yet."
THRESHOLD = "speculative_accept_threshold_single"


@pytest.fixture(scope="module", params=[OLD_SGLANG_VERSION, SGLANG_VERSION])
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """(release, base URL) of that release's app, served until the module's tests are done."""
    version = str(request.param)
    python = require_sglang(version)
    port = free_port()
    log_path = tmp_path_factory.mktemp("oracle") / "oracle.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(python), str(HERE / "sglang_serve_oracle.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, **ORACLE_ENV},
            start_new_session=True,
        )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps({"argv": ARGV, "refuse_logprobs": True, "listen": port}).encode())
    proc.stdin.close()
    try:
        line = proc.stdout.readline()  # "" if the oracle died before it listened
        assert line, Path(log_path).read_text()[-4000:]
        assert json.loads(line) == {"listening": port, "sglang_version": version}
        yield version, f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the oracle's own process group: uvicorn + zmq
        proc.wait(30)


def _spec(prompt_id: str, temperature: float = 0.0) -> RequestSpec:
    return RequestSpec(
        prompt_id=prompt_id, prompt=PROMPTS[prompt_id], max_tokens=6, temperature=temperature
    )


def _negotiated(url: str) -> SGLang:
    engine = SGLang(RUNTIME)
    with httpx.Client() as client:
        caps = engine.negotiate(client, url, DDTREE, _spec("tide"), "m")
    bound: SGLang = engine.bind(caps)
    return bound


def test_negotiation_takes_the_path_each_release_gives(live: tuple[str, str]) -> None:
    version, url = live
    caps = _negotiated(url).capabilities
    assert caps is not None
    # A speculative server is never asked for margins: the AR baseline gives them.
    assert (caps.acceptance, caps.margins) == ("requests", "baseline")
    if version == OLD_SGLANG_VERSION:
        # 0.5.15's completions ignore return_token_ids: the stream carries text only.
        assert caps.token_ids == "native", caps.evidence
        assert any(e.startswith("OpenAI /v1/completions: no ids") for e in caps.evidence)
        assert caps.details["streaming"] == "cumulative"
    else:
        assert caps.token_ids == "openai", caps.evidence


def test_every_request_carries_ids_and_none_asks_for_logprobs(live: tuple[str, str]) -> None:
    version, url = live
    engine = _negotiated(url)
    seen: dict[str, list[int]] = {}
    with httpx.Client() as client:
        for temperature in (0.0, 0.7):
            for prompt_id in PROMPTS:
                spec = _spec(prompt_id, temperature)
                request = engine.request(spec, "m")
                asked = set(request.body) | set(request.body.get("sampling_params", {}))
                assert not asked & {"logprobs", "top_logprobs", "return_logprob"}, request.body
                result = probe(client, url, request, engine.reader(spec))
                assert result.ok and result.reader is not None, (version, result.error)
                fields = result.reader.fields()
                assert len(fields["token_ids"]) == spec.max_tokens, (version, fields)
                assert result.reader.usage_mismatch() is None
                # Acceptance per request: 3 verify steps of 2 tokens (1 draft + the bonus).
                assert (fields["verify_rounds"], fields["tau"]) == (3, 2.0), fields
                # One output per prompt whatever the temperature (a lossless decoder's).
                assert seen.setdefault(prompt_id, fields["token_ids"]) == fields["token_ids"]
    assert len({tuple(ids) for ids in seen.values()}) == len(PROMPTS)


def test_a_chat_prompt_needs_no_tokenize(live: tuple[str, str]) -> None:
    """For a build without /tokenize (issue 32): SGLang's chat route, asked for
    `return_prompt_token_ids` (non-streamed), gives a chat prompt's ids exactly as /tokenize
    renders its messages (the model's template), and /generate streams output ids for those
    ids or for the plain-text rendering the sweeper falls back to."""
    version, url = live
    system = {"role": "system", "content": "the sea"}
    chat = RequestSpec(
        prompt_id="chat", prompt="", max_tokens=6, temperature=0.0, chat=True,
        messages=(system, {"role": "user", "content": PROMPTS["tide"]}),
    )  # fmt: skip
    with httpx.Client() as client:
        ids = chat_route_ids(client, url, chat, "m")
        assert ids and ids == tokenize(client, url, chat, "m"), version
        for details in (
            {"prompt": PROMPT_CHAT_ROUTE, PROMPT_IDS_AT: url},
            {"prompt": PROMPT_PLAIN_CHAT},
        ):
            SGLang._prompt_ids.clear()
            caps = Capabilities("native", "requests", "baseline", details=details)
            engine = SGLang(RUNTIME).bind(caps)
            request = engine.request(chat, "m")
            assert ("input_ids" in request.body) == (details["prompt"] == PROMPT_CHAT_ROUTE)
            result = probe(client, url, request, engine.reader(chat))
            assert result.ok and result.reader is not None, (version, result.error)
            fields = result.reader.fields()
            assert len(fields["token_ids"]) == chat.max_tokens and fields["tau"] == 2.0, fields
            assert result.reader.usage_mismatch() is None


def test_the_scheduler_refuses_logprobs_as_pr_29907s_does(live: tuple[str, str]) -> None:
    """What the sweeper would meet had it asked the speculative server for margins."""
    version, url = live
    body = {"text": "the sea", "stream": True, "return_logprob": True, "top_logprobs_num": 2}
    body["sampling_params"] = {"max_new_tokens": 4, "temperature": 0}
    with httpx.Client() as client:
        native = client.post(url + "/generate", json=body, timeout=60)
        events = [data for _, data in sse_events(native.text) if isinstance(data, dict)]
        assert native.status_code == 200, native.text
        # The request is finished at once: an abort with the validation's message, no tokens.
        final = events[-1]["meta_info"]
        assert final["finish_reason"]["type"] == "abort", (version, final)
        assert final["finish_reason"]["message"] == REFUSAL
        assert final["completion_tokens"] == 0 and events[-1]["output_ids"] == []


def test_both_accept_thresholds_switch_in_place_through_each_releases_handler(
    live: tuple[str, str],
) -> None:
    """Each release's own `/set_internal_state` handler (0.5.15 `Scheduler.set_internal_state`,
    0.5.23 `SchedulerInternalStateController`) takes both thresholds at their values and
    reports them back, so negotiation finds both switchable; a switch to 0.5 shows in the
    schedulers' `internal_states` (the top-level field stays the launch's 1.0), a config naming
    none switches back to the launch's value, and a key the handler lacks is refused by the
    handler itself, in one line naming build and key."""
    version, url = live
    engine = _negotiated(url)
    caps = engine.capabilities
    assert caps is not None
    assert caps.details[SWITCHABLE] == list(SWITCH_KEYS), caps.evidence
    for key in SWITCH_KEYS:
        assert f"switch {key}: {ROUTE} took 1.0, read back alike" in caps.evidence, caps.evidence
    relaxed = ServerConfig.make(
        "speculative", {**DDTREE.params, THRESHOLD: 0.5}, (*DDTREE.speculative_keys, THRESHOLD)
    )
    named = f"sglang {version} (speculative)"
    with httpx.Client() as client:
        engine.switch(client, url, relaxed)
        info = client.get(url + "/server_info").json()
        assert [s[THRESHOLD] for s in info["internal_states"]] == [0.5], version
        assert info[THRESHOLD] == 1.0  # the HTTP process's copy of the launch's args
        engine.switch(client, url, DDTREE)  # a config naming none gets the launch's value back
        info = client.get(url + "/server_info").json()
        assert [s[THRESHOLD] for s in info["internal_states"]] == [1.0], version
        with pytest.raises(EngineError) as refused:
            switch_knobs(
                client,
                url,
                lambda: client.get(url + "/server_info").json(),
                {"speculative_eagle_topk": 4},
                frozenset({"speculative_eagle_topk"}),
                named,
            )
    assert str(refused.value) == (
        f"{named} refused to switch speculative_eagle_topk: its {ROUTE} handler refused it "
        "(answered [False])"
    )
