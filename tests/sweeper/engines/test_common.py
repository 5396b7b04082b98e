"""`get_json`, the proof read: a transport failure (a reset, as a dropped tunnel channel gives) is
tried again, an answer (an error status) is not. Against a real loopback socket server that resets
its first N connections."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from sweeper.engines import common
from sweeper.engines.base import EngineError, HttpRequest
from sweeper.engines.capabilities import probe
from sweeper.engines.common import get_json
from sweeper.engines.stream import ChunkReader


@pytest.fixture(autouse=True)
def short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "TRANSPORT_RETRY_S", (0.01, 0.01))


@contextmanager
def resetting_server(
    resets: int, status: int = 200, body: bytes = b'{"ok": true}', kind: bytes = b"application/json"
) -> Iterator[tuple[str, list[int]]]:
    """Resets its first `resets` connections (RST), then answers `body` with `status`."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen = [0]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                seen[0] += 1
                conn.recv(65536)
                if seen[0] <= resets:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    continue
                conn.sendall(
                    b"HTTP/1.1 %d X\r\nContent-Type: %s\r\n" % (status, kind)
                    + b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/server_info", seen
    finally:
        listener.close()


def test_a_reset_is_tried_again() -> None:
    with resetting_server(resets=2) as (url, seen), httpx.Client() as client:
        assert get_json(client, url) == {"ok": True}
        assert seen[0] == 3


def test_resets_on_every_try_fail_with_the_reason() -> None:
    with resetting_server(resets=10) as (url, seen), httpx.Client() as client:
        with pytest.raises(EngineError, match="unreadable"):
            get_json(client, url)
        assert seen[0] == 3


def test_an_error_status_fails_at_once() -> None:
    with resetting_server(resets=0, status=500) as (url, seen), httpx.Client() as client:
        with pytest.raises(EngineError, match="500"):
            get_json(client, url)
        assert seen[0] == 1


SSE = (
    b'data: {"choices": [{"index": 0, "text": "hi", "token_ids": [7]}]}\n\n'
    b'data: {"choices": [], "usage": {"completion_tokens": 1}}\n\ndata: [DONE]\n\n'
)


@pytest.mark.parametrize(("resets", "ok"), [(1, True), (2, False)])
def test_a_probe_reset_before_any_event_is_tried_once_more(resets: int, ok: bool) -> None:
    request = HttpRequest(path="/v1/completions", body={"prompt": "x"})
    server = resetting_server(resets, body=SSE, kind=b"text/event-stream")
    with server as (url, seen), httpx.Client() as client:
        result = probe(client, url.removesuffix("/server_info"), request, ChunkReader(False))
    assert result.ok is ok and seen[0] == 2
    if ok:
        assert result.reader is not None and result.reader.token_ids == [7]
    else:
        assert result.status is None and result.error  # the transport's failure, in words
