"""Issue 19's closing-note table: every case of the fault corpus (`tests/sweeper/faults/`), the
command it runs, its exit code and the one line it now prints; then the disk-full case's
figures (the line, exit code, manifest status, and the resume after space is freed).

    python bench/fault_corpus.py [--only NAME ...]

Runs the same cases as `tests/sweeper/faults/test_corpus.py` (CI); the tmpfs cases need root.
About a minute on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the corpus lives in tests/

from tests.sweeper.faults.context import Ctx, Shared  # noqa: E402
from tests.sweeper.faults.corpus import CASES, run_case  # noqa: E402


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="Case names to run (default: every case).")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.only or c.name in args.only]
    print("| case | before | command | exit | the line it now prints | holds |")
    print("| --- | --- | --- | --- | --- | --- |")
    failures = 0
    disk: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="fault-corpus-") as scratch:
        shared = Shared(Path(scratch) / "shared")
        for case in cases:
            if case.root and os.geteuid() != 0:
                print(f"| {case.name} | {cell(case.before)} | (needs root) | | | skipped |")
                continue
            tmp = Path(scratch) / case.name
            tmp.mkdir()
            started = time.monotonic()
            with Ctx(tmp, shared).stack as stack:
                ctx = Ctx(tmp, shared, stack)
                try:
                    command, out, line = run_case(case, ctx)
                    holds = out.code == case.code and case.expect in line
                    why = "yes" if holds else f"NO (expected exit {case.code}: {case.expect})"
                except AssertionError as exc:
                    command, out, line = case.name, None, ""
                    holds, why = False, f"NO: {exc}"
                if case.name == "disk_full_mid_run" and (tmp / "disk-full.json").exists():
                    disk = json.loads((tmp / "disk-full.json").read_text())
                    disk.update(line=line, code=out.code if out else None)
            failures += not holds
            code = out.code if out is not None else "?"
            print(
                f"| {case.name} | {cell(case.before)} | `{cell(command)}` | {code} | "
                f"`{cell(line)}` | {why} |",
                flush=True,
            )
            print(f"  ({case.name}: {time.monotonic() - started:.1f} s)", file=sys.stderr)
    if disk:
        print(
            f"\ndisk full (tmpfs 400k, 260k taken): `{disk['line']}`, exit {disk['code']}, "
            f"manifest status failed with {disk['recorded_before']} of 6 points recorded; after "
            f"the filler was removed `--resume` exited 0, manifest complete, "
            f"{disk['after_resume']} point lines, none duplicated."
        )
    print(f"\n{len(cases) - failures} of {len(cases)} cases hold.")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
