"""The async streaming client: one request in, one measured record out.

The engine writes the request (`Engine.request`) and reads its stream (`Engine.reader`); this
module times it. The transport (sweeper.measure.sse_http) stamps each SSE event with the time it
arrived and hands the whole stream over when it has ended; the events are then decoded in one
JSON call and fed, in order, to the engine's reader, which says which chunks carried tokens.
TTFT runs from sending the request to the arrival of the first chunk carrying tokens; ITLs are
the gaps between the arrivals of successive token-carrying chunks (a speculative step may
deliver several tokens in one chunk; the gap is recorded once per chunk, not split); e2e runs
to the arrival of the response's end, plus whatever follow-up the reader needed (recovering
ids), not the client's own decoding. `sha256` is
the hex sha256 of the decimal token ids joined by "," (e.g. "12,7,99"), UTF-8 encoded; an empty
output hashes the empty string.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

import httpx
import orjson

from sweeper.engines.base import Engine, HttpRequest, RequestSpec
from sweeper.engines.capabilities import error_message
from sweeper.measure.sse_http import StreamClient

DONE = b"[DONE]"


def token_sha256(token_ids: list[int]) -> str:
    """sha256 hex of the decimal ids joined by "," (the contract for comparing outputs)."""
    return hashlib.sha256(",".join(map(str, token_ids)).encode("utf-8")).hexdigest()


def decode_events(events: Sequence[bytes]) -> tuple[list[Any], str | None]:
    """The JSON chunks of a stream's events up to `[DONE]`, decoded in one call, and the error
    that cut them short (an event that is not JSON: the chunks before it are kept)."""
    n = len(events)
    if n and events[-1].strip() == DONE:
        n -= 1
    elif DONE in events:  # (a scan in C; the last event is where servers put it)
        n = events.index(DONE)
    try:
        return orjson.loads(b"[" + b",".join(events[:n]) + b"]"), None
    except orjson.JSONDecodeError:
        pass
    chunks = []
    for event in events[:n]:
        try:
            chunks.append(orjson.loads(event))
        except orjson.JSONDecodeError as exc:
            return chunks, f"JSONDecodeError: {exc}: {event[:200]!r}"
    raise AssertionError("the events decode one by one but not as an array")  # pragma: no cover


async def stream_request(
    client: StreamClient,
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
    try:
        body = orjson.dumps(request.body)
        resp = await client.post_sse(base_url + request.path, body, request.headers)
        if resp.status != 200:
            error = f"HTTP {resp.status}: {error_message(resp.body.decode('utf-8', 'replace'))}"
        else:
            chunks, error = decode_events(resp.events)
            last = sent
            feed = reader.feed
            for chunk, now in zip(chunks, resp.times, strict=False):  # chunks may stop early
                if not isinstance(chunk, dict):
                    error = f"ValueError: a stream chunk is not a JSON object: {chunk!r:.200}"
                    break
                if chunk.get("error"):
                    error = error_message(orjson.dumps(chunk).decode())
                    break
                if feed(chunk):
                    if ttft is None:
                        ttft = now - sent
                    else:
                        itls.append(now - last)
                    last = now
        e2e = resp.end - sent
        if error is None:
            before = time.perf_counter()
            await reader.finish(client.control, base_url, model)
            e2e += time.perf_counter() - before
    except (httpx.HTTPError, ValueError, TypeError) as exc:
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
