"""The bundled runtime as an engine: its command line from a server config, and what its
/server_info must prove (read from a real loopback server answering crafted documents)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import httpx
import pytest

from sweeper.config import ServerConfig
from sweeper.engines.base import EngineError
from sweeper.engines.ddtree_runtime import DDTreeRuntime, fingerprint_of
from sweeper.engines.launch import Launch
from sweeper.engines.registry import engine_for
from sweeper.plan import build_plan
from sweeper.spec import parse_spec
from tests.sweeper.json_server import serve

WORKLOAD = "workload:\n  prompts: [{id: a, text: hi}]\n"


def _engine(text: str, source_hash: str | None = "src") -> tuple[DDTreeRuntime, list[ServerConfig]]:
    spec = parse_spec("name: t\n" + text + WORKLOAD)
    engine = engine_for(spec.runtime, source_hash)
    assert isinstance(engine, DDTreeRuntime)
    return engine, [step.server_config for step in build_plan(spec).hosts[0].steps]


def test_flags_are_argv_elements_in_a_stable_order() -> None:
    engine, (ar, ddtree) = _engine(
        "runtime:\n"
        "  device: cpu\n"
        "  dtype: float32\n"
        "  max_batch: 4\n"
        "  extra_args: ['--served-model-name', '\"; touch /tmp/pwned #\"']\n"
        "grid: {budget: [16], topk: [4], cuda_graph: [false], tp: [2], eager: [true]}\n"
    )
    assert engine.flags(ddtree) == [
        "--model", "smollm2-135m", "--draft", "ngram",
        "--speculative", "ddtree", "--budget", "16", "--topk", "4", "--block-size", "8",
        "--disable-cuda-graph",
        "--device", "cpu", "--dtype", "float32", "--max-batch", "4",
        "--tp", "2", "--eager",
        "--served-model-name", '"; touch /tmp/pwned #"',
    ]  # fmt: skip
    assert engine.flags(ar)[:7] == [
        "--model", "smollm2-135m", "--draft", "ngram", "--speculative", "none",
        "--disable-cuda-graph",
    ]  # fmt: skip
    launch = engine.launch(ddtree, python="py", listen_host="127.0.0.1", workdir=None, secrets={})
    assert launch.argv[:4] == ("py", "-m", "ddtree_runtime", "serve")
    assert launch.argv[-6:-1] == ("--host", "127.0.0.1", "--port", "8000", "--launch-id")
    assert launch.argv[-1] == launch.launch_id and len(launch.launch_id) == 16


def test_a_grid_flag_overrides_the_runtime_setting() -> None:
    engine, steps = _engine(
        "runtime: {dtype: float32}\ngrid: {budget: [8], topk: [1], dtype: [bfloat16]}\n"
    )
    flags = engine.flags(steps[1])
    assert flags.count("--dtype") == 1 and flags[flags.index("--dtype") + 1] == "bfloat16"
    assert engine.expected(steps[1])["dtype"] == "bfloat16"


def test_fingerprint_is_canonical_json_sha256() -> None:
    inputs = {"b": 1, "a": {"y": [1, 2], "x": None}}
    want = hashlib.sha256(b'{"a":{"x":null,"y":[1,2]},"b":1}').hexdigest()
    assert fingerprint_of(inputs) == want


def _info(launch: Launch, config: dict[str, Any], **over: Any) -> dict[str, Any]:
    inputs = {"config": config, "weights_hash": "w", "source_hash": "src"}
    info = {
        "launch_id": launch.launch_id,
        "fingerprint_inputs": inputs,
        "fingerprint": fingerprint_of(inputs),
        "config": {},
        "source_hash": "src",
        "runtime_version": "0.1.0",
    }
    return {**info, **over}


@pytest.mark.parametrize(
    ("over", "config_change", "message"),
    [
        ({}, {}, None),
        ({"launch_id": "an-old-launch"}, {}, "launch id mismatch"),
        ({"fingerprint": "0" * 64}, {}, "fingerprint mismatch"),
        ({}, {"budget": 8}, "budget: requested 16, server runs 8"),
        ({}, {"cuda_graph": True}, "cuda_graph: requested False, server runs True"),
        (
            {"source_hash": "other"},
            {},
            "source hash mismatch: the server runs runtime code 'other'",
        ),
    ],
)
def test_server_info_must_prove_the_requested_instance(
    over: dict[str, Any], config_change: dict[str, Any], message: str | None
) -> None:
    engine, (_ar, ddtree) = _engine("grid: {budget: [16], topk: [4]}\n")
    launch = engine.launch(ddtree, python="py", listen_host="127.0.0.1", workdir=None, secrets={})
    config = {**engine.expected(ddtree), **config_change}
    with serve({"/server_info": _info(launch, config, **over)}) as url, httpx.Client() as client:
        if message is None:
            proof = engine.prove(client, url, launch, ddtree)
            assert proof.source_hash == "src" and proof.version == "0.1.0"
            assert "source hash equals the manifest's" in proof.proven
        else:
            with pytest.raises(EngineError, match=message):
                engine.prove(client, url, launch, ddtree)


def test_the_launch_carries_the_config_it_was_rendered_with_and_proof_needs_it() -> None:
    engine, (ar, ddtree) = _engine("grid: {budget: [16], topk: [4]}\n")
    launch = engine.launch(ddtree, python="py", listen_host="127.0.0.1", workdir=None, secrets={})
    # One split: each flag's value is the value the server must report.
    argv = list(launch.argv)
    for key, flag in (("budget", "--budget"), ("topk", "--topk"), ("speculative", "--speculative")):
        assert argv[argv.index(flag) + 1] == str(launch.expected[key])
    assert dict(launch.expected) == engine.expected(ddtree)
    ar_launch = engine.launch(ar, python="py", listen_host="127.0.0.1", workdir=None, secrets={})
    assert ar_launch.expected["speculative"] == "none" and "budget" not in ar_launch.expected
    # A launch no engine rendered proves nothing: refused, never passed vacuously.
    bare = replace(launch, expected={})
    info = _info(bare, engine.expected(ddtree))
    refused = pytest.raises(EngineError, match="no expected config")
    with serve({"/server_info": info}) as url, httpx.Client() as client, refused:
        engine.prove(client, url, bare, ddtree)
