"""Benchmark: `sweeper report` on a run with 1,000,000 request rows (goal <= 20 s, <= 3 GB).

Builds a synthetic run with the results contract's columns (tests/sweeper/results_factory.py:
2 hosts x 124 points x 404 prompts x 20 repeats, 32 tokens each, so 31 M inter-token latencies
and 32 M token ids), then runs `python -m sweeper.cli report` on it in a child process and
prints the child's wall time and peak resident memory (ru_maxrss of the waited-for child).

    python bench/report_scale.py [--rows 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.sweeper.results_factory import RunShape, make_run  # noqa: E402

REPORT = """
import sys, time
from pathlib import Path
t0 = time.perf_counter()
from sweeper.report.assemble import build_view
from sweeper.report.render import write_report
from sweeper.results.reader import read_run
t1 = time.perf_counter()
view = build_view(read_run(Path(sys.argv[1])))
t2 = time.perf_counter()
out = write_report(view, Path(sys.argv[1]) / "report.html")
t3 = time.perf_counter()
print(f"imports {t1 - t0:.2f} s, assemble {t2 - t1:.2f} s, render {t3 - t2:.2f} s")
"""


def shape_for(rows: int) -> RunShape:
    """A sweep shaped like a big GPU sweep, with enough prompts to reach `rows` requests."""
    base = RunShape(
        run_id="20261129T020000Z-big0",
        hosts=("gpu-a", "gpu-b"),
        budgets=(4, 8, 16, 32),
        topks=(1, 2, 4, 8),
        temperatures=(0.0, 0.7),
        cuda_graphs=(False, True),
        max_tokens=32,
        repeats=20,
        n_prompts=1,
        diverge={(16, 8, 0.0, True): "diverged", (32, 8, 0.0, False): "garbled"},
        fail={(32, 1, 0.0, True): "server exited before ready"},
    )
    n_points = 2 * (2 + 15 * 2 * 2)  # AR per temperature + valid (budget, topk) x cg x temp
    live = n_points - 2  # one failed point per host has no requests
    base.n_prompts = math.ceil(rows / (live * base.repeats))
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="build the run here (or reuse it) and keep it")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="report-scale-"))
    t0 = time.perf_counter()
    existing = sorted(root.glob("*/*/requests.parquet"))
    run = existing[0].parent if existing else make_run(root, shape_for(args.rows))
    built = time.perf_counter() - t0
    import pyarrow.parquet as pq

    rows = pq.read_metadata(run / "requests.parquet").num_rows
    size = (run / "requests.parquet").stat().st_size / 2**20
    print(f"built {rows:,} request rows ({size:.0f} MiB requests.parquet) in {built:.1f} s")

    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", REPORT, str(run)], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(done.stderr)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_mib = usage.ru_maxrss / 1024
    cpu = usage.ru_utime + usage.ru_stime
    html = (run / "report.html").stat().st_size / 2**20
    print(done.stdout.strip())
    print(f"report: {wall:.2f} s wall (goal <= 20 s), {cpu:.2f} s CPU (user+sys; the machine may")
    print(f"        be shared), peak RSS {peak_mib:.0f} MiB (goal <= 3072 MiB)")
    verdict = "met" if wall <= 20 and peak_mib <= 3072 else "MISSED"
    print(f"report.html {html:.1f} MiB; goals {verdict} (wall-clock)")


if __name__ == "__main__":
    main()
