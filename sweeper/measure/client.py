"""The async streaming client: one request in, one measured record out.

The engine writes the request (`Engine.request`) and reads its stream (`Engine.reader`); this
module only times it. TTFT runs from sending the request to the first chunk carrying tokens;
ITLs are the gaps between successive token-carrying chunks (a speculative step may deliver
several tokens in one chunk; the gap is recorded once per chunk, not split). `sha256` is the hex
sha256 of the decimal token ids joined by "," (e.g. "12,7,99"), UTF-8 encoded; an empty output
hashes the empty string.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import httpx

from sweeper.engines.base import Engine, HttpRequest, RequestSpec
from sweeper.engines.capabilities import error_message


def token_sha256(token_ids: list[int]) -> str:
    """sha256 hex of the decimal ids joined by "," (the contract for comparing outputs)."""
    return hashlib.sha256(",".join(str(t) for t in token_ids).encode("utf-8")).hexdigest()


async def stream_request(
    client: httpx.AsyncClient,
    base_url: str,
    spec: RequestSpec,
    engine: Engine,
    *,
    model: str | None = None,
    request: HttpRequest | None = None,
) -> dict[str, Any]:
    """Send one streaming request; return its measured fields (never raises for HTTP trouble).

    `request` is the request as the engine wrote it elsewhere (the load client's parent, whose
    engine learned the server's kind while proving it); by default the engine writes it here.
    """
    request = request if request is not None else engine.request(spec, model)
    reader = engine.reader(spec)
    itls: list[float] = []
    ttft: float | None = None
    error: str | None = None
    sent = time.perf_counter()
    last = sent
    try:
        async with client.stream(
            "POST", base_url + request.path, json=request.body, headers=request.headers
        ) as resp:
            if resp.status_code != 200:
                raw = (await resp.aread()).decode("utf-8", "replace")
                error = f"HTTP {resp.status_code}: {error_message(raw)}"
            else:
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if chunk.get("error"):
                        error = error_message(data)
                        break
                    if reader.feed(chunk):
                        now = time.perf_counter()
                        if ttft is None:
                            ttft = now - sent
                        else:
                            itls.append(now - last)
                        last = now
        if error is None:
            await reader.finish(client, base_url, model)
    except (httpx.HTTPError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    e2e = time.perf_counter() - sent
    fields = reader.fields()
    error = error or reader.usage_mismatch()
    return {
        "ttft": ttft,
        "itls": itls,
        "e2e": e2e,
        "output_tokens": len(fields["token_ids"]),
        **fields,
        "sha256": token_sha256(fields["token_ids"]),
        "error": error,
    }
