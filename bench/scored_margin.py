"""An engine's near-tie margin, measured: how far its scoring prefill moves a difference of raw
logprobs from what its sampler saw, the noise a near tie is judged against (greedy and scored:
`sweeper.proof.scored.catalog`, `near_tie_margin`).

Samples are drawn in process (smollm2-135m, the chat prompts of `bench/scored_pools.py`, AR and
DDTree b16 k4 with n-gram drafts, at temperature 0.7, top-k 20, batched), each emitted token with
the raw logprobs of the sampler's own logits (`logprobs`: the decode or verify row it was drawn
from) for its top `--top` ids; each sample is then scored by the route's code
(`ddtree_runtime.score.continuation_logits`, one plain prefill). Per position, d_i is the
sampler's raw logprob of id i less the scorer's; the largest change of any difference of two of
them (max d - min d over the top ids and the drawn token) is what the scorer can move a token's
distance to a boundary by. Printed: its largest and 99.9th percentile over all positions.

`--engine vllm` or `sglang`: the same on a real server of that engine, started on loopback as
the sweeper launches its AR config in sweeps/vllm-cpu.yaml or sweeps/sglang-cpu.yaml (fp32 on
this CPU), all requests in flight at once (batched decode): each sample drawn with the top
`--top` logprobs of every generated token (raw: vLLM's default logprobs mode, SGLang's under
SGLANG_RETURN_ORIGINAL_LOGPROB; SGLang draws unseeded, its seed needing deterministic
inference), then scored by the sweeper's own route for that engine (`Engine.score`: vLLM's
prompt_logprobs, SGLang's /generate input logprobs), the top ids both name and the drawn token
compared as above. Printed also: the 99th percentile.

    python bench/scored_margin.py [--engine runtime|vllm|sglang] [--size 8] [--tokens 24] [--top 64]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import IO

import httpx
import numpy as np
import torch
from scored_pools import MODEL, PROMPTS, chat_ids  # bench/ is the script's own directory

from ddtree_runtime.drafters import make_drafter
from ddtree_runtime.engine import Engine
from ddtree_runtime.models import load_model
from ddtree_runtime.params import EngineConfig, SamplingParams
from ddtree_runtime.score import continuation_logits
from sweeper.catalog.records import RECORDS
from sweeper.engines.base import Capabilities, RequestSpec
from sweeper.engines.sglang import SGLang
from sweeper.engines.vllm import VLLM
from sweeper.plan import build_plan
from sweeper.poll import wait_until
from sweeper.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]


def spreads(args: argparse.Namespace, speculative: bool) -> list[float]:
    """Per emitted token: max d - min d over its sampler's top ids and itself (docstring)."""
    loaded = load_model(MODEL)
    prompts = [chat_ids(loaded, text) for text in PROMPTS.values()]
    config = EngineConfig(
        speculative="ddtree" if speculative else "none",
        budget=16 if speculative else 0,
        topk=4,
        block_size=8,
        max_batch=32,
        max_model_len=max(len(p) for p in prompts) + args.tokens + 32,
    )
    engine = Engine(loaded, make_drafter("ngram", loaded), config)
    requests = [(i, k) for k in range(args.size) for i in range(len(prompts))]
    params = [
        SamplingParams(
            max_tokens=args.tokens, temperature=0.7, top_k=20, seed=9_000_000 + 1_003 * i + k,
            logprobs=args.top,
        )
        for i, k in requests
    ]  # fmt: skip
    results = engine.generate([prompts[i] for i, _ in requests], params)
    out: list[float] = []
    for (i, _), result in zip(requests, results, strict=True):
        raw = torch.log_softmax(continuation_logits(loaded.model, prompts[i], result.token_ids), -1)
        for row, entry in zip(raw, result.logprobs or [], strict=True):
            pairs = [*entry.top, (entry.token_id, entry.logprob)]
            d = [lp - float(row[token]) for token, lp in pairs]
            out.append(max(d) - min(d))
    return out


def served_spreads(args: argparse.Namespace) -> list[float]:
    """Per generated token of a real vLLM or SGLang server (docstring): max d - min d."""
    spec = load_spec(ROOT / "sweeps" / f"{args.engine}-cpu.yaml")
    engine = (VLLM if args.engine == "vllm" else SGLang)(spec.runtime)
    config = build_plan(spec).hosts[0].steps[0].server_config
    assert config.mode == "ar", config
    loaded = load_model(MODEL)
    prompts = [chat_ids(loaded, text) for text in PROMPTS.values()]
    with socket.socket() as probe:  # a free loopback port
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    flags, env = engine.command(config)
    command = RECORDS[args.engine].command
    assert command is not None
    argv = [str(ROOT / (spec.runtime.python or "")), *command.entry, *flags]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, **spec.runtime.env, **env, "SGLANG_RETURN_ORIGINAL_LOGPROB": "1"}
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True
        )
        try:
            with httpx.Client(timeout=600) as client:
                wait_until(
                    lambda: _healthy(client, url),
                    timeout_s=spec.runtime.ready_timeout_s,
                    interval_s=2.0,
                    died=lambda: None if server.poll() is None else _tail(log),
                )
                return _measure(args, engine, client, url, prompts)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


def _measure(
    args: argparse.Namespace,
    engine: VLLM | SGLang,
    client: httpx.Client,
    url: str,
    prompts: list[list[int]],
) -> list[float]:
    """Draw every sample at once, then score each through the engine's route (docstring)."""
    model = client.get(f"{url}/v1/models").json()["data"][0]["id"]
    requests = [(i, k) for k in range(args.size) for i in range(len(prompts))]

    def draw(request: tuple[int, int]) -> list[tuple[int, dict[int, float]]]:
        i, k = request
        seed = 9_000_000 + 1_003 * i + k
        if args.engine == "vllm":
            body = {
                "model": model, "prompt": prompts[i], "max_tokens": args.tokens,
                "temperature": 0.7, "seed": seed, "logprobs": args.top,
                "return_token_ids": True, "return_tokens_as_token_ids": True,
            }  # fmt: skip
            choice = client.post(f"{url}/v1/completions", json=body).json()["choices"][0]
            tops = choice["logprobs"]["top_logprobs"]
            return [
                (int(token), {int(key.split(":")[1]): float(lp) for key, lp in top.items()})
                for token, top in zip(choice["token_ids"], tops, strict=True)
            ]
        body = {
            "input_ids": prompts[i],
            "sampling_params": {"max_new_tokens": args.tokens, "temperature": 0.7},
            "return_logprob": True, "top_logprobs_num": args.top, "stream": False,
        }  # fmt: skip
        meta = client.post(f"{url}/generate", json=body).json()["meta_info"]
        return [
            (int(own[1]), {int(t[1]): float(t[0]) for t in top} | {int(own[1]): float(own[0])})
            for own, top in zip(
                meta["output_token_logprobs"], meta["output_top_logprobs"], strict=True
            )
        ]

    with ThreadPoolExecutor(len(requests)) as pool:
        drawn = list(pool.map(draw, requests))
    token_ids = "native" if args.engine == "sglang" else "openai"
    caps = Capabilities(token_ids, "none", "logprobs", scoring="topk", scoring_k=args.top)
    scorer = engine.bind(caps)
    out: list[float] = []
    compared: list[int] = []
    for (i, _), sample in zip(requests, drawn, strict=True):
        tokens = [token for token, _ in sample]
        asked = RequestSpec("margin", "", len(tokens), 0.7, prompt_token_ids=tuple(prompts[i]))
        scored = scorer.score(client, url, asked, tokens, model).positions
        for (token, decoded), position in zip(sample, scored, strict=True):
            prefill = dict(position["top"]) | {token: position["logprob"]}
            d = [lp - prefill[t] for t, lp in decoded.items() if t in prefill]
            out.append(max(d) - min(d))
            compared.append(len(d))
    print(f"ids compared per token: at least {min(compared)}, {np.mean(compared):.1f} on average")
    return out


def _healthy(client: httpx.Client, url: str) -> bool:
    try:
        return client.get(f"{url}/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _tail(log: IO[bytes]) -> str:
    log.seek(0)
    return "the server exited: " + log.read().decode("utf-8", "replace")[-3000:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("runtime", "vllm", "sglang"), default="runtime")
    parser.add_argument("--size", type=int, default=8, help="samples per prompt")
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--top", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs: list[tuple[str, Callable[[], list[float]]]]
    if args.engine == "runtime":
        runs = [("AR", partial(spreads, args, False)), ("DDTree b16", partial(spreads, args, True))]
    else:
        runs = [(f"{args.engine} AR", partial(served_spreads, args))]
    for name, run in runs:
        found = np.array(run())
        print(
            f"{name}: {found.size} tokens, largest change of a logprob difference "
            f"{found.max():.3g} nats, 99.9th percentile {np.quantile(found, 0.999):.3g}, "
            f"99th {np.quantile(found, 0.99):.3g}",
            flush=True,
        )


if __name__ == "__main__":
    main()
