"""pytest run as a process on planted test files, as `make test` runs it (for the tests of the
suite's own plugins: tests/ci_rules.py, tests/lanes.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_pytest(
    directory: Path, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """pytest on the test files in `directory` alone (no project config, no cache), with this
    repository importable so `-p tests.NAME` loads the plugin under test; `env` defaults to ours."""
    environment = dict(os.environ if env is None else env)
    path = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    environment["PYTHONPATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", os.devnull, "--rootdir", str(directory),
         "-p", "no:cacheprovider", *args, str(directory)],
        capture_output=True, text=True, timeout=120, env=environment, cwd=directory,
    )  # fmt: skip
