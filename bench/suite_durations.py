"""Where the test suite's time goes: the last runs' per-test and per-file durations, sorted.

`make test` and `make test-quick` each write one JUnit XML file per lane into a folder of their
own (.pytest_cache/last-run/TARGET/LANE.xml: pytest's `--junitxml`, a test's time being its
set-up, call and teardown together, so a module-scoped fixture counts in the first test that
uses it). This prints, as Markdown tables under a heading per folder (a run), the slowest tests
and every file's total, summed over the run's lanes; under xdist the sums are worker time, not
wall time. No file yet (a fresh clone) is one line, exit 0. Standard library only: `make
durations` runs it without the venv.

    python bench/suite_durations.py [--top 25] [--files 40] [DIR_OR_XML ...]
"""

from __future__ import annotations

import argparse
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

#: Where `make test` writes its JUnit files (the Makefile's TIMES).
DEFAULT_DIR = Path(".pytest_cache/last-run")


@dataclass(frozen=True)
class Case:
    """One test's outcome and time, as the JUnit file records it."""

    file: str
    name: str
    seconds: float
    outcome: str
    lane: str


def _file_of(classname: str) -> str:
    """tests.sweeper.foo.test_bar.TestX -> tests/sweeper/foo/test_bar.py (a class is dropped)."""
    parts = classname.split(".")
    while parts and parts[-1][:1].isupper():
        parts.pop()
    return "/".join(parts) + ".py"


def _outcome(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "passed"


def read_cases(path: Path) -> list[Case]:
    """The test cases of one JUnit XML file; an unreadable file stops with its name."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise SystemExit(f"{path}: not a readable JUnit XML file ({exc})") from exc
    cases = []
    for case in root.iter("testcase"):
        # xdist's loadgroup appends "@group" to a grouped test's id: the test is the same.
        name = case.get("name", "?").split("@")[0]
        cases.append(
            Case(
                file=_file_of(case.get("classname", "")),
                name=name,
                seconds=float(case.get("time", "0")),
                outcome=_outcome(case),
                lane=path.stem,
            )
        )
    return cases


def runs(paths: list[Path]) -> dict[Path, list[Path]]:
    """The XML files named, each a run, and those found in the directories named and in their
    folders, a run per folder; a path that does not exist holds none."""
    found: dict[Path, list[Path]] = {}
    for path in paths:
        if path.is_file():
            found[path] = [path]
        elif path.is_dir():
            for folder in [path, *sorted(p for p in path.iterdir() if p.is_dir())]:
                if files := sorted(folder.glob("*.xml")):
                    found[folder] = files
    return found


def tables(cases: list[Case], top: int, files: int) -> str:
    """The slowest tests and the per-file totals, as Markdown."""
    total = sum(c.seconds for c in cases)
    lanes: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        lanes[case.lane].append(case)
    lines = [
        f"{len(cases)} tests, {total:.0f} s summed "
        + ", ".join(
            f"{lane}: {len(cs)} tests {sum(c.seconds for c in cs):.0f} s"
            for lane, cs in sorted(lanes.items())
        ),
        "",
        f"Slowest {min(top, len(cases))} tests:",
        "",
        "| s | lane | test |",
        "| ---: | --- | --- |",
    ]
    for case in sorted(cases, key=lambda c: -c.seconds)[:top]:
        lines.append(f"| {case.seconds:.1f} | {case.lane} | {case.file}::{case.name} |")
    per_file: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        per_file[case.file].append(case)
    ranked = sorted(per_file.items(), key=lambda kv: -sum(c.seconds for c in kv[1]))
    lines += [
        "",
        f"Per file ({min(files, len(ranked))} of {len(ranked)}):",
        "",
        "| s | tests | file |",
        "| ---: | ---: | --- |",
    ]
    for name, cs in ranked[:files]:
        lines.append(f"| {sum(c.seconds for c in cs):.1f} | {len(cs)} | {name} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("paths", nargs="*", type=Path, default=[DEFAULT_DIR])
    ap.add_argument("--top", type=int, default=25, help="slowest tests shown (default 25)")
    ap.add_argument("--files", type=int, default=40, help="files shown (default 40)")
    args = ap.parse_args(argv)
    found = runs(args.paths)
    if not found:
        where = ", ".join(map(str, args.paths))
        print(f"no timings yet in {where}: `make test` and `make test-quick` write them")
        return 0
    for n, (run, files) in enumerate(found.items()):
        written = time.strftime(
            "%Y-%m-%d %H:%M", time.localtime(max(f.stat().st_mtime for f in files))
        )
        cases = [case for path in files for case in read_cases(path)]
        print(
            ("\n" if n else "")
            + f"## {run} (written {written})\n\n"
            + tables(cases, args.top, args.files)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
