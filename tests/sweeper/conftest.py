"""Shared fixtures for the sweeper's tests: free loopback ports and the fake runtime's argv."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

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


@pytest.fixture
def port() -> int:
    return free_port()
