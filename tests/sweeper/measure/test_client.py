"""The streaming client and workload against the fake runtime on loopback."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sweeper.config import RequestConfig
from sweeper.engines.base import RequestSpec
from sweeper.engines.launch import Launch
from sweeper.engines.registry import engine_for
from sweeper.measure.client import token_sha256
from sweeper.measure.workload import expand_requests, run_requests
from sweeper.services.local_process import ProcessService
from sweeper.services.readiness import wait_healthy
from sweeper.spec import PromptSpec, RuntimeSpec
from tests.sweeper.conftest import fake_argv, free_port
from tests.sweeper.fake_runtime import token_ids

pytestmark = pytest.mark.slow

ENGINE = engine_for(RuntimeSpec())


def test_token_sha256_contract() -> None:
    assert token_sha256([12, 7, 99]) == hashlib.sha256(b"12,7,99").hexdigest()
    assert token_sha256([]) == hashlib.sha256(b"").hexdigest()


@pytest.fixture
def fake(tmp_path: Path, port: int):
    svc = ProcessService(tmp_path)
    env = {"FAKE_START_DELAY": "0", "FAKE_TOKEN_DELAY": "0.002"}
    svc.start(Launch(argv=fake_argv(port, "c1"), port=port, launch_id="c1", env=env))
    wait_healthy(svc, f"http://127.0.0.1:{port}", 20)
    yield f"http://127.0.0.1:{port}"
    svc.stop(5)


@pytest.mark.parametrize("chat", [False, True])
async def test_records_carry_tokens_timing_and_margins(fake: str, chat: bool) -> None:
    reqs = expand_requests(
        [PromptSpec(id="p0", text="hello"), PromptSpec(id="p1", text="world")],
        RequestConfig.make(0.0, 9, 1, seed=1),
        repeats=2,
        chat=chat,
    )
    seen: list[RequestSpec] = []
    result = await run_requests(
        fake, reqs, engine=ENGINE, concurrency=2, warmup=1, on_record=lambda s, r: seen.append(s)
    )
    assert len(result.records) == 4 and len(seen) == 4
    for spec, rec in result.records:
        assert rec["error"] is None
        assert rec["token_ids"] == token_ids(spec.prompt, 9)
        assert rec["sha256"] == token_sha256(rec["token_ids"])
        assert rec["output_tokens"] == 9 and rec["finish_reason"] == "length"
        assert rec["ttft"] > 0 and len(rec["itls"]) == 8 and rec["e2e"] >= rec["ttft"]
        assert rec["top2_margins"] == pytest.approx([2.4] * 9)
        assert rec["tau"] == pytest.approx(9 / 4) and rec["verify_rounds"] == 4
        assert rec["text"].startswith(f"w{rec['token_ids'][0]} ")
    assert result.wall_s > 0


async def test_refused_connection_becomes_record_error() -> None:
    bad = RequestSpec(prompt_id="x", prompt="x", max_tokens=4, temperature=0.0)
    result = await run_requests(
        f"http://127.0.0.1:{free_port()}", [bad], engine=ENGINE, concurrency=1
    )
    assert "ConnectError" in result.records[0][1]["error"]
    assert result.records[0][1]["output_tokens"] == 0


async def test_server_error_becomes_record_error(tmp_path: Path, port: int) -> None:
    svc = ProcessService(tmp_path)
    env = {"FAKE_START_DELAY": "0", "FAKE_FAIL_REQUESTS": "1"}
    svc.start(Launch(argv=fake_argv(port, "e"), port=port, launch_id="e", env=env))
    try:
        wait_healthy(svc, f"http://127.0.0.1:{port}", 20)
        bad = RequestSpec(prompt_id="x", prompt="x", max_tokens=4, temperature=0.0)
        result = await run_requests(f"http://127.0.0.1:{port}", [bad], engine=ENGINE, concurrency=1)
        assert result.records[0][1]["error"] == "HTTP 500: injected failure"
    finally:
        svc.stop(5)
