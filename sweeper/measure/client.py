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

A request asking `n` > 1 choices is timed once (its first token is the first of any choice) and
counts every choice's output tokens; its record holds choice 0's output beside `choices`, each
choice's output, which `choice_records` turns into one record per choice.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import orjson

from sweeper.engines.base import Engine, HttpRequest, RequestSpec
from sweeper.engines.capabilities import error_message
from sweeper.engines.stream import ChoiceOutput
from sweeper.measure.sse_http import StreamClient
from sweeper.results.records import EXPOSURE_COLUMNS

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
    outputs = fields.pop("choices")
    asked = spec.n or 1
    if error is None and _unasked(outputs, asked):
        error = f"asked {asked} choices, the stream carried choices {sorted(outputs)}"
    # A choice the stream never carried is recorded empty (the error above says why).
    choices = [_choice(outputs.get(i) or ChoiceOutput().fields()) for i in range(asked)]
    record = {
        "ttft": ttft,
        "itls": itls,
        "e2e": e2e,
        **fields,
        **choices[0],
        "output_tokens": sum(c["output_tokens"] for c in choices),
        "error": error or reader.usage_mismatch(),
    }
    if asked > 1:
        record["choices"] = choices
    return record


def _unasked(outputs: Mapping[int, Any], asked: int) -> bool:
    """Whether the stream carried other choices than the `asked` ones (0..asked-1); choice 0
    is always there (a stream that carried nothing says why through its usage or error)."""
    return set(outputs) | {0} != set(range(asked))


def _choice(output: Mapping[str, Any]) -> dict[str, Any]:
    """One choice's record fields (`ChoiceOutput.fields`) with its token count and hash."""
    ids = output["token_ids"]
    return {**output, "output_tokens": len(ids), "sha256": token_sha256(ids)}


#: What a request has once, on its choice-0 record: its timing, acceptance and exposure.
_REQUEST_ONLY: dict[str, Any] = {
    "ttft": None,
    "itls": [],
    "e2e": None,
    "tau": None,
    "verify_rounds": None,
    **dict.fromkeys(EXPOSURE_COLUMNS),
}


def choice_records(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One record per choice of a measured request (`choice` 0, 1, ...; n = 1: the record
    itself as choice 0), each with its choice's output; the request's timing, acceptance and
    exposure stay on choice 0 (`_REQUEST_ONLY`), so per-request numbers count it once."""
    choices = record.get("choices")
    shared = {k: v for k, v in record.items() if k != "choices"}
    if not choices:
        return [{**shared, "choice": 0}]
    return [
        {**shared, **(_REQUEST_ONLY if index else {}), **choice, "choice": index}
        for index, choice in enumerate(choices)
    ]
