"""How soon readiness notices a runtime that just became ready (goal: median <= 0.25 s).

Starts the fake runtime (a real loopback server, tests/sweeper/fake_runtime.py) N times through
ProcessService with a loading phase of random length, waits with `readiness.wait_healthy`,
and compares the moment it returned with the moment /health turned 200 (`ready_at`, reported by
the server itself; same clock, same machine). Prints median / p90 / max of the detection lag.

    python bench/readiness_latency.py [--trials 12]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweeper.engines.launch import Launch  # noqa: E402
from sweeper.services.local_process import ProcessService  # noqa: E402
from sweeper.services.readiness import wait_healthy  # noqa: E402
from tests.sweeper.conftest import FAKE_RUNTIME as FAKE  # noqa: E402
from tests.sweeper.conftest import free_port  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=12)
    args = parser.parse_args()
    lags = []
    with tempfile.TemporaryDirectory() as tmp:
        svc = ProcessService(Path(tmp))
        for trial in range(args.trials):
            port = free_port()
            delay = random.uniform(1.5, 3.0)  # past interpreter start-up, at a random phase
            argv = (sys.executable, str(FAKE), "serve", "--port", str(port), "--launch-id", "b")
            launch = Launch(
                argv=argv, port=port, launch_id="b", env={"FAKE_START_DELAY": str(delay)}
            )
            svc.start(launch)
            base = f"http://127.0.0.1:{port}"
            wait_healthy(svc, base, 30)
            noticed = time.time()
            ready_at = httpx.get(f"{base}/server_info").json()["ready_at"]
            lags.append(noticed - ready_at)
            svc.stop(5)
            print(f"trial {trial}: loading {delay:.2f} s, noticed {lags[-1] * 1000:.0f} ms after")
    lags.sort()
    p90 = lags[min(len(lags) - 1, int(0.9 * len(lags)))]
    median_ms = statistics.median(lags) * 1000
    print(
        f"readiness detection lag over {len(lags)} starts: median {median_ms:.0f}"
        f" ms, p90 {p90 * 1000:.0f} ms, max {lags[-1] * 1000:.0f} ms (goal: median <= 250 ms)"
    )


if __name__ == "__main__":
    main()
