"""Issue 11's must-show runs: a planted runtime deployed as the run's `runtime.package`, swept
over budget {4, 16} x topk {1, 4} x cuda_graph {on, off} x concurrency {1, 4} on smollm2-135m,
then diagnosed. Prints the sweep's wall time, its exit code and the diagnosis sentence.

    python bench/diagnose_planted.py pad_visible      # padding implicated
    python bench/diagnose_planted.py stale_positions  # the same code, another signature
    python bench/diagnose_planted.py rounded_logits   # correct, with near-ties: nothing implicated
    python bench/diagnose_planted.py none             # the unpatched runtime
      [--results DIR] [--port N] [--prompts 4] [--repeats 2] [--max-tokens 32]

The planted copies are built by `tests/sweeper/planted.py` (mask.py's one-line recipe; see there
for `rounded_logits`). These are demonstrations of 10-15 minutes each on a 2-core machine, not CI.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the planted copies come from tests/

from sweeper.diagnosis.runs import diagnose_run  # noqa: E402
from sweeper.diagnosis.text import sentence, table  # noqa: E402
from sweeper.results.reader import read_run  # noqa: E402
from tests.sweeper.planted import plant_fault  # noqa: E402

#: The chat prompts of sweeps/local.yaml (answers that repeat, so the n-gram drafter drafts).
PROMPTS = [
    (p["id"], p["text"])
    for p in yaml.safe_load((ROOT / "sweeps" / "local.yaml").read_text())["workload"]["prompts"]
]


def spec(package: Path, name: str, args: argparse.Namespace) -> dict:
    return {
        "name": name,
        "hosts": ["local"],
        "runtime": {
            "model": "smollm2-135m",
            "draft": "ngram",
            "device": "cpu",
            "port": args.port,
            "ready_timeout_s": 240,
            "package": str(package),
        },
        "grid": {"budget": [4, 16], "topk": [1, 4], "block_size": [8], "cuda_graph": [True, False]},
        "baseline": True,
        "workload": {
            "api": "chat",
            "prompts": [{"id": i, "text": t} for i, t in PROMPTS[: args.prompts]],
            "max_tokens": args.max_tokens,
            "repeats": args.repeats,
            "concurrency": [1, 4],
            "warmup": 1,
            "seed": 1234,
        },
        # bfloat16-rounded logits flip the argmax where the margin is below 0.25 (planted.py).
        "determinism": {"near_tie_margin": 0.5 if args.fault == "rounded_logits" else 0.05},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "fault",
        nargs="?",
        default="pad_visible",
        choices=["pad_visible", "stale_positions", "rounded_logits", "none"],
    )
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--port", type=int, default=8731)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    name = f"planted-{args.fault.replace('_', '-')}"
    work = args.results / "planted-runtimes"
    package = plant_fault(work / args.fault, None if args.fault == "none" else args.fault)
    spec_path = work / f"{name}.yaml"
    spec_path.write_text(yaml.safe_dump(spec(package, name, args), sort_keys=False))
    argv = [
        sys.executable,
        "-m",
        "sweeper.cli",
        "run",
        str(spec_path),
        "--results",
        str(args.results),
    ]
    start = time.monotonic()
    done = subprocess.run([*argv, "--plain"], capture_output=True, text=True)
    wall = time.monotonic() - start
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    print(f"{name}: sweep exit {done.returncode}, wall {wall / 60:.1f} min, run {run_dir}")
    print(done.stderr.strip().splitlines()[-1])
    diagnosis = diagnose_run(read_run(run_dir))
    if diagnosis is None:
        print("no request records")
        return
    print(sentence(diagnosis))
    for row in table(diagnosis):
        print(f"  {row['factor']:<20} {row['status']:<40} {row['broken/judged per value']}")


if __name__ == "__main__":
    main()
