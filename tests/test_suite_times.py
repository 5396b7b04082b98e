"""Where `make test` and `make test-quick` leave their per-test times, and `make durations`,
which tabulates them: each target replaces only its own lanes' files, and a fresh clone (no
venv, no times yet) gets one line, exit 0. Run in a copy of the Makefile, pytest played by a
stand-in that writes the JUnit file it is asked for."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMES = Path(".pytest_cache/last-run")

#: `$(BIN)/python -m pytest ... --junitxml=FILE ...`: one passed test, named after its lane.
STAND_IN = r"""#!/bin/sh
for arg; do
  case $arg in --junitxml=*)
    file=${arg#--junitxml=}; lane=$(basename "$file" .xml); mkdir -p "$(dirname "$file")"
    printf '<testsuites><testsuite><testcase classname="tests.test_%s"' "$lane" > "$file"
    printf ' name="test_it" time="1.5"/></testsuite></testsuites>\n' >> "$file";;
  esac
done
"""


def _clone(tmp_path: Path) -> Path:
    """The Makefile and the durations script as a fresh clone has them."""
    (tmp_path / "bench").mkdir()
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copy(ROOT / "bench" / "suite_durations.py", tmp_path / "bench")
    return tmp_path


def _make(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(
        ["make", "-s", "--no-print-directory", f"PYTHON={sys.executable}", *args],
        cwd=clone, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip


def test_durations_on_a_fresh_clone_says_there_are_no_times_yet(tmp_path: Path) -> None:
    done = _make(_clone(tmp_path), "durations")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"no timings yet in {TIMES}: `make test` and `make test-quick` write them"
    ]


def test_each_target_keeps_the_others_times(tmp_path: Path) -> None:
    clone = _clone(tmp_path)
    bin_dir = clone / "stand-in"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(STAND_IN)
    (bin_dir / "python").chmod(0o755)
    for target in ("test", "test-quick", "test"):  # `setup` taken as done: no venv is built
        done = _make(clone, "-o", "setup", f"BIN={bin_dir}", target)
        assert done.returncode == 0, done.stderr
    lanes = sorted(p.relative_to(clone / TIMES).as_posix() for p in (clone / TIMES).rglob("*.xml"))
    assert lanes == ["test-quick/quick.xml", "test/parallel.xml", "test/quiet.xml"]
    table = _make(clone, "durations")
    assert table.returncode == 0, table.stderr
    heads = [line.split(" (")[0] for line in table.stdout.splitlines() if line.startswith("## ")]
    assert heads == [f"## {TIMES / 'test'}", f"## {TIMES / 'test-quick'}"]
    assert "| 1.5 | quick | tests/test_quick.py::test_it |" in table.stdout
    assert "| 1.5 | parallel | tests/test_parallel.py::test_it |" in table.stdout
