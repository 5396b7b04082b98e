"""What a running SGLang build gives, probed with one short request per path (see
`sweeper.engines.capabilities` for the vocabulary).

Paths, best first:
1. OpenAI routes with SGLang's id extensions (completions `return_token_ids`, chat
   `return_output_ids_in_sglext`, acceptance in `sglext.spec_tokens_details`): SGLang >= the
   PRs of July 2026. Older builds, PR #29907's among them, ignore the unknown fields and send
   text only.
2. Native streamed `/generate`, ids in `output_ids`, acceptance in `meta_info`. The prompt
   (`prompt_source`, named in `capabilities.details.prompt`), best first: its token ids from the
   server's `/tokenize` (a chat prompt rendered by `/tokenize`'s `messages` as for a chat
   completion); a chat prompt's ids from the chat route itself (a non-streamed one-token
   completion with `return_prompt_token_ids`, SGLang >= PR #19731 of March 2026: the model's
   own template without `/tokenize`); else its text: a completions prompt as written, a chat
   prompt as plain `role: content` lines (`plain_chat_text`: not the model's template, so its
   acceptance is not that of chat use). Ids are fetched once per run by the first server asked
   (the AR baseline) and text is the same string everywhere, so every config and the baseline
   get the same prompt and are judged on the output's token ids alike.
A path is taken when it gives ids and, on a speculative server, acceptance; else the first that
gives ids, with acceptance from `/metrics` (`sglang:spec_verify_calls_total`,
`sglang:generation_tokens_total`, with `--enable-metrics`) when its streams carry none.

Margins: only an AR server is asked for logprobs (PR #29907 refuses them on DDTREE requests in
the scheduler); one that refuses them is measured without (`margins: none`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

import httpx

from sweeper.engines.base import HttpRequest, RequestSpec
from sweeper.engines.capabilities import (
    PROBE_TIMEOUT_S,
    Capabilities,
    ProbeResult,
    lacking,
    probe,
)
from sweeper.engines.sglang_stream import SGLangReader
from sweeper.results.manifest import (
    PROMPT_CHAT_ROUTE,
    PROMPT_MESSAGES,
    PROMPT_PLAIN_CHAT,
    PROMPT_TEXT,
    PROMPT_TOKENIZE,
)

#: Where a native server fetches prompt ids (`capabilities.details`): the base URL of the
#: server that gave them in negotiation.
PROMPT_IDS_AT = "prompt_ids_at"


class _Writer(Protocol):
    def bind(self, capabilities: Capabilities | None) -> Any: ...
    def acceptance_counters(
        self, client: httpx.Client, base_url: str
    ) -> dict[str, float] | None: ...


def chat_messages(spec: RequestSpec) -> list[dict[str, str]]:
    """A chat prompt's messages (its text as one user message where it has none)."""
    messages = spec.messages or ({"role": "user", "content": spec.prompt},)
    return [dict(m) for m in messages]


def plain_chat_text(spec: RequestSpec) -> str:
    """A chat prompt as plain text, for a build that renders no template for the sweeper:
    `role: content` lines, then `assistant:` (the bundled runtime's rendering for a tokenizer
    without a template). The same string for every config; not the model's chat template."""
    return "".join(f"{m['role']}: {m['content']}\n" for m in chat_messages(spec)) + "assistant:"


def _ids(tokens: Any) -> list[int] | None:
    if isinstance(tokens, list) and tokens and all(isinstance(t, int) for t in tokens):
        return list(tokens)
    return None


def tokenize(
    client: httpx.Client, base_url: str, spec: RequestSpec, model: str | None
) -> list[int] | None:
    """The prompt's token ids from `/tokenize` (None where the build has none for it)."""
    body: dict[str, Any] = {"model": model} if model else {}
    if spec.chat:
        body["messages"] = chat_messages(spec)
    else:
        body["prompt"] = spec.prompt
    try:
        resp = client.post(base_url + "/tokenize", json=body, timeout=30.0)
        return _ids(resp.json().get("tokens")) if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None


def chat_route_ids(
    client: httpx.Client, base_url: str, spec: RequestSpec, model: str | None
) -> list[int] | None:
    """A chat prompt's token ids as the chat route renders and tokenizes it: a non-streamed
    one-token greedy completion with `return_prompt_token_ids` (SGLang >= PR #19731; older
    builds ignore the field and send none: None)."""
    body: dict[str, Any] = {"messages": chat_messages(spec), "max_tokens": 1, "temperature": 0.0}
    body.update(stream=False, return_prompt_token_ids=True)
    if model:
        body["model"] = model
    try:
        resp = client.post(base_url + "/v1/chat/completions", json=body, timeout=PROBE_TIMEOUT_S)
        choices = resp.json().get("choices") if resp.status_code == 200 else None
        return _ids(choices[0].get("prompt_token_ids")) if choices else None
    except (httpx.HTTPError, ValueError, AttributeError, TypeError, KeyError, IndexError):
        return None


def prompt_ids(
    client: httpx.Client, base_url: str, spec: RequestSpec, model: str | None, source: str
) -> list[int] | None:
    """The prompt's ids from the negotiated `source` (`PROMPT_TOKENIZE`, `PROMPT_CHAT_ROUTE`)."""
    if source == PROMPT_CHAT_ROUTE:
        return chat_route_ids(client, base_url, spec, model)
    return tokenize(client, base_url, spec, model)


def prompt_source(
    client: httpx.Client,
    base_url: str,
    spec: RequestSpec,
    model: str | None,
    evidence: list[str],
) -> str:
    """How the native path sends this workload's prompts (module docstring), best first."""
    ids = tokenize(client, base_url, spec, model)
    evidence.append(f"/tokenize: {len(ids)} prompt ids" if ids else "/tokenize: no ids")
    if ids:
        return PROMPT_TOKENIZE
    if not spec.chat:
        evidence.append("prompts go to /generate as text: every config gets the same string")
        return PROMPT_TEXT
    ids = chat_route_ids(client, base_url, spec, model)
    said = f"{len(ids)} prompt ids" if ids else "no prompt ids"
    evidence.append(f"/v1/chat/completions return_prompt_token_ids: {said}")
    if ids:
        return PROMPT_CHAT_ROUTE
    evidence.append(
        "chat prompts go to /generate as plain 'role: content' text, the same for every "
        "config: not the model's chat template, so acceptance is not that of chat use"
    )
    return PROMPT_PLAIN_CHAT


def _said(result: ProbeResult) -> str:
    if result.error is not None:
        status = f"HTTP {result.status}" if result.status else "no answer"
        return f"{status}: {result.error}"
    reader = result.reader
    assert reader is not None
    parts = [f"{len(reader.token_ids)} ids" if reader.saw_ids else "no ids"]
    parts.append("acceptance per request" if reader.acceptance else "no acceptance")
    margins = [m for m in reader.margins if m == m]
    parts.append("top-2 logprobs" if margins else "no logprobs")
    return ", ".join(parts)


def _try(
    engine: _Writer,
    client: httpx.Client,
    base_url: str,
    spec: RequestSpec,
    model: str | None,
    caps: Capabilities,
    evidence: list[str],
    name: str,
) -> tuple[ProbeResult, bool]:
    """One path's probe (again without logprobs if an AR server refused them); the result and
    whether margins came back."""
    bound = engine.bind(caps)
    request: HttpRequest = bound.request(spec, model)
    result: ProbeResult = probe(client, base_url, request, SGLangReader(spec.chat))
    evidence.append(f"{name} {request.path}: {_said(result)}")
    if caps.margins == "logprobs" and not result.ok:
        caps = replace(caps, margins="none")
        request = engine.bind(caps).request(spec, model)
        result = probe(client, base_url, request, SGLangReader(spec.chat))
        evidence.append(f"{name} {request.path} without logprobs: {_said(result)}")
        return result, False
    margins = bool(result.ok and result.reader and [m for m in result.reader.margins if m == m])
    return result, margins


def _ids_reader(result: ProbeResult) -> SGLangReader | None:
    """The probe's reader when the answer carried ids."""
    reader = result.reader
    if result.ok and isinstance(reader, SGLangReader) and reader.saw_ids:
        return reader
    return None


def negotiate_sglang(
    engine: _Writer,
    client: httpx.Client,
    base_url: str,
    speculative: bool,
    spec: RequestSpec,
    model: str | None,
) -> Capabilities:
    """The paths this build gives (module docstring); CapabilityError when no path gives ids."""
    spec = replace(spec, temperature=0.0, seed=None, top_p=None)
    margins = "baseline" if speculative else "logprobs"
    acceptance = "requests" if speculative else "not needed"
    evidence: list[str] = []
    openai = "sglext" if spec.chat else "openai"
    first = Capabilities(openai, acceptance, margins)
    result, got_margins = _try(engine, client, base_url, spec, model, first, evidence, "OpenAI")
    # (path, the reader of its probe, margins came back, details), best so far.
    chosen: tuple[str, SGLangReader, bool, dict[str, Any]] | None = None
    reader = _ids_reader(result)
    if reader is not None:
        chosen = (
            openai,
            reader,
            got_margins,
            {"prompt": PROMPT_MESSAGES if spec.chat else PROMPT_TEXT},
        )
    if chosen is None or (speculative and not chosen[1].acceptance):
        details: dict[str, Any] = {"prompt": prompt_source(client, base_url, spec, model, evidence)}
        if details["prompt"] in (PROMPT_TOKENIZE, PROMPT_CHAT_ROUTE):
            details[PROMPT_IDS_AT] = base_url
        native = Capabilities("native", acceptance, margins, details=details)
        got, got_native_margins = _try(
            engine, client, base_url, spec, model, native, evidence, "native"
        )
        reader = _ids_reader(got)
        if reader is not None and (chosen is None or reader.acceptance):
            details["streaming"] = reader.streaming or "cumulative"
            chosen = ("native", reader, got_native_margins, details)
    if chosen is None:
        raise lacking(
            "token ids",
            [*evidence, "no OpenAI token_ids or sglext ids, no /generate output_ids"],
        )
    path, reader, got_margins, details = chosen
    if speculative and not reader.acceptance:
        counters = engine.acceptance_counters(client, base_url)
        if counters:
            acceptance = "metrics"
            evidence.append("/metrics: " + ", ".join(sorted(counters)))
        else:
            acceptance = "none"
            evidence.append("/metrics: no speculative counters (is --enable-metrics on?)")
    if not speculative:
        margins = "logprobs" if got_margins else "none"
    return Capabilities(path, acceptance, margins, tuple(evidence), details)
