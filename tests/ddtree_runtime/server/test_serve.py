"""Server start-up and shutdown as a process: bad flags, missing model, SIGTERM, and a fingerprint
that is stable across restarts and changes with output-relevant flags."""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from ddtree_runtime.server.local_server import SERVE_COMMAND, LocalServer

pytestmark = pytest.mark.slow

BASE = ["--model", "tiny-random", "--max-model-len", "512"]


def run_serve(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVE_COMMAND, *flags], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    "flags",
    [
        ["--budget", "-1"],
        ["--block-size", "1"],
        ["--speculative", "maybe"],
        ["--port", "eighty"],
        ["--no-such-flag"],
    ],
)
def test_bad_flag_is_one_line_and_exit_2(flags: list[str]) -> None:
    result = run_serve(*flags)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_bad_draft_spec_is_one_line_and_exit_2() -> None:
    result = run_serve("--model", "tiny-random", "--draft", "telepathy", "--port", "1")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "telepathy" in result.stderr.strip().splitlines()[-1]


def test_missing_model_is_one_line_and_exit_2() -> None:
    started = time.monotonic()
    result = run_serve("--model", "/nonexistent/model-dir", "--port", "1")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "/nonexistent/model-dir" in result.stderr.strip().splitlines()[-1]
    assert time.monotonic() - started < 60


def server_info(server: LocalServer) -> dict[str, Any]:
    return dict(httpx.get(f"{server.url}/server_info").json())


@dataclass
class FirstRun:
    info: dict[str, Any]
    exit_code: int
    stop_s: float


@pytest.fixture(scope="module")
def first_run() -> FirstRun:
    """One idle server, started, asked who it is, then sent SIGTERM."""
    server = LocalServer([*BASE, "--launch-id", "a", "--served-model-name", "one"]).wait_healthy()
    try:
        info = server_info(server)
        started = time.monotonic()
        exit_code = server.terminate(timeout_s=10)
        return FirstRun(info, exit_code, time.monotonic() - started)
    finally:
        server.stop()


def test_idle_sigterm_exits_0_within_10_s(first_run: FirstRun) -> None:
    assert first_run.exit_code == 0
    assert first_run.stop_s < 10


def test_restart_same_fingerprint_then_sigterm_with_requests_in_flight(
    first_run: FirstRun,
) -> None:
    # Another port, served name and launch id: same configuration, same fingerprint.
    server = LocalServer([*BASE, "--launch-id", "b", "--served-model-name", "two"]).wait_healthy()
    try:
        info = server_info(server)
        assert info["launch_id"] == "b" and first_run.info["launch_id"] == "a"
        assert info["pid"] != first_run.info["pid"]
        assert info["fingerprint_inputs"] == first_run.info["fingerprint_inputs"]
        assert info["fingerprint"] == first_run.info["fingerprint"]
        outcomes = sigterm_with_requests_in_flight(server, model="two")
        assert len(outcomes) == 2  # both clients got an answer or a closed connection
        assert "Traceback" not in server.log()
    finally:
        server.stop()


# Every fingerprinted key is covered one by one by the pure tests (test_config.py); here a real
# server shows that its flags reach the fingerprint.
CHANGED_FLAGS = {
    "speculative": "none",
    "budget": "8",
    "topk": "2",
    "block_size": "4",
    "max_batch": "4",
    "max_model_len": "384",
    "seed": "3",
    "accept_threshold": "0.5",
}


def test_flags_reach_the_fingerprint(first_run: FirstRun) -> None:
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in CHANGED_FLAGS.items()]
    with LocalServer(["--model", "tiny-random", *flags]) as changed:
        info = server_info(changed)
    assert info["fingerprint"] != first_run.info["fingerprint"]
    reported = info["fingerprint_inputs"]["config"]
    assert {key: str(reported[key]) for key in CHANGED_FLAGS} == CHANGED_FLAGS
    unchanged = {k: v for k, v in reported.items() if k not in CHANGED_FLAGS}
    first = first_run.info["fingerprint_inputs"]["config"]
    assert unchanged == {k: v for k, v in first.items() if k not in CHANGED_FLAGS}


# On tiny-random, greedy "zzz" runs all 500 tokens (no EOS): seconds of work to interrupt.
LONG_GREEDY = {"prompt": "zzz", "max_tokens": 500, "temperature": 0}


def sigterm_with_requests_in_flight(server: LocalServer, model: str) -> list[str]:
    """A streaming and a plain request in flight, then SIGTERM: exit 0 within 10 s."""
    outcomes: list[str] = []
    first_chunk = threading.Event()

    def streaming_client() -> None:
        body = {**LONG_GREEDY, "model": model, "stream": True}
        try:
            with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=30) as r:
                for line in r.iter_lines():
                    first_chunk.set()
                    if line == "data: [DONE]":
                        outcomes.append("done")
        except httpx.HTTPError as error:
            outcomes.append(type(error).__name__)
        first_chunk.set()

    def plain_client() -> None:
        body = {**LONG_GREEDY, "model": model}
        try:
            response = httpx.post(f"{server.url}/v1/completions", json=body, timeout=30)
            outcomes.append(str(response.status_code))
        except httpx.HTTPError as error:
            outcomes.append(type(error).__name__)

    clients = [threading.Thread(target=streaming_client), threading.Thread(target=plain_client)]
    for client in clients:
        client.start()
    assert first_chunk.wait(30)
    # The plain request is admitted once its prompt is tokenized (on a worker thread), which on
    # a loaded machine can come after the streaming one's first chunk: wait for both, bounded.
    deadline = time.monotonic() + 10
    while server_info(server)["stats"]["in_flight"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server_info(server)["stats"]["in_flight"] == 2
    started = time.monotonic()
    assert server.terminate(timeout_s=10) == 0
    assert time.monotonic() - started < 10
    for client in clients:
        client.join(10)
    return outcomes
