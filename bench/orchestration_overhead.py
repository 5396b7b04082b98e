"""Orchestration overhead per point, excluding model load and measurement (goal: <= 1 s).

Runs a real sweep (Runner, ProcessService, readiness, identity, store) against the fake runtime
(tests/sweeper/fake_runtime.py) with a fixed "model load" of FAKE_START_DELAY seconds, then
splits the wall time: readiness waits (process start + load, excluded), measurement windows
(excluded), and everything else (stopping the previous instance, starting, identity checks,
recording, consolidating parquet/csv, manifest, logs), reported per point and per restart.

    python bench/orchestration_overhead.py [--configs 4] [--temperatures 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweeper.engines.registry import engine_for  # noqa: E402
from sweeper.hosts.local import LocalHost  # noqa: E402
from sweeper.plan import build_plan  # noqa: E402
from sweeper.progress import PlainProgress  # noqa: E402
from sweeper.results.store import RunStore  # noqa: E402
from sweeper.runner import Runner  # noqa: E402
from sweeper.services.local_process import ProcessService  # noqa: E402
from sweeper.services.runtime_package import runtime_source_hash  # noqa: E402
from sweeper.spec import load_spec  # noqa: E402
from sweeper.workers.backends import Backend  # noqa: E402
from tests.sweeper.conftest import free_port  # noqa: E402
from tests.sweeper.sweep_fixtures import fake_runtime_env  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", type=int, default=4, help="speculative server configs")
    parser.add_argument("--temperatures", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        # The fake starts exactly as the runtime is started, so the /proc identity proof holds.
        env = fake_runtime_env(tmp, {"FAKE_START_DELAY": "1.0", "FAKE_TOKEN_DELAY": "0.005"})
        spec_path = tmp / "bench.yaml"
        spec_path.write_text(
            yaml.safe_dump(
                {
                    "name": "bench",
                    "runtime": {"model": "fake", "port": free_port(), "env": env},
                    "grid": {
                        "budget": [8 * (i + 1) for i in range(args.configs)],
                        "topk": [1],
                        "block_size": [4],
                        "temperature": [0.0, 0.7, 1.0][: args.temperatures],
                    },
                    "workload": {
                        "api": "completions",
                        "prompts": [{"id": "a", "text": "a"}, {"id": "b", "text": "b"}],
                        "max_tokens": 16,
                        "repeats": 2,
                        "warmup": 1,
                        "seed": 1,
                    },
                }
            )
        )
        spec = load_spec(spec_path)
        plan = build_plan(spec)
        source = runtime_source_hash()
        fields = {
            "sweep": "bench",
            "sweeper_version": "b",
            "spec": {},
            "runtime_source_hash": source,
        }
        store = RunStore.create(tmp / "results", fields)
        backend = Backend(LocalHost(), ProcessService(store.dir / "service"), sys.executable)
        engine = engine_for(spec.runtime, source)
        runner = Runner(spec, plan, store, {"local": backend}, PlainProgress(), engine)
        t0 = time.monotonic()
        code = runner.run()
        wall = time.monotonic() - t0
        points = store.points()
        ready = store.manifest.timings["local.ready_s"]
        measured = sum(p["wall_s"] for p in points.values())
        restarts = plan.restarts
        overhead = wall - ready - measured
    print(f"exit {code}: {len(points)} points, {restarts} restarts in {wall:.2f} s")
    print(f"  readiness waits (interpreter start + 1.0 s load, excluded): {ready:.2f} s")
    print(f"  measurement windows (excluded): {measured:.2f} s")
    print(
        f"  orchestration overhead: {overhead:.2f} s total = {overhead / len(points):.3f} s per "
        f"point ({overhead / restarts:.3f} s per restart incl. stop) (goal: <= 1 s per point)"
    )
    print(
        f"  runner's own split: {sum(runner.overhead_s):.2f} s over "
        f"{len(runner.overhead_s)} start/point phases"
    )


if __name__ == "__main__":
    main()
