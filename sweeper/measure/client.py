"""The async streaming OpenAI client: one request in, one measured record out.

Every request streams (SSE) with `return_token_ids`, `stream_options.include_usage` and, at
temperature 0, two top logprobs per token so near-ties can be told from bugs. Timing: TTFT is
from sending the request to the first chunk carrying tokens; ITLs are the gaps between
successive token-carrying chunks (a speculative step may deliver several tokens in one chunk;
the gap is recorded once per chunk, not split). `sha256` is the hex sha256 of the decimal token
ids joined by "," (e.g. "12,7,99"), UTF-8 encoded; an empty output hashes the empty string.
A margin is NaN where fewer than two alternatives came back: the legacy completions format keys
`top_logprobs` by token text, so two tokens that decode alike collapse into one entry (the chat
format lists them, so prefer `api: chat` when near ties matter).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: which prompt, how to sample, which repeat."""

    prompt_id: str
    prompt: str
    max_tokens: int
    temperature: float
    seed: int | None = None
    repeat: int = 0
    chat: bool = False
    top_p: float | None = None
    #: Chat messages ({"role", "content"}); when absent, `prompt` is one user message.
    messages: tuple[dict[str, str], ...] | None = None


def token_sha256(token_ids: list[int]) -> str:
    """sha256 hex of the decimal ids joined by "," (the contract for comparing outputs)."""
    return hashlib.sha256(",".join(str(t) for t in token_ids).encode("utf-8")).hexdigest()


def request_body(spec: RequestSpec, model: str | None = None) -> dict[str, Any]:
    """The JSON body for /v1/completions or /v1/chat/completions."""
    body: dict[str, Any] = {
        "max_tokens": spec.max_tokens,
        "temperature": spec.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
    }
    if model:
        body["model"] = model
    if spec.seed is not None:
        body["seed"] = spec.seed
    if spec.top_p is not None:
        body["top_p"] = spec.top_p
    if spec.chat:
        body["messages"] = (
            list(spec.messages) if spec.messages else [{"role": "user", "content": spec.prompt}]
        )
        if spec.temperature == 0:
            body["logprobs"] = True
            body["top_logprobs"] = 2
    else:
        body["prompt"] = spec.prompt
        if spec.temperature == 0:
            body["logprobs"] = 2
    return body


def _margins(choice: dict[str, Any], chat: bool) -> list[float]:
    """Top-1 minus top-2 logprob for each token in this chunk (NaN when only one is given)."""
    lp = choice.get("logprobs") or {}
    tops: list[list[float]] = []
    if chat:
        for entry in lp.get("content") or []:
            tops.append([t["logprob"] for t in entry.get("top_logprobs") or []])
    else:
        for entry in lp.get("top_logprobs") or []:
            tops.append(list((entry or {}).values()))
    out = []
    for values in tops:
        ranked = sorted(values, reverse=True)
        out.append(ranked[0] - ranked[1] if len(ranked) >= 2 else float("nan"))
    return out


async def stream_request(
    client: httpx.AsyncClient, base_url: str, spec: RequestSpec, *, model: str | None = None
) -> dict[str, Any]:
    """Send one streaming request; return its measured fields (never raises for HTTP trouble)."""
    path = "/v1/chat/completions" if spec.chat else "/v1/completions"
    ids: list[int] = []
    texts: list[str] = []
    margins: list[float] = []
    itls: list[float] = []
    finish: str | None = None
    ddtree: dict[str, Any] = {}
    usage: dict[str, Any] = {}
    ttft: float | None = None
    error: str | None = None
    sent = time.perf_counter()
    last = sent
    try:
        async with client.stream("POST", base_url + path, json=request_body(spec, model)) as resp:
            if resp.status_code != 200:
                raw = (await resp.aread()).decode("utf-8", "replace")
                try:
                    message = json.loads(raw)["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    message = raw[:500]
                error = f"HTTP {resp.status_code}: {message}"
            else:
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if chunk.get("error"):
                        error = str(chunk["error"].get("message", chunk["error"]))
                        break
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                        ddtree = chunk.get("ddtree") or {}
                    for choice in chunk.get("choices") or []:
                        got = choice.get("token_ids") or []
                        if got:
                            now = time.perf_counter()
                            if ttft is None:
                                ttft = now - sent
                            else:
                                itls.append(now - last)
                            last = now
                            ids.extend(int(t) for t in got)
                        if spec.chat:
                            texts.append((choice.get("delta") or {}).get("content") or "")
                        else:
                            texts.append(choice.get("text") or "")
                        margins.extend(_margins(choice, spec.chat))
                        finish = choice.get("finish_reason") or finish
    except (httpx.HTTPError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    e2e = time.perf_counter() - sent
    if error is None and usage.get("completion_tokens") not in (None, len(ids)):
        error = f"usage says {usage['completion_tokens']} tokens, stream carried {len(ids)}"
    return {
        "ttft": ttft,
        "itls": itls,
        "e2e": e2e,
        "output_tokens": len(ids),
        "token_ids": ids,
        "text": "".join(t for t in texts if t),
        "finish_reason": finish,
        "tau": ddtree.get("tau"),
        "verify_rounds": ddtree.get("verify_rounds"),
        "sha256": token_sha256(ids),
        "top2_margins": margins,
        "error": error,
    }
