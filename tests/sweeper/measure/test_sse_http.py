"""The measurement transport against real loopback servers that send exactly the bytes a test
scripts: framing cut at every byte, keep-alive, closes, stalls and bad answers."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import httpx
import orjson
import pytest

from sweeper.engines.base import RequestSpec
from sweeper.engines.registry import engine_for
from sweeper.measure.client import decode_events, stream_request, token_sha256
from sweeper.measure.sse_http import SSEResponse, StreamClient
from sweeper.spec import RuntimeSpec
from tests.sweeper.conftest import free_port

#: What a scripted server writes for one request: byte strings, or a float to sleep that long,
#: or None to close the connection there.
Script = Sequence["bytes | float | None"]


@dataclass
class Scripted:
    """A loopback server answering the k-th request with scripts[k] (the last one repeats)."""

    scripts: list[Script]
    url: str = ""
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                self.requests.append(head + await reader.readexactly(length))
                script = self.scripts[min(len(self.requests), len(self.scripts)) - 1]
                for step in script:
                    if step is None:
                        writer.close()
                        return
                    if isinstance(step, float):
                        await asyncio.sleep(step)
                    else:
                        writer.write(step)
                        await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[Scripted]]]:
    """Start scripted servers on free loopback ports; all closed after the test."""
    servers: list[asyncio.Server] = []

    async def start(*scripts: Script) -> Scripted:
        scripted = Scripted(list(scripts))
        server = await asyncio.start_server(scripted.handle, "127.0.0.1", 0)
        servers.append(server)
        scripted.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return scripted

    yield start
    for server in servers:
        server.close()


def sse_head(extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" + extra


def chunked(*payloads: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + b"0\r\n\r\n"


EVENTS = [orjson.dumps({"choices": [{"text": f"w{i} ", "token_ids": [i]}]}) for i in range(5)]
SSE = b"".join(b"data: " + e + b"\n\n" for e in EVENTS) + b"data: [DONE]\n\n"


async def post(client: StreamClient, url: str) -> SSEResponse:
    return await client.post_sse(url + "/v1/completions", b'{"prompt":"p"}', {})


async def test_chunked_framing_cut_at_every_byte_gives_the_same_events(serve) -> None:
    body = sse_head(b"transfer-encoding: chunked\r\n\r\n") + chunked(SSE[:40], SSE[40:])
    whole = await serve([body])
    bytewise = await serve([bytes([b]) for b in body])
    async with StreamClient() as client:
        a, b = await post(client, whole.url), await post(client, bytewise.url)
    assert a.status == b.status == 200
    assert a.events == b.events == [*EVENTS, b"[DONE]"]
    assert len(b.times) == len(b.events) and b.times == sorted(b.times)


async def test_sse_fields_line_ends_and_an_unterminated_last_event(serve) -> None:
    sse = (
        b": a comment\r\n\r\n"
        b'event: message\r\ndata: {"a":\r\ndata:1}\r\n\r\n'
        b'data: {"b": 2}\r\rid: 7\ndata:{"c":3}'
    )
    body = sse_head(b"transfer-encoding: chunked\r\n\r\n")
    body += b"5;ext=1\r\n" + sse[:5] + b"\r\n" + chunked(sse[5:])[:-2] + b"x-trailer: 1\r\n\r\n"
    scripted = await serve([body])
    async with StreamClient() as client:
        resp = await post(client, scripted.url)
    assert resp.events == [b'{"a":\n1}', b'{"b": 2}', b'{"c":3}']
    assert [orjson.loads(e) for e in resp.events] == [{"a": 1}, {"b": 2}, {"c": 3}]


async def test_content_length_and_read_to_close_bodies(serve) -> None:
    sized = await serve([sse_head(b"content-length: %d\r\n\r\n" % len(SSE)) + SSE])
    closing = await serve([sse_head(b"\r\n") + SSE, None])
    async with StreamClient() as client:
        for scripted in (sized, closing):
            assert (await post(client, scripted.url)).events == [*EVENTS, b"[DONE]"]


async def test_keep_alive_reuses_one_connection_and_survives_an_idle_close(serve) -> None:
    body = sse_head(b"transfer-encoding: chunked\r\n\r\n") + chunked(SSE)
    kept = await serve([body])
    # The second server drops the kept connection when the next request comes on it, before
    # any answer (as a server whose idle timeout fired just then): the client retries that
    # request on a fresh connection. One that closed while idle is simply not reused.
    dropped = await serve([body], [None], [body, 0.05, None], [body])
    async with StreamClient() as client:
        for _ in range(3):
            assert len((await post(client, kept.url)).events) == 6
        for _ in range(2):
            assert len((await post(client, dropped.url)).events) == 6
        await asyncio.sleep(0.2)
        assert len((await post(client, dropped.url)).events) == 6
    assert kept.connections == 1 and len(kept.requests) == 3
    assert dropped.connections == 3 and len(dropped.requests) == 4


async def test_the_request_carries_the_body_headers_and_host(serve) -> None:
    scripted = await serve([sse_head(b"content-length: 0\r\n\r\n")])
    async with StreamClient() as client:
        await client.post_sse(scripted.url + "/v1/x?y=1", b'{"k":1}', {"Authorization": "Bearer t"})
        with pytest.raises(ValueError, match="line break"):
            await client.post_sse(scripted.url + "/v1/x", b"{}", {"X-A": "1\r\nX-B: 2"})
    request = scripted.requests[0]
    assert request.startswith(b"POST /v1/x?y=1 HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:" in request and b"\r\nAuthorization: Bearer t\r\n" in request
    assert request.endswith(b'\r\n\r\n{"k":1}') and b"Content-Length: 7\r\n" in request


async def test_event_times_are_their_arrivals(serve) -> None:
    body: list[bytes | float] = [sse_head(b"transfer-encoding: chunked\r\n\r\n")]
    for e in EVENTS[:3]:
        body += [chunked(b"data: " + e + b"\n\n")[:-5], 0.15]
    scripted = await serve([*body, b"0\r\n\r\n"])
    async with StreamClient() as client:
        sent = time.perf_counter()
        resp = await post(client, scripted.url)
    gaps = [b - a for a, b in zip([sent, *resp.times], resp.times, strict=False)]
    assert len(resp.times) == 3 and gaps[0] < 0.1
    assert all(0.12 < g < 0.5 for g in gaps[1:])
    assert resp.end >= resp.times[-1] + 0.12


async def test_failures_raise_httpx_errors_and_drop_the_connection(serve) -> None:
    cut = await serve([sse_head(b"transfer-encoding: chunked\r\n\r\n") + b"5\r\nda", None])
    stalled = await serve([sse_head(b"transfer-encoding: chunked\r\n\r\n"), 5.0])
    gzipped = await serve([sse_head(b"content-encoding: gzip\r\ncontent-length: 0\r\n\r\n")])
    garbage = await serve([b"SSH-2.0-OpenSSH\r\n\r\n"])
    async with StreamClient(timeout_s=0.3) as client:
        with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
            await post(client, cut.url)
        began = time.perf_counter()
        with pytest.raises(httpx.ReadTimeout):
            await post(client, stalled.url)
        assert time.perf_counter() - began < 2.0
        with pytest.raises(httpx.RemoteProtocolError, match="gzip"):
            await post(client, gzipped.url)
        with pytest.raises(httpx.RemoteProtocolError, match="not an HTTP"):
            await post(client, garbage.url)
        with pytest.raises(httpx.ConnectError):
            await post(client, f"http://127.0.0.1:{free_port()}")
        assert not any(client._idle.values())


async def test_a_connection_closed_as_it_opens_fails_at_once() -> None:
    """A tunnel whose node is lost (`SSHHost.open_tunnel`'s abort) accepts each connection in
    its own thread and closes it at once: the close arrives before the request is written. That
    request fails now, with the peer's close, instead of waiting out the read timeout (600 s in
    a sweep, where the point hung with no 'lost' line)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def close_at_once() -> None:
        with contextlib.suppress(OSError):
            while True:
                listener.accept()[0].close()

    threading.Thread(target=close_at_once, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        async with StreamClient(timeout_s=5.0) as client:
            for _ in range(3):
                began = time.perf_counter()
                with pytest.raises(httpx.RemoteProtocolError, match="closed"):
                    await post(client, url)
                assert time.perf_counter() - began < 2.0
            assert not any(client._idle.values())
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()


async def test_a_cancelled_request_closes_its_connection(serve) -> None:
    scripted = await serve([sse_head(b"transfer-encoding: chunked\r\n\r\n"), 5.0])
    async with StreamClient() as client:
        task = asyncio.create_task(post(client, scripted.url))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not any(client._idle.values())


def test_decode_events_stops_at_done_and_keeps_what_came_before_bad_json() -> None:
    assert decode_events([b'{"a":1}', b"[DONE]", b'{"b":2}']) == ([{"a": 1}], None)
    chunks, error = decode_events([b'{"a":1}', b"{nope", b'{"b":2}'])
    assert chunks == [{"a": 1}] and error is not None and error.startswith("JSONDecodeError")


async def test_a_record_from_a_stream_with_an_error_chunk_and_an_http_error(serve) -> None:
    engine = engine_for(RuntimeSpec())
    spec = RequestSpec(prompt_id="p", prompt="p", max_tokens=5, temperature=0.0)
    sse = SSE.replace(b"data: [DONE]", b'data: {"error": {"message": "engine died"}}')
    failing = await serve([sse_head(b"content-length: %d\r\n\r\n" % len(sse)) + sse])
    error = b'{"error": {"message": "bad temperature"}}'
    refused = await serve(
        [b"HTTP/1.1 400 Bad Request\r\ncontent-length: %d\r\n\r\n%s" % (len(error), error)]
    )
    async with StreamClient() as client:
        died = await stream_request(client, failing.url, spec, engine)
        bad = await stream_request(client, refused.url, spec, engine)
    assert died["error"] == "engine died" and died["token_ids"] == [0, 1, 2, 3, 4]
    assert died["sha256"] == token_sha256([0, 1, 2, 3, 4]) and len(died["itls"]) == 4
    assert bad["error"] == "HTTP 400: bad temperature" and bad["output_tokens"] == 0
