"""The distribution test's power and false-alarm rate on a real engine, measured by repeated draws.

Two running servers (or one, asked two ways) are sampled through the sweeper's own request path
(the spec's engine, prompts and API): a pool of seeded samples per prompt from side A (the
reference: an AR server) and from side B (the candidate: a speculative server, or the same AR
server with a known shift such as another temperature or top-p). Then, `--draws` times, N
samples per prompt are drawn at random from each pool and tested (`two_sample_test`, the run's
own test): B against A gives the detection rate (power against that shift at N), two disjoint
halves of A give the AR-vs-AR false-alarm rate. Draws reuse the pools (sampling without
replacement within a draw), so they are not independent: the rates are estimates at this N, not
counts of independent experiments.

    python bench/sampled_power.py SPEC --url-a URL [--url-b URL] [--a temperature=0.7]
        [--b temperature=0.7,top_p=0.9] [--n 96] [--draws 30] [--tokens 24] [--alpha 0.01]
        [--pools DIR] [--pool-a 384] [--pool-b 192]

A pool is cached as JSON in --pools (default .cache/sampled-power/), keyed by URL and settings,
so the tests can be rerun at other N without sampling again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np

from sweeper.config import RequestConfig
from sweeper.engines.registry import engine_for
from sweeper.measure.drive import point_prompts
from sweeper.measure.workload import run_requests_sync
from sweeper.proof.distribution import two_sample_test
from sweeper.services.readiness import served_model
from sweeper.spec import load_spec


def settings(text: str) -> dict[str, float]:
    """`temperature=0.7,top_p=0.9` as a dict."""
    out = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        out[key.strip()] = float(value)
    return out


def pool(
    spec_path: Path, url: str, asked: dict[str, float], size: int, tokens: int, cache: Path
) -> dict[str, list[list[int]]]:
    """`size` seeded samples per prompt of the spec, from the server at `url`."""
    key = hashlib.sha256(json.dumps([str(spec_path), url, asked, size, tokens]).encode())
    path = cache / f"{key.hexdigest()[:16]}.json"
    if path.exists():
        return dict(json.loads(path.read_text()))
    spec = load_spec(spec_path)
    engine = engine_for(spec.runtime, None)
    with httpx.Client() as client:
        model = served_model(client, url)
    rc = RequestConfig.make(
        asked.get("temperature", 0.7),
        tokens,
        8,
        asked.get("top_p"),
        top_k=int(asked["top_k"]) if "top_k" in asked else None,
    )
    prompts = point_prompts(rc, spec.workload)
    base = int(asked.get("seed_base", 0))
    requests = [
        replace(p, seed=base + 1_000_003 * i + k, repeat=k, max_tokens=tokens)
        for i, p in enumerate(prompts)
        for k in range(size)
    ]
    started = time.perf_counter()
    result = run_requests_sync(url, requests, engine=engine, concurrency=8, model=model)
    out: dict[str, list[list[int]]] = {}
    errors = 0
    for request, record in result.records:
        if record.get("error"):
            errors += 1
            continue
        out.setdefault(request.prompt_id, []).append(list(record.get("token_ids") or []))
    took = time.perf_counter() - started
    print(f"  {url} {asked}: {len(requests)} samples in {took:.0f} s ({errors} failed)")
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", type=Path)
    parser.add_argument("--url-a", required=True)
    parser.add_argument("--url-b")
    parser.add_argument("--a", default="temperature=0.7")
    parser.add_argument("--b", default="temperature=0.7,top_p=0.9")
    parser.add_argument("--n", type=int, default=96)
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--pools", type=Path, default=Path(".cache/sampled-power"))
    parser.add_argument("--pool-a", type=int, default=384, help="A's samples per prompt (>= 2N)")
    parser.add_argument("--pool-b", type=int, default=192, help="B's samples per prompt (>= N)")
    args = parser.parse_args()
    a_set = settings(args.a)
    b_set = {**settings(args.b), "seed_base": 500_000_000}  # other seeds than A's
    print(f"pools: A {args.url_a} {args.a}; B {args.url_b or args.url_a} {args.b}")
    if args.pool_a < 2 * args.n or args.pool_b < args.n:
        parser.error("--pool-a must hold 2N samples and --pool-b N")
    a = pool(args.spec, args.url_a, a_set, args.pool_a, args.tokens, args.pools)
    b = pool(args.spec, args.url_b or args.url_a, b_set, args.pool_b, args.tokens, args.pools)
    rng = np.random.default_rng(0)
    found = alarms = 0
    started = time.process_time()
    for draw in range(args.draws):
        x, y, y2 = {}, {}, {}
        for prompt in a:
            order = rng.permutation(len(a[prompt]))
            y[prompt] = [a[prompt][i] for i in order[: args.n]]
            y2[prompt] = [a[prompt][i] for i in order[args.n : 2 * args.n]]
            pick = rng.permutation(len(b.get(prompt, [])))[: args.n]
            x[prompt] = [b[prompt][i] for i in pick]
        test, control = two_sample_test(x, y, seed=draw), two_sample_test(y2, y, seed=draw)
        found += test is not None and test.p_value <= args.alpha
        alarms += control is not None and control.p_value <= args.alpha
    cpu = time.process_time() - started
    print(
        f"N={args.n} a side, {len(a)} prompts x {args.tokens} tokens, alpha {args.alpha:g}: "
        f"B detected in {found}/{args.draws} draws ({found / args.draws:.0%}); AR-vs-AR false "
        f"alarms {alarms}/{args.draws} ({alarms / args.draws:.0%}); {cpu:.0f} s CPU for the tests"
    )


if __name__ == "__main__":
    main()
