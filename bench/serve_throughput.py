"""Streamed tokens/s of the runtime server, AR (`--speculative none`) vs DDTree, at several
concurrencies; starts its own servers on loopback, one at a time, and prints a table with the
DDTree/AR ratio measured in this run.

    python bench/serve_throughput.py                      # smollm2-135m, concurrency 1 4 8
    python bench/serve_throughput.py --max-tokens 128 --rounds 3 --ddtree-flags="--topk 1"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import time
from dataclasses import dataclass

import httpx

from ddtree_runtime.server.local_server import LocalServer

PROMPTS = [
    "Count from one to twenty in words: one, two, three,",
    "def quicksort(items):\n    if len(items) <= 1:\n        return items\n",
    "The history of the printing press begins",
    "Repeat after me: the cat sat on the mat. the cat sat on the mat. the cat",
    "Write a short poem about the sea.",
    "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday, Monday,",
    "Explain in simple words why the sky is blue.",
    '{"name": "Alice", "age": 30, "city": "Paris"}\n{"name": "Bob", "age": 25, "city": "',
]


@dataclass
class Measure:
    tokens: int
    seconds: float
    verify_rounds: int

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds

    @property
    def tau(self) -> float:
        return self.tokens / self.verify_rounds if self.verify_rounds else 0.0


async def one_stream(
    client: httpx.AsyncClient, model: str, prompt: str, max_tokens: int
) -> tuple[int, int]:
    """Streams one completion; returns (tokens received, verify rounds)."""
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "return_token_ids": True,
        "stream_options": {"include_usage": True},
    }
    tokens = rounds = 0
    async with client.stream("POST", "/v1/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data: "))
            if chunk["choices"]:
                tokens += len(chunk["choices"][0].get("token_ids", []))
            elif "ddtree" in chunk:
                rounds = chunk["ddtree"]["verify_rounds"]
    return tokens, rounds


async def measure(url: str, model: str, concurrency: int, rounds: int, max_tokens: int) -> Measure:
    """`concurrency` clients, each streaming `rounds` completions back to back."""

    async def worker(index: int, client: httpx.AsyncClient) -> tuple[int, int]:
        tokens = verify = 0
        for r in range(rounds):
            prompt = PROMPTS[(index + r * concurrency) % len(PROMPTS)]
            got, v = await one_stream(client, model, prompt, max_tokens)
            tokens, verify = tokens + got, verify + v
        return tokens, verify

    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        started = time.perf_counter()
        results = await asyncio.gather(*[worker(i, client) for i in range(concurrency)])
        seconds = time.perf_counter() - started
    return Measure(sum(t for t, _ in results), seconds, sum(v for _, v in results))


def run_engine(flags: list[str], args: argparse.Namespace) -> dict[int, Measure]:
    with LocalServer(["--model", args.model, *flags]) as server:
        asyncio.run(measure(server.url, args.model, 1, 1, 8))  # warm-up, not measured
        return {
            c: asyncio.run(measure(server.url, args.model, c, args.rounds, args.max_tokens))
            for c in args.concurrency
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--rounds", type=int, default=2, help="requests per client")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--ddtree-flags", default="--budget 16 --topk 4 --block-size 8")
    args = parser.parse_args()

    ar = run_engine(["--speculative", "none"], args)
    ddtree = run_engine(["--speculative", "ddtree", *shlex.split(args.ddtree_flags)], args)

    print(
        f"model={args.model} max_tokens={args.max_tokens} rounds={args.rounds} "
        f"ddtree: {args.ddtree_flags}"
    )
    print(f"{'concurrency':>11} {'AR tok/s':>9} {'DDTree tok/s':>12} {'ratio':>6} {'tau':>5}")
    for c in args.concurrency:
        a, d = ar[c], ddtree[c]
        print(f"{c:>11} {a.tok_s:>9.1f} {d.tok_s:>12.1f} {d.tok_s / a.tok_s:>6.2f} {d.tau:>5.2f}")


if __name__ == "__main__":
    main()
