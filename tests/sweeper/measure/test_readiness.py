"""Readiness and identity against the fake runtime on loopback: the restart race is never missed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sweeper.measure.readiness import (
    Identity,
    ReadinessError,
    check_identity,
    fingerprint_of,
    wait_ready,
)
from sweeper.services import Launch
from sweeper.services.process import ProcessService
from tests.sweeper.conftest import fake_argv

EXPECTED = {"budget": 8, "topk": 4, "block_size": 8}
FLAGS = ("--budget", "8", "--topk", "4", "--block-size", "8")


def _info(**over: object) -> dict:
    inputs = {"config": {"budget": 8, "topk": 4, "block_size": 8}, "weights_hash": "w"}
    info = {
        "launch_id": "L1",
        "fingerprint_inputs": inputs,
        "fingerprint": fingerprint_of(inputs),
        "config": {},
        "pid": 10,
        "start_time": 1.0,
    }
    info.update(over)
    return info


def test_identity_accepts_matching_info() -> None:
    ident = check_identity(_info(), launch_id="L1", expected=EXPECTED, previous=None)
    assert ident.pid == 10


@pytest.mark.parametrize(
    ("over", "expected", "message"),
    [
        ({"launch_id": "L0"}, EXPECTED, "launch id mismatch"),
        ({"fingerprint": "0" * 64}, EXPECTED, "fingerprint mismatch"),
        ({}, {**EXPECTED, "budget": 16}, "budget: requested 16, server runs 8"),
        ({}, {**EXPECTED, "cuda_graph": True}, "cuda_graph: requested True, server does not"),
    ],
)
def test_identity_rejects(over: dict, expected: dict, message: str) -> None:
    with pytest.raises(ReadinessError, match=message):
        check_identity(_info(**over), launch_id="L1", expected=expected, previous=None)


def test_identity_rejects_same_instance_as_before() -> None:
    prev = Identity("L0", "f", 10, 1.0, None, None)
    with pytest.raises(ReadinessError, match="previous instance"):
        check_identity(_info(), launch_id="L1", expected=EXPECTED, previous=prev)


def test_fingerprint_is_canonical_json_sha256() -> None:
    inputs = {"b": 1, "a": {"y": [1, 2], "x": None}}
    import hashlib

    want = hashlib.sha256(b'{"a":{"x":null,"y":[1,2]},"b":1}').hexdigest()
    assert fingerprint_of(inputs) == want
    assert json.dumps(inputs)  # plain JSON input


@pytest.mark.slow
def test_ready_and_identity_against_fake(tmp_path: Path, port: int) -> None:
    svc = ProcessService(tmp_path)
    launch = Launch(
        argv=fake_argv(port, "L1", *FLAGS),
        port=port,
        launch_id="L1",
        env={"FAKE_START_DELAY": "0.5"},
    )
    inst = svc.start(launch)
    try:
        ident, waited = wait_ready(
            svc, f"http://127.0.0.1:{port}", launch_id="L1", expected=EXPECTED, deadline_s=20
        )
        assert ident.pid == inst.pid and waited >= 0.5
    finally:
        svc.stop(5)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FAKE_CRASH": "3"}, "exited \\(code 3\\)"),
        ({"FAKE_BAD_FINGERPRINT": "1"}, "fingerprint mismatch"),
        ({"FAKE_LAUNCH_ID": "stale"}, "launch id mismatch"),
        ({"FAKE_CONFIG_OVERRIDE": '{"topk": 1}'}, "topk: requested 4, server runs 1"),
        ({"FAKE_START_DELAY": "30"}, "not ready after 1 s"),
    ],
)
def test_bad_instances_fail_with_reason(tmp_path: Path, port: int, env: dict, message: str) -> None:
    svc = ProcessService(tmp_path)
    svc.start(Launch(argv=fake_argv(port, "L1", *FLAGS), port=port, launch_id="L1", env=env))
    t0 = time.monotonic()
    try:
        with pytest.raises(ReadinessError, match=message) as err:
            wait_ready(
                svc,
                f"http://127.0.0.1:{port}",
                launch_id="L1",
                expected=EXPECTED,
                deadline_s=1 if "START_DELAY" in str(env) else 20,
                log_tail=lambda: svc.logs()[0],
            )
        if "FAKE_CRASH" in env:
            assert "injected start failure" in err.value.log_tail
            assert time.monotonic() - t0 < 10  # fails fast, not at the deadline
    finally:
        svc.stop(5)
