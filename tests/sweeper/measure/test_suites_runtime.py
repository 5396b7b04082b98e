"""Synthetic prompts against the real runtime serving smollm2-135m: prompts of 128, 512 and 2048
tokens built from the served tokenizer (`/tokenize`) are charged exactly that many prompt tokens
(the server's usage), and answers asked to hold 8 tokens are 8 tokens long whatever EOS says."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddtree_runtime.server.local_server import LocalServer
from sweeper.config import RequestConfig
from sweeper.engines.registry import engine_for
from sweeper.measure.client import stream_request
from sweeper.measure.inputs import Inputs
from sweeper.measure.lengths import request_columns
from sweeper.measure.sse_http import StreamClient
from sweeper.measure.workload import expand_requests
from sweeper.spec import RuntimeSpec, parse_spec

pytestmark = pytest.mark.slow
MODEL = "smollm2-135m"
ASKED = (128, 512, 2048)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    flags = ["--model", MODEL, "--draft", "ngram", "--budget", "8", "--topk", "2"]
    with LocalServer([*flags, "--block-size", "4", "--max-model-len", "4096"]) as running:
        yield running


def test_synthetic_prompts_are_served_at_exactly_their_asked_length(
    server: LocalServer, tmp_path: Path
) -> None:
    datasets = [
        {"synthetic": {"count": 1, "input_tokens": n, "output_tokens": 8}, "name": f"s{n}"}
        for n in ASKED
    ]
    spec = parse_spec(json.dumps({"name": "t", "workload": {"seed": 5, "datasets": datasets}}))
    prompts = spec.workload.prompts
    engine = engine_for(RuntimeSpec(model=MODEL))
    inputs = Inputs(spec.workload, tmp_path, engine).resolve(server.url, MODEL)
    requests = expand_requests(
        prompts,
        RequestConfig.make(0.0, 8, 1, seed=5),
        repeats=1,
        chat=True,
        length_control=engine.length_control,  # type: ignore[attr-defined]
        inputs=inputs,
    )

    async def send_all() -> list[dict]:
        async with StreamClient(timeout_s=300) as client:
            return [
                await stream_request(client, server.url, r, engine, model=MODEL) for r in requests
            ]

    records = asyncio.run(send_all())
    served = []
    for request, record in zip(requests, records, strict=True):
        assert record["error"] is None, record["error"]
        columns = request_columns(request, record)
        served.append((columns["asked_input_tokens"], record["prompt_tokens"]))
        assert columns["length_held"], (request.prompt_id, record["output_tokens"])
    assert served == [(n, n) for n in ASKED]
    # Different windows of the served tokenizer's ids, not one prompt repeated.
    assert len({tuple(inputs[p.id]["token_ids"]) for p in prompts}) == len(prompts)
