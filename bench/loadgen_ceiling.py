"""The load generator's ceiling: how many streamed chunks per second the sweeper's client can
take in on one core, against a loopback server that streams as fast as it can.

The fake runtime (tests/sweeper/fake_runtime.py, uvicorn) runs pinned to another core when there
is one; this process is pinned to core 0. We report chunks received per wall second and per
second of this process's CPU time: the second is the one-core ceiling of the client itself, the
first is bounded by whichever side is slower (on a 2-core machine often the server).

    python bench/loadgen_ceiling.py [--tokens 2000] [--concurrency 1 4 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweeper.engines.base import RequestSpec  # noqa: E402
from sweeper.measure.workload import run_requests  # noqa: E402
from tests.sweeper.conftest import FAKE_RUNTIME as FAKE  # noqa: E402
from tests.sweeper.conftest import free_port  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    server_cores = {cores[-1]} if len(cores) > 1 else set(cores)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(FAKE), "serve", "--port", str(port)],
        env={**os.environ, "FAKE_START_DELAY": "0"},
        preexec_fn=lambda: os.sched_setaffinity(0, server_cores),
        stdout=subprocess.DEVNULL,
    )
    os.sched_setaffinity(0, {cores[0]})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "fake server did not start"
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port}"
        warm = RequestSpec(prompt_id="w", prompt="w", max_tokens=100, temperature=0.0)
        asyncio.run(run_requests(base, [warm], concurrency=1))
        for conc in args.concurrency:
            reqs = [
                RequestSpec(
                    prompt_id=f"p{i}",
                    prompt=f"p{i}",
                    max_tokens=args.tokens,
                    temperature=0.0,
                    repeat=0,
                )
                for i in range(max(conc, 2))
            ]
            cpu0, wall0 = time.process_time(), time.perf_counter()
            result = asyncio.run(run_requests(base, reqs, concurrency=conc, warmup=0))
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            chunks = sum(r["output_tokens"] for _s, r in result.records)
            assert all(r["error"] is None for _s, r in result.records)
            print(
                f"concurrency {conc:>3}: {chunks} chunks in {wall:.2f} s wall = "
                f"{chunks / wall:,.0f} chunks/s; client CPU {cpu:.2f} s = "
                f"{chunks / cpu:,.0f} chunks per client-CPU-second (one-core ceiling)"
            )
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
