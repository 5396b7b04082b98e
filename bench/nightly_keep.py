"""`sweeper nightly --keep 3` ten nights against the fake runtime: run directories on disk
against nights in the history (pruning never prunes history).

    PYTHONPATH=. python bench/nightly_keep.py SCRATCH_DIR
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from sweeper.results.history import history_frame
from tests.sweeper.conftest import free_port
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

NIGHTS, KEEP = 10, 3


def main() -> None:
    scratch = Path(sys.argv[1])
    results = scratch / "results"
    env = fake_runtime_env(scratch, {"FAKE_TOKEN_DELAY": "0.002"})
    spec = write_spec(scratch, free_port(), fake_env=env, topk=(4,))
    nightly = [sys.executable, "-m", "sweeper.cli", "nightly", str(spec)]
    for night in range(NIGHTS):
        started = time.monotonic()
        done = subprocess.run(
            [*nightly, "--results", str(results), "--keep", str(KEEP)],
            capture_output=True,
            text=True,
        )
        took = time.monotonic() - started
        print(f"night {night}: exit {done.returncode} in {took:.1f} s {done.stdout.strip()[:300]}")
    runs = sorted(p.name for p in (results / "t").iterdir() if p.is_dir())
    frame = history_frame(results / "history.sqlite3")
    print(f"run directories on disk: {len(runs)}; nights in the history: ", end="")
    print(f"{frame['run_id'].nunique()} ({len(frame)} rows)")
    report = (results / "t" / runs[-1] / "report.html").read_text()
    print(f"trends page written: {(results / 'history.html').exists()}; ", end="")
    section = 'id="history"' in report
    print(f"the last report's history section: {section}")


if __name__ == "__main__":
    main()
