"""The load generator's ceiling: streamed chunks per client CPU-second for 1, 2 and 4 client
processes, the concurrency and the Poisson rate it achieves against what it was asked.

The server is tests/sweeper/measure/sse_server.py (raw asyncio, HTTP/1.1 keep-alive, one-token
SSE events; not uvicorn, which is itself the bottleneck), pinned to the last core; this process
and its spawned load workers are pinned to the first. Chunks per client CPU-second is the
client's own cost (the workers' user + sys time over the point, the parent excluded and shown
apart): on a machine with spare cores, N workers on N cores take N times that per wall second.
The first row is the single-process `sweeper.measure.workload.run_requests` (the runner's client
before it measured through the pool), for the ratio.

    python bench/loadgen_ceiling.py [--tokens 2000] [--concurrency 32] [--processes 1 2 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweeper.engines.base import RequestSpec  # noqa: E402
from sweeper.engines.registry import engine_for  # noqa: E402
from sweeper.measure.arrivals import ArrivalProfile, exponential_ks  # noqa: E402
from sweeper.measure.pool import ClosedLoop, LoadResult, OpenLoop, run_load  # noqa: E402
from sweeper.measure.senders import spec_payload  # noqa: E402
from sweeper.measure.workload import run_requests  # noqa: E402
from sweeper.spec import RuntimeSpec  # noqa: E402
from tests.sweeper.measure.sse_server import start_server  # noqa: E402


def server_mean_in_flight(base: str) -> float:
    """Time-weighted mean of the server's in-flight count over its busy time since /reset."""
    levels = {int(k): v for k, v in httpx.get(base + "/stats").json()["time_at"].items()}
    busy = {k: v for k, v in levels.items() if k > 0}
    return sum(k * v for k, v in busy.items()) / max(sum(busy.values()), 1e-9)


def flag(result: LoadResult) -> str:
    return "client-bound: " + "; ".join(result.check.reasons) if result.check.client_bound else ""


def single_process_baseline(base: str, spec: RequestSpec, concurrency: int, n: int) -> None:
    httpx.post(base + "/reset")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    engine = engine_for(RuntimeSpec())
    result = asyncio.run(run_requests(base, [spec] * n, engine=engine, concurrency=concurrency))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    chunks = sum(r["output_tokens"] for _s, r in result.records)
    print(
        f"run_requests (1 process, former): {chunks / cpu:>9,.0f} chunks/client-CPU-s   "
        f"{chunks / wall:>9,.0f} chunks/s wall   server mean in flight "
        f"{server_mean_in_flight(base):.1f}/{concurrency}"
    )


def closed_loop_row(base: str, spec: RequestSpec, concurrency: int, n: int, procs: int) -> float:
    httpx.post(base + "/reset")
    parent0 = time.process_time()
    result = run_load(
        base, [spec_payload(spec)], ClosedLoop(concurrency, requests=n), processes=procs
    )
    parent = time.process_time() - parent0
    assert all(r["error"] is None for r in result.records), "a request failed"
    chunks = sum(r["output_tokens"] for r in result.records)
    cpu = sum(w.cpu_s for w in result.check.workers)
    shares = " ".join(f"{w.cpu_share:.0%}" for w in result.check.workers)
    print(
        f"pool, {procs} process{'es' if procs > 1 else '  '}:          "
        f"{chunks / cpu:>9,.0f} chunks/client-CPU-s   {chunks / result.wall_s:>9,.0f} chunks/s "
        f"wall   in flight: client mean {result.check.mean_in_flight:.1f} max "
        f"{result.check.max_in_flight}, server mean {server_mean_in_flight(base):.1f} "
        f"(asked {concurrency})   worker CPU {shares}; parent {parent:.2f} s  {flag(result)}"
    )
    return chunks / cpu


def poisson_row(base: str, rate: float, duration_s: float, tokens: int, procs: int) -> None:
    spec = RequestSpec(prompt_id="p", prompt="p", max_tokens=tokens, temperature=0.0)
    profile = ArrivalProfile(rate=rate, duration_s=duration_s)
    result = run_load(base, [spec_payload(spec)], OpenLoop(profile, seed=2024), processes=procs)
    sent = np.sort([r["sent_s"] for r in result.records if r.get("sent_s") is not None])
    scheduled = len(result.offsets_s or ())
    d, p = exponential_ks(np.diff(sent), rate)
    # The schedule's own draws, so a low p from an unlucky seed is not blamed on the client.
    d0, p0 = exponential_ks(np.diff(np.asarray(result.offsets_s or ())), rate)
    c = result.check
    late = [r["late_s"] for r in result.records if r.get("late_s") is not None]
    print(
        f"Poisson {rate:g} req/s x {duration_s:g} s, {tokens} tokens, {procs} processes: "
        f"scheduled {scheduled} ({scheduled / duration_s:.1f} req/s drawn), sent {len(sent)}, "
        f"achieved {c.achieved_rate:.1f} req/s; lateness p50 "
        f"{np.median(late) * 1e3:.1f}"
        f" p90 {c.late_p90_s * 1e3:.1f} p99 {c.late_p99_s * 1e3:.1f} ms; "  # type: ignore[operator]
        f"KS vs Exp(rate) on recorded gaps D={d:.3f} p={p:.2g} (drawn D={d0:.3f} p={p0:.2g}); "
        "worker CPU " + " ".join(f"{w.cpu_share:.0%}" for w in c.workers) + f"  {flag(result)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rate", type=float, nargs="+", default=[25.0, 100.0])
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    server_cores = {cores[-1]}
    client_cores = {cores[0]} if len(cores) > 1 else set(cores)
    proc, base = start_server(cpus=server_cores)
    os.sched_setaffinity(0, client_cores)  # spawned workers inherit it
    try:
        print(
            f"load average {os.getloadavg()[0]:.1f}; "
            f"server on core {sorted(server_cores)}, client on core {sorted(client_cores)}; "
            f"closed loop at concurrency {args.concurrency}, {args.requests} requests of "
            f"{args.tokens} one-token chunks"
        )
        spec = RequestSpec(prompt_id="p", prompt="p", max_tokens=args.tokens, temperature=0.0)
        single_process_baseline(base, spec, args.concurrency, args.requests)
        per_cpu = {
            n: closed_loop_row(base, spec, args.concurrency, args.requests, n)
            for n in args.processes
        }
        first = per_cpu[args.processes[0]]
        print(
            "chunks per client-CPU-second relative to "
            f"{args.processes[0]} process: "
            + ", ".join(f"{n}: {v / first:.2f}" for n, v in per_cpu.items())
        )
        for rate in args.rate:
            poisson_row(base, rate, args.duration, 200, 2)
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
