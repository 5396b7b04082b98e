"""The /proc identity proof against real processes on this machine: the launched one passes;
another cmdline, another environment, a stranger sharing the port through SO_REUSEPORT, the
previous instance, or a dead process each fail with a reason that masks secrets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sweeper.hosts.local import LocalHost
from sweeper.services.identity import Listener, ProcessFacts, check_process, read_process

# Binds the port (SO_REUSEPORT when asked), optionally forks a child that inherits the socket,
# then waits; prints "ready" once listening.
SERVER = """
import os, socket, sys, time
port, reuse, fork = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3] == "1"
s = socket.socket()
if reuse:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", port))
s.listen()
if fork and os.fork() == 0:
    time.sleep(60)
    sys.exit(0)
print("ready", flush=True)
time.sleep(60)
"""
SECRET = "s3cret-value"


@contextmanager
def server(port: int, *, reuse: bool = False, fork: bool = False) -> Iterator[subprocess.Popen]:
    argv = [sys.executable, "-c", SERVER, str(port), "1" if reuse else "0", "1" if fork else "0"]
    env = {**os.environ, "NOTE": "hello", "TOKEN": SECRET}
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check(proc: subprocess.Popen, port: int, **over: object) -> list[str]:
    facts = read_process(LocalHost(), sys.executable, proc.pid, port, ["NOTE", "TOKEN"], ["TOKEN"])
    want: dict = {
        "argv": proc.args,
        "env": {"NOTE": "hello"},
        "secret_env": {"TOKEN": SECRET},
        "port": port,
    }
    return check_process(facts, **{**want, **over})


def _argv(proc: subprocess.Popen) -> list[str]:
    """The argv the server was started with (Popen.args is typed as any command form)."""
    assert isinstance(proc.args, list)
    return [str(arg) for arg in proc.args]


def test_the_launched_process_passes_and_its_children_may_hold_the_socket() -> None:
    port = _free_port()
    with server(port, fork=True) as proc:
        facts = read_process(LocalHost(), sys.executable, proc.pid, port, ["TOKEN"], ["TOKEN"])
        assert len(facts.tree) == 2 and facts.listeners[0].pids  # parent and child hold it
        assert SECRET not in str(facts)  # the secret travelled as a digest only
        assert _check(proc, port) == []


def test_another_cmdline_or_environment_fails_with_both_values_and_masks_secrets() -> None:
    port = _free_port()
    with server(port) as proc:
        problems = _check(
            proc,
            port,
            argv=[sys.executable, "-m", "ddtree_runtime", "serve"],
            env={"NOTE": "bye", "MISSING": "x"},
            secret_env={"TOKEN": "another-secret"},
        )
    text = "\n".join(problems)
    assert "cmdline differs: requested [" in text and "ddtree_runtime" in text
    assert "environment NOTE: requested 'bye', it has 'hello'" in text
    assert "environment MISSING: requested 'x', it is unset" in text
    assert "environment TOKEN: the secret is a different value in the process (masked)" in text
    assert SECRET not in text and "another-secret" not in text


def test_a_stranger_sharing_the_port_through_so_reuseport_fails() -> None:
    port = _free_port()
    with server(port, reuse=True) as ours, server(port, reuse=True) as stranger:
        problems = _check(ours, port)
    assert len(problems) == 1, problems
    assert f"port {port} is also held by pid {stranger.pid}" in problems[0]
    assert "SO_REUSEPORT" in problems[0]


def test_the_previous_instance_and_a_dead_process_fail() -> None:
    port = _free_port()
    with server(port) as proc:
        facts = read_process(LocalHost(), sys.executable, proc.pid, port, [], [])
        again = check_process(
            facts, argv=_argv(proc), env={}, secret_env={}, port=port, previous=facts
        )
        assert again == [f"the previous instance (pid {proc.pid}) is still the one running"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        gone = read_process(LocalHost(), sys.executable, proc.pid, port, [], [])
        if not gone.alive:
            break
        time.sleep(0.05)
    assert check_process(gone, argv=_argv(proc), env={}, secret_env={}, port=port) == [
        f"the launched process (pid {proc.pid}) is gone"
    ]


def test_nothing_on_the_port_fails() -> None:
    port, other = _free_port(), _free_port()
    with server(port) as proc:
        problems = _check(proc, other)
    assert problems == [f"nothing of pid {proc.pid}'s process tree listens on port {other}"]


def test_a_socket_whose_owner_is_invisible_fails_closed() -> None:
    """As a non-root user the probe cannot read other users' fds: such a socket is a failure."""
    facts = ProcessFacts(
        pid=10,
        alive=True,
        cmdline=("py",),
        env={},
        tree=(10,),
        listeners=(Listener("tcp", "0100007F:1F40", (10,)), Listener("tcp6", "00:1F40", ())),
    )
    problems = check_process(facts, argv=["py"], env={}, secret_env={}, port=8000)
    assert problems == [
        "a listening socket on port 8000 (00:1F40) has an owner this probe cannot see "
        "(another user's process?)"
    ]
