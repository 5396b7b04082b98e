"""Readiness and identity against the fake runtime on loopback, launched exactly as the runner
launches the bundled runtime: the restart race is never missed and a wrong instance never
passes, whether /proc or /server_info gives it away."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import pytest

from sweeper.config import ServerConfig
from sweeper.engines.registry import engine_for
from sweeper.hosts.local import LocalHost
from sweeper.plan import build_plan
from sweeper.services.local_process import ProcessService
from sweeper.services.readiness import ReadinessError, Where, prove_identity, wait_healthy
from sweeper.services.runtime_package import runtime_source_hash
from sweeper.spec import load_spec
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

pytestmark = pytest.mark.slow


def _start(tmp: Path, port: int, env: dict[str, str], **over: object):
    """The engine, the spec's speculative server config, and its started instance."""
    spec = load_spec(write_spec(tmp, port, fake_env=fake_runtime_env(tmp, env), topk=(4,)))
    engine = engine_for(spec.runtime, runtime_source_hash())
    sc: ServerConfig = build_plan(spec).hosts[0].steps[1].server_config
    launch = engine.launch(
        sc, python=sys.executable, listen_host="127.0.0.1", workdir=None, secrets={}
    )
    launch = dataclasses.replace(launch, **over)  # type: ignore[arg-type]
    svc = ProcessService(tmp / "svc")
    return engine, sc, svc, svc.start(launch)


def test_the_launched_fake_is_proven(tmp_path: Path, port: int) -> None:
    engine, sc, svc, instance = _start(tmp_path, port, {"FAKE_START_DELAY": "0.5"})
    try:
        url = f"http://127.0.0.1:{port}"
        waited = wait_healthy(svc, url, 20)
        identity = prove_identity(
            engine, url, instance, sc, Where(LocalHost(), sys.executable), None
        )
        assert waited >= 0.5
        assert identity.process is not None and identity.process.pid == instance.pid
        assert identity.proof.info["pid"] == instance.pid
        assert identity.model == "fake"
        assert any("runs the requested argv and environment" in p for p in identity.proven)
        # The same instance is not a new one.
        with pytest.raises(ReadinessError, match="previous instance"):
            prove_identity(engine, url, instance, sc, Where(LocalHost(), sys.executable), identity)
    finally:
        svc.stop(5)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FAKE_CRASH": "3"}, "exited \\(code 3\\)"),
        ({"FAKE_BAD_FINGERPRINT": "1"}, "fingerprint mismatch"),
        ({"FAKE_LAUNCH_ID": "stale"}, "launch id mismatch"),
        ({"FAKE_CONFIG_OVERRIDE": '{"topk": 1}'}, "topk: requested 4, server runs 1"),
        ({"FAKE_WRONG_SOURCE_HASH": "f" * 64}, "source hash mismatch"),
        ({"FAKE_START_DELAY": "30"}, "not ready after 1 s"),
    ],
)
def test_bad_instances_fail_with_reason(tmp_path: Path, port: int, env: dict, message: str) -> None:
    engine, sc, svc, instance = _start(tmp_path, port, env)
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    try:
        with pytest.raises(ReadinessError, match=message) as err:
            deadline = 1 if "START_DELAY" in str(env) else 20
            wait_healthy(svc, url, deadline, log_tail=lambda: svc.logs()[0])
            prove_identity(engine, url, instance, sc, Where(LocalHost(), sys.executable), None)
        if "FAKE_CRASH" in env:
            assert "injected start failure" in err.value.log_tail
            assert time.monotonic() - t0 < 10  # fails fast, not at the deadline
    finally:
        svc.stop(5)


def test_a_process_started_otherwise_than_requested_fails(tmp_path: Path, port: int) -> None:
    """The service ran another argv than the one the proof was asked about."""
    engine, sc, svc, instance = _start(tmp_path, port, {})
    asked = dataclasses.replace(instance.launch, argv=(*instance.launch.argv, "--extra"))
    try:
        wait_healthy(svc, f"http://127.0.0.1:{port}", 20)
        with pytest.raises(ReadinessError, match="process identity: cmdline differs"):
            prove_identity(
                engine,
                f"http://127.0.0.1:{port}",
                dataclasses.replace(instance, launch=asked),
                sc,
                Where(LocalHost(), sys.executable),
                None,
            )
    finally:
        svc.stop(5)
