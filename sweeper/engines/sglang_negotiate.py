"""What a running SGLang build gives, probed with one short request per path (see
`sweeper.engines.capabilities` for the vocabulary).

Paths, best first:
1. OpenAI routes with SGLang's id extensions (completions `return_token_ids`, chat
   `return_output_ids_in_sglext`, acceptance in `sglext.spec_tokens_details`): SGLang >= the
   PRs of July 2026. Older builds, PR #29907's among them, ignore the unknown fields and send
   text only.
2. Native streamed `/generate` with the prompt's token ids from the server's `/tokenize` (the
   same ids then go to every config and the baseline; a chat prompt is rendered by `/tokenize`'s
   `messages` as for a chat completion), or the prompt's text where `/tokenize` is missing
   (completions only: a chat prompt needs the server's template). Ids in `output_ids`,
   acceptance in `meta_info`.
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
from sweeper.engines.capabilities import Capabilities, ProbeResult, lacking, probe
from sweeper.engines.sglang_stream import SGLangReader


class _Writer(Protocol):
    def bind(self, capabilities: Capabilities | None) -> Any: ...
    def acceptance_counters(
        self, client: httpx.Client, base_url: str
    ) -> dict[str, float] | None: ...


def tokenize(
    client: httpx.Client, base_url: str, spec: RequestSpec, model: str | None
) -> list[int] | None:
    """The prompt's token ids from `/tokenize` (None where the build has none for it)."""
    body: dict[str, Any] = {"model": model} if model else {}
    if spec.chat:
        messages = spec.messages or ({"role": "user", "content": spec.prompt},)
        body["messages"] = [dict(m) for m in messages]
    else:
        body["prompt"] = spec.prompt
    try:
        resp = client.post(base_url + "/tokenize", json=body, timeout=30.0)
        tokens = resp.json().get("tokens") if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if isinstance(tokens, list) and tokens and all(isinstance(t, int) for t in tokens):
        return list(tokens)
    return None


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
        chosen = (openai, reader, got_margins, {})
    if chosen is None or (speculative and not chosen[1].acceptance):
        ids = tokenize(client, base_url, spec, model)
        evidence.append(
            f"/tokenize: {len(ids)} prompt ids" if ids else "/tokenize: no ids for this prompt"
        )
        if ids is not None or not spec.chat:
            details = {"prompt": "input_ids from /tokenize" if ids else "text"}
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
