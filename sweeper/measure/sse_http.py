"""The measurement hot path's transport: HTTP/1.1 POSTs whose Server-Sent-Events stream is cut
into events, each stamped with the time it arrived, over raw asyncio connections.

Why not httpx here: httpx parses every chunk's framing in Python (h11) and wakes the reading
coroutine once per socket read; at tens of thousands of chunks a second that was the client's
whole CPU (issue 23). Here the event loop hands each read straight to `_Conn.data_received`,
which de-chunks it, splits it at blank lines (the SSE event boundary) and stamps the completed
events with one `perf_counter()`; nothing is decoded and no coroutine runs until the response
has ended, when the waiting request wakes once. JSON decoding and the engine's reader run then,
once per request (sweeper.measure.client). httpx stays for the control plane (health, proofs,
metrics, a reader's follow-up calls: `StreamClient.control`).

What it speaks: HTTP/1.1 with keep-alive (idle connections are pooled per host), bodies framed by
chunked transfer encoding, Content-Length or the connection's close; `http` and `https` (httpx's
default SSL context: the same trust store). SSE: events end at a blank line (LF, CRLF or CR line
ends); an event's data is its `data:` lines' values joined by LF, one leading space dropped;
other fields and comments are ignored; an unterminated last event is kept. No proxy, no
compression (none is asked for; a compressed answer is refused), no HTTP/2. Failures raise
httpx's exception types (`ConnectError`, `ReadTimeout`, `RemoteProtocolError`), so records name
them as before.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

#: A response head larger than this is refused (no real server sends one).
MAX_HEAD = 64 * 1024


@dataclass
class SSEResponse:
    """One response: its status, the body when it was not 200, and the SSE events of a 200."""

    status: int
    #: The raw body of a non-200 answer (for the error message); empty for a 200.
    body: bytes = b""
    #: Each event's data (its `data:` lines joined by LF, not yet decoded).
    events: list[bytes] = field(default_factory=list)
    #: `time.perf_counter()` when each event's end arrived (same length as `events`).
    times: list[float] = field(default_factory=list)
    #: `time.perf_counter()` when the response's last bytes arrived.
    end: float = 0.0


class _Conn(asyncio.Protocol):
    """One keep-alive connection, reading one response at a time (see the module doc)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.done: asyncio.Future[SSEResponse] | None = None
        self._reset()

    def _reset(self) -> None:
        """The state of one response."""
        self.response: SSEResponse | None = None
        self.head = b""
        self.head_done = False
        self.mode = "close"  # "chunked", "length" or "close"
        self.left = 0  # length: body bytes to come; chunked: bytes of the current chunk
        self.crlf = False  # chunked: a chunk's data was read, its CRLF is next
        self.trailer = False  # chunked: the last chunk was read, the trailer comes
        self.pending = b""  # chunked: an incomplete size line or CRLF
        self.tail = b""  # SSE: the unfinished event
        self.keep_alive = True
        #: perf_counter of the last bytes read (the events' stamp, the read timeout's clock).
        self.last = time.perf_counter()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # (uvloop's is no subclass)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.done is not None and not self.done.done():
            if self.mode == "close" and self.head_done:
                self._end()
            else:
                self._fail(
                    httpx.RemoteProtocolError(
                        "peer closed connection without sending complete message body"
                        + (f" ({exc})" if exc else "")
                    )
                )

    def eof_received(self) -> bool:
        return False  # close our side too; connection_lost ends or fails the response

    def data_received(self, data: bytes) -> None:
        self.last = time.perf_counter()
        if self.done is None or self.done.done():
            return  # nothing asked: a stray byte after a response; the conn is not reused
        try:
            if not self.head_done:
                self.head += data
                self._head()
            elif self.mode == "chunked":
                self._chunked(data)
            else:
                self._body(data)
        except (ValueError, httpx.RemoteProtocolError) as exc:
            self._fail(
                exc if isinstance(exc, httpx.HTTPError) else httpx.RemoteProtocolError(str(exc))
            )

    def start(self, done: asyncio.Future[SSEResponse], request: bytes) -> None:
        """Send `request` (head and body) and read its answer into `done`."""
        self._reset()
        self.done = done
        if self.closed or self.transport is None or self.transport.is_closing():
            # The peer closed before anything was asked (a tunnel whose node is lost accepts
            # and closes at once): `connection_lost` has already run with nothing to fail, so
            # fail now, or the request would wait out its read timeout for a dead connection.
            self._fail(httpx.RemoteProtocolError("peer closed the connection before the request"))
            return
        self.transport.write(request)

    def _head(self) -> None:
        end = self.head.find(b"\r\n\r\n")
        if end < 0:
            if len(self.head) > MAX_HEAD:
                raise httpx.RemoteProtocolError("response head too large")
            return
        head, rest = self.head[:end].decode("latin-1"), self.head[end + 4 :]
        lines = head.split("\r\n")
        version, _, status_text = lines[0].partition(" ")
        if not version.startswith("HTTP/1.") or not status_text[:3].isdigit():
            raise httpx.RemoteProtocolError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
        status = int(status_text[:3])
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            self.head = rest
            self._head()
            return
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding != "identity":
            raise httpx.RemoteProtocolError(f"compressed response ({encoding}) not asked for")
        connection = headers.get("connection", "").lower()
        self.keep_alive = version == "HTTP/1.1" and "close" not in connection
        self.response = SSEResponse(status)
        self.head_done = True
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.mode = "chunked"
        elif "content-length" in headers:
            self.mode, self.left = "length", int(headers["content-length"])
        else:
            self.mode, self.keep_alive = "close", False
        if self.mode == "length" and self.left == 0:
            self._end()
        elif rest:
            self._chunked(rest) if self.mode == "chunked" else self._body(rest)

    def _chunked(self, data: bytes) -> None:
        """De-chunk what arrived (whole chunks in one pass; a chunk split over reads is taken as
        it comes) and hand the payload on."""
        buf = self.pending + data if self.pending else data
        self.pending = b""
        pos, n = 0, len(buf)
        out: list[bytes] = []
        while pos < n:
            if self.trailer:  # trailer fields, then an empty line
                if buf.startswith(b"\r\n", pos):
                    self._payload(out)
                    self._end()
                    return
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    break
                pos = end + 2
            elif self.left:
                take = min(self.left, n - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self.left -= take
                self.crlf = not self.left
            elif self.crlf:
                if n - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise httpx.RemoteProtocolError("chunk data not followed by CRLF")
                pos += 2
                self.crlf = False
            else:
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    if n - pos > 1024:
                        raise httpx.RemoteProtocolError("chunk size line too long")
                    break
                size = int(buf[pos:end].split(b";", 1)[0], 16)
                pos = end + 2
                if size == 0:
                    self.trailer = True
                elif n - pos >= size + 2 and buf[pos + size : pos + size + 2] == b"\r\n":
                    out.append(buf[pos : pos + size])  # the common case: the whole chunk
                    pos += size + 2
                else:
                    self.left = size
        self.pending = buf[pos:]
        self._payload(out)

    def _body(self, data: bytes) -> None:
        """A Content-Length or read-to-close body."""
        if self.mode == "length":
            data = data[: self.left]
            self.left -= len(data)
        self._payload([data])
        if self.mode == "length" and self.left == 0:
            self._end()

    def _payload(self, parts: list[bytes]) -> None:
        """Body bytes: a non-200's body is kept whole; a 200's is cut into SSE events, each
        stamped with the time of this read."""
        if not parts:
            return
        response = self.response
        assert response is not None
        data = b"".join(parts)
        if response.status != 200:
            response.body += data
            return
        text = self.tail + data if self.tail else data
        if b"\r" in text:
            text = _lf_line_ends(text)
        blocks = text.split(b"\n\n")
        self.tail = blocks.pop()
        if blocks:
            response.events += blocks
            response.times += [self.last] * len(blocks)

    def _end(self) -> None:
        response = self.response
        assert response is not None and self.done is not None
        if self.tail.strip(b"\n") and response.status == 200:
            response.events.append(self.tail)  # an unterminated last event is kept
            response.times.append(self.last)
        self.tail = b""
        data = [_event_data(e) for e in response.events]
        if None in data:  # events without data (comments, keep-alives) are no chunks
            response.times = [t for d, t in zip(data, response.times, strict=True) if d is not None]
        response.events = [d for d in data if d is not None]
        response.end = self.last
        if not self.keep_alive and self.transport is not None:
            self.transport.close()
        self.done.set_result(response)

    def _fail(self, exc: Exception) -> None:
        if self.transport is not None:
            self.transport.abort()
        self.closed = True
        if self.done is not None and not self.done.done():
            self.done.set_exception(exc)

    def reusable(self) -> bool:
        return (
            not self.closed
            and self.keep_alive
            and self.transport is not None
            and not self.transport.is_closing()
        )


def _lf_line_ends(text: bytes) -> bytes:
    """CRLF and lone CR line ends as LF; a CR at the very end is kept (its LF may follow)."""
    text = text.replace(b"\r\n", b"\n")
    if text.endswith(b"\r"):
        return text[:-1].replace(b"\r", b"\n") + b"\r"
    return text.replace(b"\r", b"\n")


def _event_data(block: bytes) -> bytes | None:
    """An SSE event's data: its `data:` lines' values (one leading space dropped) joined by LF;
    None for an event without data (a comment, a keep-alive)."""
    if block.startswith(b"data: ") and b"\n" not in block:
        return block[6:]  # the common shape, one line
    values = []
    for line in block.split(b"\n"):
        if line == b"data" or line.startswith(b"data:"):
            value = line[5:]
            values.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(values) if values else None


class StreamClient:
    """Pooled HTTP/1.1 connections for streaming POSTs (see the module doc); `control` is an
    httpx client for everything else, built on first use."""

    def __init__(self, *, timeout_s: float = 600.0, connect_timeout_s: float = 10.0) -> None:
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._ssl: ssl.SSLContext | None = None
        #: An httpx client for a reader's follow-up calls (not the measured stream); built
        #: here, with the client, so that no request pays for it.
        self.control = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s)
        )

    async def __aenter__(self) -> StreamClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                if conn.transport is not None:
                    conn.transport.close()
        self._idle.clear()
        await self.control.aclose()

    async def post_sse(self, url: str, body: bytes, headers: dict[str, str]) -> SSEResponse:
        """POST `body` (JSON) to `url`; the answer once it has ended (see the module doc).
        Raises httpx's ConnectError, ReadTimeout or RemoteProtocolError."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise httpx.UnsupportedProtocol(f"cannot stream from {url!r}: http(s) URLs only")
        default = 443 if parts.scheme == "https" else 80
        key = (parts.scheme, parts.hostname, parts.port or default)
        host = parts.netloc.rpartition("@")[2]
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request = _request_head(target, host, body, headers) + body
        idle = self._idle.setdefault(key, [])
        while idle:
            conn = idle.pop()
            if not conn.reusable():
                continue
            try:
                return await self._exchange(conn, request, key)
            except httpx.RemoteProtocolError:
                # The server may close an idle connection as we reuse it: retry on a fresh one,
                # but only when nothing of an answer had come.
                if conn.response is not None:
                    raise
        return await self._exchange(await self._connect(key), request, key)

    async def _connect(self, key: tuple[str, str, int]) -> _Conn:
        scheme, hostname, port = key
        context = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()
            context = self._ssl
        loop = asyncio.get_running_loop()
        try:
            _transport, conn = await asyncio.wait_for(
                loop.create_connection(_Conn, hostname, port, ssl=context),
                self.connect_timeout_s,
            )
        except (OSError, asyncio.TimeoutError) as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return conn

    async def _exchange(
        self, conn: _Conn, request: bytes, key: tuple[str, str, int]
    ) -> SSEResponse:
        done: asyncio.Future[SSEResponse] = asyncio.get_running_loop().create_future()
        conn.start(done, request)
        try:
            while True:
                # The read timeout counts from the last bytes read, checked when it could
                # have passed: no timer is rearmed per read.
                wait = conn.last + self.timeout_s - time.perf_counter()
                if wait <= 0:
                    raise httpx.ReadTimeout(f"no data for {self.timeout_s:g} s")
                try:
                    response = await asyncio.wait_for(asyncio.shield(done), wait)
                    break
                except asyncio.TimeoutError:
                    continue
        except BaseException:
            conn._fail(httpx.RemoteProtocolError("request abandoned"))
            if done.done() and not done.cancelled():
                done.exception()  # retrieved: no "never retrieved" warning
            raise
        if conn.reusable():
            self._idle[key].append(conn)
        return response


def _request_head(target: str, host: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {target} HTTP/1.1", f"Host: {host}", "Content-Type: application/json"]
    lines += ["Accept: text/event-stream", f"Content-Length: {len(body)}"]
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0") or ":" in name:
            raise ValueError(f"header {name!r} holds a line break or a colon in its name")
        if name.lower() not in ("host", "content-length", "content-type"):
            lines.append(f"{name}: {value}")
        elif name.lower() == "content-type":
            lines[2] = f"Content-Type: {value}"
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
