"""n > 1 on the wire and back: the measure client reads every choice of a real multi-choice
stream (the bundled runtime serving tiny-random on loopback, choices streamed by `index`), each
choice's ids, text and finish reason as the server's own non-streamed answer gives them; the
request's timing once, its output tokens summed over the choices."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ddtree_runtime.server.local_server import LocalServer
from sweeper.engines.base import RequestSpec
from sweeper.engines.registry import engine_for
from sweeper.measure.client import stream_request, token_sha256
from sweeper.measure.samples import draw_samples, sample_specs
from sweeper.measure.scores import sample_outputs
from sweeper.measure.sse_http import StreamClient
from sweeper.plan import build_plan
from sweeper.spec import RuntimeSpec
from tests.sweeper.plan.test_sampling import spec_of

pytestmark = pytest.mark.slow
MODEL = "tiny-random"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(["--model", MODEL, "--max-model-len", "256"]) as running:
        yield running


def _stream(server: LocalServer, spec: RequestSpec) -> dict[str, Any]:
    engine = engine_for(RuntimeSpec(model=MODEL))

    async def send() -> dict[str, Any]:
        async with StreamClient(timeout_s=120) as client:
            return await stream_request(client, server.url, spec, engine, model=MODEL)

    return asyncio.run(send())


def test_every_choice_of_a_streamed_response_is_read(server: LocalServer) -> None:
    spec = RequestSpec(
        prompt_id="a", prompt="Once upon a time", max_tokens=8, temperature=0.9, seed=5, n=3
    )
    record = _stream(server, spec)
    body = {"model": MODEL, "prompt": spec.prompt, "max_tokens": 8, "temperature": 0.9}
    body.update(seed=5, n=3, return_token_ids=True)
    answer = httpx.post(f"{server.url}/v1/completions", json=body, timeout=60).json()
    expected = [(c["token_ids"], c["text"], c["finish_reason"]) for c in answer["choices"]]
    assert record["error"] is None
    choices = record["choices"]
    assert [(c["token_ids"], c["text"], c["finish_reason"]) for c in choices] == expected
    assert len({tuple(c["token_ids"]) for c in choices}) == 3  # three independent draws
    assert [c["sha256"] for c in choices] == [token_sha256(ids) for ids, _, _ in expected]
    assert [c["output_tokens"] for c in choices] == [len(ids) for ids, _, _ in expected]
    # Per request: one TTFT, the output tokens of every choice.
    assert record["ttft"] is not None and record["ttft"] > 0
    assert record["output_tokens"] == sum(len(ids) for ids, _, _ in expected)
    assert record["output_tokens"] == answer["usage"]["completion_tokens"]


def test_every_choice_of_every_sample_is_recorded_and_scored(server: LocalServer) -> None:
    """A sampled point asking n = 3 draws its seeded samples (those its measured requests do
    not provide) with n = 3: each choice is a sample row of its own (index = sample x n +
    choice, its request's seed), holding that choice's ids as the stream carried them, and
    each becomes a scored output."""
    spec = spec_of(
        "grid: {temperature: [0.9]}\n"
        "determinism: {sampled: scored, samples: 4, sample_tokens: 6}\n",
        "workload:\n  prompts: [{id: a, text: Once upon a time}]\n  seed: 7\n"
        "  max_tokens: 6\n  n: 3\n",
    )
    point = next(iter(build_plan(spec).points()))
    engine = engine_for(RuntimeSpec(model=MODEL))
    key = {"run_id": "r", "host": "h", "point_id": point.point_id, "attempt": "a",
           "server_config_id": "s", "mode": "ar"}  # fmt: skip
    rows = draw_samples(
        server.url, point, spec.workload, spec.determinism, ["test"], engine, key, model=MODEL
    )
    # Each sample's request as the stream reader reads it (the test above: as the server says).
    expected = [
        (request.seed, choice["token_ids"])
        for _, _, request in sample_specs(point, spec.workload, spec.determinism, ["test"])
        for choice in _stream(server, request)["choices"]
    ]
    drawn = point.samples_per_prompt
    assert 0 < drawn < 4  # the measured requests give the rest of the 4 (plan.sampling)
    assert len({tuple(ids) for _, ids in expected}) == len(expected) == drawn * 3
    assert [(r["index"], r["seed"], r["token_ids"]) for r in rows] == [
        (i, seed, ids) for i, (seed, ids) in enumerate(expected)
    ]
    outputs = sample_outputs(point, rows, spec.workload, spec.determinism)
    assert [(o.index, list(o.token_ids)) for o in outputs] == [
        (i, ids) for i, (_, ids) in enumerate(expected)
    ]
