"""Negotiation against a server that behaves as sgl-project/sglang PR #29907's build does
(tests/sweeper/fake_sglang.py): no OpenAI id extensions, logprobs refused on DDTREE requests,
native `/generate` with `output_ids` and `meta_info`. The engine must pick the native path,
never send logprobs to the speculative server, read both meta_info spellings and both streaming
modes, and fall back to `/metrics` counters where no response carries acceptance. The real
SGLang builds are checked in tests/engines_oracles."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from sweeper.config import ServerConfig
from sweeper.engines.base import Capabilities, EngineError, RequestSpec
from sweeper.engines.capabilities import CapabilityError, probe
from sweeper.engines.sglang import SGLang, read_metrics
from sweeper.results.manifest import PROMPT_CHAT_ROUTE, PROMPT_PLAIN_CHAT, PROMPT_TEXT
from sweeper.spec import RuntimeSpec
from tests.sweeper import fake_sglang
from tests.sweeper.conftest import serving

FAKE = Path(fake_sglang.__file__)
RUNTIME = RuntimeSpec.model_validate(
    {"engine": "sglang", "preset": "sglang-ddtree", "model": "m", "draft": "d"}
)
AR = ServerConfig.make("ar", {"cuda_graph": False})
DDTREE = ServerConfig.make(
    "speculative", {"budget": 16, "topk": 4, "block_size": 8}, ("budget", "topk", "block_size")
)
PROMPT = RequestSpec(prompt_id="p", prompt="the tide comes in", max_tokens=9, temperature=0.0)


def served(port: int, *args: str, env: dict[str, str] | None = None) -> AbstractContextManager[str]:
    argv = [sys.executable, str(FAKE), "--model-path", "m", "--port", str(port), *args]
    return serving(argv, port, env)


def _negotiate(url: str, sc: ServerConfig, spec: RequestSpec = PROMPT) -> Capabilities:
    with httpx.Client() as client:
        return SGLang(RUNTIME).negotiate(client, url, sc, spec, "m")


def _stream(url: str, engine: SGLang, spec: RequestSpec) -> dict:
    with httpx.Client() as client:
        result = probe(client, url, engine.request(spec, "m"), engine.reader(spec))
    assert result.ok and result.reader is not None, result.error
    return {**result.reader.fields(), "mismatch": result.reader.usage_mismatch()}


SPEC_ARGS: tuple[str, ...] = (
    "--speculative-algorithm",
    "DDTREE",
    "--speculative-ddtree-budget",
    "16",
)
SPEC_ARGS += ("--speculative-num-draft-tokens", "8")


@pytest.mark.parametrize("incremental", [False, True])
def test_the_pr_build_gets_the_native_path_and_the_same_ids_everywhere(
    port: int, incremental: bool
) -> None:
    extra = ("--incremental-streaming-output",) if incremental else ()
    with served(port, *extra) as url:
        ar = _negotiate(url, AR)
        ar_fields = _stream(url, SGLang(RUNTIME).bind(ar), PROMPT)
    with served(port, *SPEC_ARGS, *extra) as url:
        spec = _negotiate(url, DDTREE)
        spec_fields = _stream(url, SGLang(RUNTIME).bind(spec), PROMPT)
    assert (ar.token_ids, ar.acceptance, ar.margins) == ("native", "not needed", "logprobs")
    assert (spec.token_ids, spec.acceptance, spec.margins) == ("native", "requests", "baseline")
    assert spec.details["streaming"] == ("incremental" if incremental else "cumulative")
    assert spec.details["prompt"] == "input_ids from /tokenize"
    # The OpenAI probe's stream carried text but no ids: the evidence says so.
    assert any(line.startswith("OpenAI /v1/completions: no ids") for line in spec.evidence)
    # The same ids from both servers, from the native stream, with margins only from AR.
    assert ar_fields["token_ids"] == spec_fields["token_ids"] and len(ar_fields["token_ids"]) == 9
    assert ar_fields["token_ids_source"] == spec_fields["token_ids_source"] == "native"
    assert ar_fields["text"] == spec_fields["text"] != ""
    assert ar_fields["top2_margins"] == pytest.approx([2.4] * 9)
    assert spec_fields["top2_margins"] == []
    assert spec_fields["tau"] and spec_fields["verify_rounds"] and spec_fields["accepted_hist"]
    assert ar_fields["mismatch"] is None and spec_fields["mismatch"] is None


def test_a_speculative_server_is_never_sent_logprobs(port: int) -> None:
    asked = {"logprobs", "top_logprobs", "return_logprob", "top_logprobs_num"}
    with served(port, *SPEC_ARGS) as url:
        caps = _negotiate(url, DDTREE)
        engine = SGLang(RUNTIME).bind(caps)
        for chat in (False, True):
            body = engine.request(replace(PROMPT, chat=chat), "m").body
            assert not asked & set(body), body
    # Unbound or bound to an AR server, the same engine asks for them at temperature 0.
    assert asked & set(SGLang(RUNTIME).request(PROMPT, "m").body)


def test_the_older_spelling_and_the_chat_prompt_through_tokenize(port: int) -> None:
    chat = RequestSpec(
        prompt_id="c", prompt="hi", max_tokens=5, temperature=0.0, chat=True,
        messages=({"role": "user", "content": "hi there"},),
    )  # fmt: skip
    with served(port, *SPEC_ARGS, env={"FAKE_SPELLING": "0.5.23"}) as url:
        caps = _negotiate(url, DDTREE, chat)
        fields = _stream(url, SGLang(RUNTIME).bind(caps), chat)
    assert caps.token_ids == "native" and caps.acceptance == "requests"
    assert fields["accepted_hist"] and fields["tau"] == pytest.approx(5 / fields["verify_rounds"])


def test_acceptance_falls_back_to_metrics_counters(port: int) -> None:
    env = {"FAKE_NO_META_ACCEPTANCE": "1"}
    with served(port, *SPEC_ARGS, "--enable-metrics", env=env) as url:
        caps = _negotiate(url, DDTREE)
        engine = SGLang(RUNTIME).bind(caps)
        with httpx.Client() as client:
            before = engine.acceptance_counters(client, url)
            _stream(url, engine, PROMPT)
            after = engine.acceptance_counters(client, url)
    assert caps.acceptance == "metrics" and before is not None and after is not None
    drafts = after["drafts"] - before["drafts"]
    accepted = after["accepted_tokens"] - before["accepted_tokens"]
    assert drafts > 0 and 1 + accepted / drafts == pytest.approx(9 / drafts)


def test_without_metrics_the_build_lacks_acceptance_and_says_so(port: int) -> None:
    with served(port, *SPEC_ARGS, env={"FAKE_NO_META_ACCEPTANCE": "1"}) as url:
        caps = _negotiate(url, DDTREE)
    assert caps.acceptance == "none"
    assert "/metrics: no speculative counters (is --enable-metrics on?)" in caps.evidence


def test_a_build_with_no_ids_anywhere_fails_with_one_line(port: int) -> None:
    """A chat prompt on a build with neither /tokenize nor /generate: no sglext ids, no native
    path."""
    chat = RequestSpec(prompt_id="c", prompt="hi", max_tokens=4, temperature=0.0, chat=True)
    env = {"FAKE_NO_TOKENIZE": "1", "FAKE_NO_GENERATE": "1"}
    with served(port, env=env) as url, pytest.raises(CapabilityError) as err:
        _negotiate(url, AR, chat)
    message = str(err.value)
    assert message.startswith("this build gives no token ids:") and "\n" not in message
    assert "/tokenize: no ids" in message and "native /generate: HTTP 404" in message


CHAT = RequestSpec(
    prompt_id="nt", prompt="", max_tokens=7, temperature=0.0, chat=True,
    messages=({"role": "system", "content": "be brief"}, {"role": "user", "content": "the moon"}),
)  # fmt: skip
#: Builds without /tokenize: (env, workload prompt, the prompt source negotiated).
NO_TOKENIZE = {
    "completions": ({}, PROMPT, PROMPT_TEXT),
    "chat": ({}, CHAT, PROMPT_CHAT_ROUTE),
    "chat, no prompt ids": ({"FAKE_NO_PROMPT_IDS": "1"}, CHAT, PROMPT_PLAIN_CHAT),
}


@pytest.mark.parametrize("case", list(NO_TOKENIZE))
def test_without_tokenize_every_config_gets_the_same_prompt(port: int, case: str) -> None:
    """A build without /tokenize still takes the native path with token-id verdicts: a chat
    prompt's ids from the chat route where it gives them (the model's own template), else its
    text (a chat prompt as plain lines); the AR baseline and the speculative server are sent
    the same body's prompt, answer the same ids, and the capabilities name the source."""
    extra, spec, source = NO_TOKENIZE[case]
    env = {"FAKE_NO_TOKENIZE": "1", **extra}
    SGLang._prompt_ids.clear()  # the run's shared ids: this test's AR server asks first
    sent, fields = {}, {}
    for mode, sc, args in (("ar", AR, ()), ("speculative", DDTREE, SPEC_ARGS)):
        with served(port, *args, env=env) as url:
            caps = _negotiate(url, sc, spec)
            engine = SGLang(RUNTIME).bind(caps)
            sent[mode] = engine.request(spec, "m").body
            fields[mode] = _stream(url, engine, spec)
        assert (caps.token_ids, caps.details["prompt"]) == ("native", source), caps.evidence
        assert caps.acceptance == ("requests" if mode == "speculative" else "not needed")
        assert any(line == "/tokenize: no ids" for line in caps.evidence)
    prompt = {k: v for k, v in sent["ar"].items() if k in ("text", "input_ids")}
    assert prompt == {k: sent["speculative"][k] for k in prompt}, sent
    if source == PROMPT_CHAT_ROUTE:  # the ids the chat route renders: its template's
        rendered = fake_sglang.render_chat([dict(m) for m in CHAT.messages or ()])
        assert prompt == {"input_ids": fake_sglang.tokenize(rendered)}
    elif source == PROMPT_PLAIN_CHAT:
        assert prompt == {"text": "system: be brief\nuser: the moon\nassistant:"}
        assert any("not the model's chat template" in line for line in caps.evidence)
    else:
        assert prompt == {"text": PROMPT.prompt}
    assert fields["ar"]["token_ids"] == fields["speculative"]["token_ids"]
    assert len(fields["ar"]["token_ids"]) == spec.max_tokens
    assert fields["speculative"]["token_ids_source"] == "native" and fields["speculative"]["tau"]


def test_read_metrics_sums_label_sets() -> None:
    page = (
        "# HELP sglang:generation_tokens_total x\n"
        'sglang:generation_tokens_total{is_streaming="true"} 30.0\n'
        'sglang:generation_tokens_total{is_streaming="false"} 10.0\n'
        'sglang:spec_verify_calls_total{model_name="m"} 8.0\n'
    )
    assert read_metrics(page) == {"drafts": 8.0, "accepted_tokens": 32.0}
    assert read_metrics("sglang:generation_tokens_total 5\n") is None


THRESHOLD = "speculative_accept_threshold_single"


def test_a_ddtree_server_switches_its_accept_threshold_in_place(port: int) -> None:
    """The PR build's handler (93e9850e's `Scheduler.set_internal_state`, as the fake plays
    it): both thresholds negotiated switchable, one switched to 0.3 on a DDTREE server and
    proven from the schedulers' state, so the relaxed server never passes as the exact one."""
    engine = SGLang(RUNTIME)
    relaxed = replace(DDTREE, params={**DDTREE.params, THRESHOLD: 0.3})
    launch = engine.launch(DDTREE, python="python", listen_host="h", workdir=None, secrets={})
    with served(port, *engine.command(DDTREE)[0]) as url, httpx.Client() as client:
        caps = engine.negotiate(client, url, DDTREE, PROMPT, "m")
        bound = engine.bind(caps)
        assert bound.switchable(caps) == {THRESHOLD, "speculative_accept_threshold_acc"}
        bound.switch(client, url, relaxed)
        proof = bound.prove(client, url, launch, relaxed)
        with pytest.raises(
            EngineError, match=f"{THRESHOLD}: requested 1.0, its schedulers run 0.3"
        ):
            bound.prove(client, url, launch, DDTREE)
        wider = replace(relaxed, params={**relaxed.params, "budget": 24})
        with pytest.raises(EngineError, match="no switch reaches: speculative_ddtree_budget: "):
            bound.prove(client, url, launch, wider)  # a budget is a load, never a switch
    assert proof.info["server_args"][THRESHOLD] == 0.3
    assert f"its schedulers run speculative_accept_threshold_acc 1.0, {THRESHOLD} 0.3" in " ".join(
        proof.proven
    )


def test_a_build_without_the_handler_refuses_the_switch_in_one_line(port: int) -> None:
    """A build before `/set_internal_state` (404): negotiation finds no switchable knob, says
    why, and a switch is refused unsent, naming engine, build and key."""
    engine = SGLang(RUNTIME)
    relaxed = replace(DDTREE, params={**DDTREE.params, THRESHOLD: 0.3})
    env = {"FAKE_NO_SET_INTERNAL_STATE": "1"}
    with served(port, *SPEC_ARGS, env=env) as url, httpx.Client() as client:
        caps = engine.negotiate(client, url, DDTREE, PROMPT, "m")
        with pytest.raises(EngineError) as refused:
            engine.bind(caps).switch(client, url, relaxed)
    assert engine.switchable(caps) == frozenset()
    assert f"switch {THRESHOLD}: the build has no /set_internal_state (404): not switchable" in (
        caps.evidence
    )
    assert str(refused.value) == (
        f"sglang {fake_sglang.VERSION} (speculative) cannot switch {THRESHOLD} in place: "
        "negotiation found it not switchable (a load is needed)"
    )
