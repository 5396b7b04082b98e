"""A minimal raw-asyncio OpenAI-style streaming server for load tests and the loadgen bench.

Not uvicorn (which is itself the bottleneck at these rates): an asyncio.Protocol speaking
HTTP/1.1 keep-alive with chunked transfer encoding, streaming `max_tokens` one-token SSE events
per request (`max_tokens`, or `max_completion_tokens` as newer chat clients send it), then the
finish event with `usage`, then `data: [DONE]`. Flags pace it: `--first-delay S` before the
first token, `--token-delay S` between tokens (0: as fast as the socket takes them). Each event
is its own HTTP chunk, as uvicorn/starlette stream them. It counts requests in flight exactly
(from the parsed request to the last byte written) and serves them as JSON on GET /stats: the
peak, the requests served and the token chunks they carried, and the seconds spent at each
in-flight level since the last POST /reset. (When the client reads slower than it writes, the
socket buffers hold the rest of a response, so the server's count then runs below the
client's.)

    python tests/sweeper/measure/sse_server.py --port 0   # prints "READY <port>"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence

TOKEN_ID = 7
BATCH = 32  # events per socket write when unpaced
_COMPLETION_EVENT = (
    b'data: {"choices":[{"index":0,"text":" t","token_ids":[7],"finish_reason":null}]}\n\n'
)
_CHAT_EVENT = (
    b'data: {"choices":[{"index":0,"delta":{"content":" t"},"token_ids":[7],'
    b'"finish_reason":null}]}\n\n'
)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Counter:
    """Requests in flight, their peak, and the time spent at each level."""

    def __init__(self) -> None:
        self.level = 0
        self.reset()

    def reset(self) -> None:
        self.peak = self.level
        self.served = 0
        self.chunks = 0
        self.time_at: dict[int, float] = {}
        self.last = time.monotonic()

    def step(self, delta: int) -> None:
        now = time.monotonic()
        self.time_at[self.level] = self.time_at.get(self.level, 0.0) + now - self.last
        self.last = now
        self.level += delta
        self.peak = max(self.peak, self.level)
        if delta < 0:
            self.served += 1

    def as_json(self) -> dict:
        self.step(0)
        return {
            "in_flight": self.level,
            "peak": self.peak,
            "served": self.served,
            "chunks": self.chunks,
            "time_at": {str(k): v for k, v in sorted(self.time_at.items())},
        }


class Conn(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.buf = bytearray()
        self.busy = False
        self.writable = asyncio.Event()
        self.writable.set()
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.writable.set()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._next()

    def _next(self) -> None:
        if self.busy:
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        method, path, _ = head[0].split(" ", 2)
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if len(self.buf) < end + 4 + length:
            return
        body = bytes(self.buf[end + 4 : end + 4 + length])
        del self.buf[: end + 4 + length]
        self.busy = True
        asyncio.get_running_loop().create_task(self._handle(method, path, body))

    async def _handle(self, method: str, path: str, body: bytes) -> None:
        try:
            if path.startswith("/v1/") and method == "POST":
                await self._stream(json.loads(body or b"{}"), chat="chat" in path)
            elif path == "/stats":
                self._json(self.server.counter.as_json())
            elif path == "/reset" and method == "POST":
                self.server.counter.reset()
                self._json({"ok": True})
            else:
                self._json({"ok": True})
        finally:
            self.busy = False
            if not self.closed:
                self._next()

    def _json(self, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
        )

    async def _write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionError("client went away")
        self.transport.write(data)
        if not self.writable.is_set():
            await self.writable.wait()

    async def _stream(self, req: dict, *, chat: bool) -> None:
        n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        s = self.server
        s.counter.step(+1)
        try:
            await self._write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            if s.first_delay:
                await asyncio.sleep(s.first_delay)
            event = _CHAT_EVENT if chat else _COMPLETION_EVENT
            if s.token_delay:
                for k in range(n):
                    if k:
                        await asyncio.sleep(s.token_delay)
                    await self._write(_chunk(event))
            else:
                # One HTTP chunk per event, as a real server's StreamingResponse writes them;
                # BATCH of them per socket write, then a turn of the loop for the others.
                full = _chunk(event) * BATCH
                for _ in range(n // BATCH):
                    await self._write(full)
                    await asyncio.sleep(0)
                if n % BATCH:
                    await self._write(_chunk(event) * (n % BATCH))
            usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
            final = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}
            tail = b"data: %s\n\ndata: [DONE]\n\n" % json.dumps({**final, "usage": usage}).encode()
            await self._write(_chunk(tail) + b"0\r\n\r\n")
            s.counter.chunks += n
        except ConnectionError:
            pass
        finally:
            s.counter.step(-1)


class Server:
    def __init__(self, first_delay: float, token_delay: float) -> None:
        self.first_delay = first_delay
        self.token_delay = token_delay
        self.counter = Counter()

    async def serve(self, port: int) -> None:
        loop = asyncio.get_running_loop()
        srv = await loop.create_server(lambda: Conn(self), "127.0.0.1", port, backlog=1024)
        print(f"READY {srv.sockets[0].getsockname()[1]}", flush=True)
        async with srv:
            await srv.serve_forever()


def start_server(
    *, first_delay: float = 0.0, token_delay: float = 0.0, cpus: set[int] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """Start the server in its own process (optionally pinned to `cpus`); (process, base URL)."""
    argv: Sequence[str] = [
        sys.executable,
        __file__,
        "--port",
        "0",
        "--first-delay",
        str(first_delay),
        "--token-delay",
        str(token_delay),
    ]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"sse_server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--first-delay", type=float, default=0.0)
    parser.add_argument("--token-delay", type=float, default=0.0)
    args = parser.parse_args()
    asyncio.run(Server(args.first_delay, args.token_delay).serve(args.port))


if __name__ == "__main__":
    main()
