"""A sender that sends nothing: it echoes its payload's "k", or raises when asked to (tests)."""

from __future__ import annotations

from typing import Any

from sweeper.measure.sse_http import StreamClient


async def echo_sender(client: StreamClient, base_url: str, payload: dict) -> dict[str, Any]:
    if payload.get("boom"):
        raise RuntimeError("boom")
    return {"echo": payload["k"], "error": None, "index": "not the sender's to set"}
