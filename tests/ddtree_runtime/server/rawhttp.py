"""HTTP over a bare socket, for what httpx hides: a request head without its body, a body that
never ends, and a server that answers before it has read the body."""

from __future__ import annotations

import itertools
import json
import select
import socket
from collections.abc import Iterable
from typing import Any, BinaryIO

#: How long the server may stay silent before the exchange fails.
SILENCE_S = 30.0


def raw_post(
    port: int, path: str, pieces: Iterable[bytes], length: int | None, end: bool = True
) -> tuple[int, dict[str, Any]]:
    """POST to 127.0.0.1:`port` as a client that says `Expect: 100-continue` (curl does, for big
    bodies): the body goes only once the server asks for it, as `pieces` (`length` None: chunked,
    ended only if `end`), and sending stops as soon as the server answers. Returns the status
    and the JSON body."""
    framing = f"content-length: {length}" if length is not None else "transfer-encoding: chunked"
    head = f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    head += f"expect: 100-continue\r\n{framing}\r\n\r\n"
    if length is None:
        chunks = (f"{len(piece):x}\r\n".encode() + piece + b"\r\n" for piece in pieces)
        pieces = itertools.chain(chunks, [b"0\r\n\r\n"] if end else [])
    with socket.create_connection(("127.0.0.1", port), timeout=SILENCE_S) as sock:
        reader = sock.makefile("rb")
        sock.sendall(head.encode())
        status, body = read_response(reader)
        unsent = iter(pieces)
        pending: bytes | None = b""
        while status == 100:
            sending = [sock] if pending is not None else []
            readable, writable, _ = select.select([sock], sending, [], SILENCE_S)
            if readable:
                status, body = read_response(reader)
            elif not writable:
                raise TimeoutError(f"no answer from the server in {SILENCE_S} s")
            else:
                pending = pending or next(unsent, None)
                if pending is not None:
                    pending = pending[sock.send(pending) :]
    return status, json.loads(body)


def read_response(reader: BinaryIO) -> tuple[int, bytes]:
    """One response's status and body (its content-length's worth)."""
    status = int(reader.readline().split()[1])
    headers = {}
    while line := reader.readline().strip():
        name, _, value = line.decode().partition(":")
        headers[name.lower()] = value.strip()
    return status, reader.read(int(headers.get("content-length", 0)))
