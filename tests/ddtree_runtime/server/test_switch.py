"""`POST /admin/switch` on one real smollm2-135m server: every point after a switch is token for
token a fresh engine's of that config (T = 0 and coupled T 0.7), the lossy `accept_threshold`
buys acceptance, and start-up and switch phases are reported."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ddtree_runtime.engine import SamplingParams
from ddtree_runtime.server.config import ServeConfig, fingerprint, fingerprint_inputs
from ddtree_runtime.server.local_server import LocalServer
from ddtree_runtime.server.switch import build_engine
from tests.ddtree_runtime.engine_helpers import smollm2

pytestmark = pytest.mark.slow

MODEL = "smollm2-135m"
MAX_MODEL_LEN = 256
MAX_TOKENS = 12
SEED = 7
# The n-gram drafter hits on it, and at T 0.7 the sampler often draws another token than the
# drafted one where that one is still probable: what accept_threshold 0.2 accepts.
PROMPT = "A B C D E F G A B C D E F G A B C"
START = {"budget": 16, "topk": 4, "block_size": 8}
# Each switch's body: the config after it is the one before with these fields replaced. The
# last but one comes back to the start's config after two others; the last is lossy.
SWITCHES: list[dict[str, Any]] = [
    {"speculative": "none"},
    {"speculative": "ddtree", "budget": 8, "topk": 2},
    {"budget": 16, "topk": 4},
    {"accept_threshold": 0.2},
]


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    flags = ["--model", MODEL, "--max-model-len", str(MAX_MODEL_LEN), "--launch-id", "sw"]
    flags += [f"--{key.replace('_', '-')}={value}" for key, value in START.items()]
    with LocalServer(flags) as running:
        yield running


def info(server: LocalServer) -> dict[str, Any]:
    return dict(httpx.get(f"{server.url}/server_info").json())


def switch(server: LocalServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.url}/admin/switch", json=body, timeout=300)


def served(server: LocalServer, prompt: list[int], temperature: float) -> tuple[list[int], float]:
    """(token ids, tau) of one request, sent alone (the fresh engine runs it alone too)."""
    body = {"model": MODEL, "prompt": prompt, "max_tokens": MAX_TOKENS, "seed": SEED}
    body.update(temperature=temperature, return_token_ids=True)
    response = httpx.post(f"{server.url}/v1/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    answer = response.json()
    return answer["choices"][0]["token_ids"], answer["ddtree"]["tau"]


def fresh(config: ServeConfig, prompt: list[int], temperature: float) -> list[int]:
    """The same request on an engine built fresh for `config` in this process."""
    engine = build_engine(smollm2(), config)
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=temperature, seed=SEED)
    return engine.generate([prompt], [params])[0].token_ids


def test_every_point_after_a_switch_is_a_fresh_engines(server: LocalServer) -> None:
    prompt = list(smollm2().tokenizer.encode(PROMPT))
    first = info(server)
    config = ServeConfig(**first["config"])
    # (speculative, budget, topk, accept_threshold), temperature -> token ids
    got: dict[tuple[tuple[Any, ...], float], list[int]] = {}
    want: dict[tuple[tuple[Any, ...], float], list[int]] = {}
    taus: dict[float, float] = {}
    for count, change in enumerate([{}, *SWITCHES]):
        if change:
            answer = switch(server, change)
            assert answer.status_code == 200, answer.text
            config = config.model_copy(update=change)
            body, now = answer.json(), info(server)
            assert body["config"] == now["config"] == config.model_dump()
            inputs = fingerprint_inputs(config, now["model"]["weights_hash"], now["source_hash"])
            assert body["fingerprint"] == now["fingerprint"] == fingerprint(inputs)
            assert body["switch_s"] > 0 and now["switches"] == count
            assert now["launch_id"] == "sw" and now["pid"] == first["pid"]
            assert now["stats"]["requests"] == 0  # the old config's counters are gone
            phases = now["last_switch"]
            assert list(phases) == ["started", "drained", "built", "graphs_captured", "ready"]
            assert phases.pop("graphs_captured") is None  # CPU: no graph is captured
            assert sorted(phases.values()) == list(phases.values())
        point = (config.speculative, config.budget, config.topk, config.accept_threshold)
        for temperature in (0.0, 0.7):
            ids, tau = served(server, prompt, temperature)
            got[(point, temperature)] = ids
            if temperature > 0:
                # The last at 1.0 is the start's config, the one 0.2 is switched from.
                taus[config.accept_threshold] = tau
            if (point, temperature) not in want:  # the start's config comes back: computed once
                want[(point, temperature)] = fresh(config, prompt, temperature)
            assert ids == want[(point, temperature)], f"switch {count} ({change}), T {temperature}"
    ar = {t: ids for (point, t), ids in got.items() if point[0] == "none"}
    for (point, temperature), ids in got.items():
        # Threshold 1.0 (the default) is exact, and the greedy branch ignores 0.2: AR's tokens.
        if point[3] == 1.0 or temperature == 0.0:
            assert ids == ar[temperature], (point, temperature)
        else:  # 0.2 at T 0.7 accepts drafted tokens the sampler did not draw: lossy
            assert ids != ar[temperature]
    assert taus[0.2] > taus[1.0], taus


def test_a_switch_waits_for_the_request_in_flight(server: LocalServer) -> None:
    """A switch posted while a stream runs lets it finish on its engine, usage stats and all."""
    prompt = list(smollm2().tokenizer.encode(PROMPT))
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 24, "temperature": 0}
    body.update(ignore_eos=True, stream=True, stream_options={"include_usage": True})
    first_chunk, chunks = threading.Event(), []
    times: dict[str, float] = {}

    def stream() -> None:
        with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=300) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    chunks.append(json.loads(line.removeprefix("data: ")))
                    times.setdefault("first", time.time())
                    first_chunk.set()

    client = threading.Thread(target=stream)
    client.start()
    assert first_chunk.wait(300)
    answer = switch(server, {"speculative": "none"})
    client.join(300)
    assert answer.status_code == 200, answer.text
    reasons = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert reasons[-1] == "length" and chunks[-1]["usage"]["completion_tokens"] == 24
    assert chunks[-1]["ddtree"]["emitted_tokens"] == 24  # its stats, from the engine it ran on
    assert info(server)["last_switch"]["drained"] >= times["first"]


def test_startup_phases_in_server_info_and_log(server: LocalServer) -> None:
    startup = info(server)["startup"]
    assert list(startup) == ["process_start", "weights_loaded", "graphs_captured", "ready"]
    assert startup["graphs_captured"] is None  # CPU: no graph is captured
    times = [startup[k] for k in ("process_start", "weights_loaded", "ready")]
    assert sorted(times) == times
    logged = re.findall(r"ddtree_runtime phase (\w+) at \+(\d+\.\d\d)s", server.log())
    assert [name for name, _ in logged[:3]] == ["process_start", "weights_loaded", "ready"]
    assert float(logged[2][1]) == pytest.approx(times[2] - times[0], abs=0.01)


def test_a_bad_switch_is_a_400_naming_the_field_and_changes_nothing(server: LocalServer) -> None:
    """The words per field are `test_switch_body.py`'s; here, that they reach the client."""
    before = info(server)
    for body, param in (({"budget": -1}, "budget"), ({"max_batch": 4}, "max_batch")):
        answer = switch(server, body)
        assert answer.status_code == 400
        assert answer.json()["error"]["param"] == param, answer.text
    after = info(server)
    assert (after["fingerprint"], after["switches"]) == (before["fingerprint"], before["switches"])
