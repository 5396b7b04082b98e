"""Shared fixtures for the sweeper's tests: free loopback ports, the fake runtime's argv and
a fake server started until healthy."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from sweeper.poll import wait_until

FAKE_RUNTIME = Path(__file__).with_name("fake_runtime.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fake_argv(port: int, launch_id: str, *flags: str) -> tuple[str, ...]:
    """The fake runtime's command, shaped like `python -m ddtree_runtime serve ...`."""
    return (
        sys.executable,
        str(FAKE_RUNTIME),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--launch-id",
        launch_id,
        *flags,
    )


@contextmanager
def serving(argv: Sequence[str], port: int, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """A fake server started from `argv` (no start delay), its URL once /health answers 200;
    terminated on exit."""
    proc = subprocess.Popen(list(argv), env={**os.environ, **(env or {}), "FAKE_START_DELAY": "0"})
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(url + "/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, timeout_s=30, interval_s=0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def port() -> int:
    return free_port()
