"""Issue 40's speed bisect on a busy machine: a history of the real runtime (tiny-random, CPU)
whose last commit sleeps 50 ms in every verify forward, bisected with `--metric output_tok_s
--threshold 10%` while CPU hogs (`python3 -c 'while True: pass'`) run beside it. It must name
the slow commit or say it could not decide because of noise (exit 6), never "not bad".

    python bench/bisect_busy.py [--commits 3] [--hogs 2] [--threshold 10%] [--keep DIR]

Prints the command, every line the bisect said, its exit code, the wall time, every restart it
measured (tok/s, whether its host was busy, the CPU others used) and the verdict. Minutes on a
2-core machine (each commit is three starts of the runtime, up to three times).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the histories live in tests/

from sweeper.exit_codes import EXIT_OK, EXIT_UNPROVEN  # noqa: E402
from tests.sweeper.bisecting.bisect_helpers import bisect_argv, bisect_spec  # noqa: E402
from tests.sweeper.bisecting.histories import runtime_history  # noqa: E402
from tests.sweeper.conftest import free_port  # noqa: E402

HOG = "while True: pass"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=3, help="Commits after the good end.")
    parser.add_argument("--hogs", type=int, default=2, help="CPU hogs beside the bisect.")
    parser.add_argument("--threshold", default="10%")
    parser.add_argument("--keep", type=Path, help="Work here and keep it (default: a temp dir).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bisect-busy-") as scratch:
        tmp = args.keep or Path(scratch)
        shas = runtime_history(tmp / "repo", args.commits, events={args.commits: "slow"})
        spec = bisect_spec(tmp, free_port(), tmp / "repo", fake=False, baseline=False)
        argv = bisect_argv(spec, shas[0], shas[-1], tmp / "results")
        argv += ["--metric", "output_tok_s", "--threshold", args.threshold]
        env = {**os.environ, "SWEEPER_STATE_DIR": str(tmp / "state")}
        hogs = [subprocess.Popen(["python3", "-c", HOG]) for _ in range(args.hogs)]
        started = time.monotonic()
        try:
            print(f"$ {' '.join(argv[1:])}   # beside {args.hogs} x python3 -c '{HOG}'")
            print(f"# the slow commit (50 ms sleep in every verify forward): {shas[-1]}")
            print(f"# load average before: {os.getloadavg()}", flush=True)
            done = subprocess.run(argv, env=env, stderr=subprocess.PIPE, text=True, check=False)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        wall = time.monotonic() - started
        print(done.stderr, end="")
        print(f"# exit {done.returncode} after {wall:.0f} s")
        print("# restarts measured: commit, run, tok/s, busy host, CPU cores others used")
        for row in restarts(tmp / "results", shas):
            print(f"#   {row}")
        named = f"first bad commit: {shas[-1]}" in done.stderr
        undecided = done.returncode == EXIT_UNPROVEN and "could not decide" in done.stderr
        if done.returncode == EXIT_OK and named:
            print("# verdict: named the slow commit")
        elif undecided:
            print("# verdict: could not decide, naming the noise")
        else:
            print("# verdict: WRONG (neither the slow commit nor 'could not decide')")
            return 1
        return 0


def restarts(results: Path, shas: list[str]) -> list[str]:
    """Every restart the bisect's steps recorded, in the order measured."""
    import pandas as pd

    names = {sha[:12]: f"commit {k}" for k, sha in enumerate(shas)}
    rows = []
    for points in sorted(results.glob("bisect/*/steps/*/runs/bis/*/points.parquet")):
        commit, run = names.get(points.parents[3].name, "?"), points.parent.name
        for r in pd.read_parquet(points).itertuples():
            rows.append(
                (str(r.started_at), commit, run, r.output_tok_s, r.host_busy, r.host_other_cpu)
            )
    return [
        f"{c} {run[-6:]} {v:.1f} busy={b} others={o:.2f}" for _, c, run, v, b, o in sorted(rows)
    ]


if __name__ == "__main__":
    sys.exit(main())
