"""A local port forwarded over an SSH connection: each connection accepted on a free loopback
port becomes a direct-tcpip channel to a target as the SSH server reaches it (its own loopback,
or a cluster's compute node from its login host).

An abort event closes every forwarded connection at once, and refuses new ones: a client waiting
on a machine that died (no RST ever comes) fails now instead of at its read timeout.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import paramiko

from sweeper.hosts import HostError

#: Opens one channel to (target, as seen from the SSH server) for a local peer.
OpenChannel = Callable[[tuple[str, int], tuple[str, int]], paramiko.Channel]


@contextmanager
def forwarded_port(
    open_channel: OpenChannel, name: str, target: tuple[str, int], abort: threading.Event
) -> Iterator[int]:
    """Listen on a free loopback port (yielded) until the block ends."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, peer = listener.accept()
            except OSError:
                return
            threading.Thread(
                target=_forward, args=(open_channel, conn, peer, target, (stop, abort)), daemon=True
            ).start()

    acceptor = threading.Thread(target=serve, name=name, daemon=True)
    acceptor.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        # close() alone does not wake a thread blocked in accept(); shutdown() does.
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        acceptor.join(timeout=2)


def _forward(
    open_channel: OpenChannel,
    conn: socket.socket,
    peer: tuple[str, int],
    target: tuple[str, int],
    stops: tuple[threading.Event, threading.Event],
) -> None:
    if any(event.is_set() for event in stops):
        conn.close()
        return
    try:
        channel = open_channel(target, peer)
    except (OSError, EOFError, paramiko.SSHException, HostError):
        conn.close()
        return
    try:
        while not any(event.is_set() for event in stops):
            readable, _, _ = select.select([conn, channel], [], [], 0.5)  # type: ignore[type-var]
            if conn in readable:
                data = conn.recv(65536)
                if not data:
                    break
                channel.sendall(data)
            if channel in readable:
                data = channel.recv(65536)
                if not data:
                    break
                conn.sendall(data)
    except (OSError, EOFError, paramiko.SSHException):
        pass
    finally:
        channel.close()
        conn.close()
