"""What the fault corpus's cases are built from: a scratch directory, small specs, a finished
run of the fake runtime (made once, copied per case), tmpfs mounts, and running the real CLI.

Every case runs `python -m sweeper.cli ...` as a process, exactly as a user would, and the table
(`bench/fault_corpus.py`) quotes the line it printed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

#: This helper's loopback ports (the fake runtime listens on them).
BASE_PORT, DISK_PORT, LOAD_PORT = 18310, 18311, 18313
#: A spec for cases that must stop before anything starts (were one not to, it would start
#: no real model, on this helper's port).
MINIMAL = (
    "name: t\nruntime: {model: no-such-model, port: 18312, ready_timeout_s: 5}\n"
    "workload:\n  prompts: [{id: a, text: hi}]\n"
)


@dataclass
class Outcome:
    """What a command did: exit code and both streams."""

    code: int
    stdout: str
    stderr: str

    def line(self, expect: str) -> str:
        """The first printed line holding `expect` (stderr first), else the last stderr line."""
        lines = [*self.stderr.splitlines(), *self.stdout.splitlines()]
        found = [ln for ln in lines if expect in ln]
        if found:
            return found[0].strip()
        tail = self.stderr.strip().splitlines() or self.stdout.strip().splitlines() or [""]
        return tail[-1].strip()


def sweeper(*argv: str, env: dict[str, str] | None = None, timeout: float = 180) -> Outcome:
    """Run the sweeper CLI as a process (this checkout's code: PYTHONPATH is the repo root)."""
    root = str(Path(__file__).resolve().parents[3])
    full_env = {**os.environ, "PYTHONPATH": root, "COLUMNS": "200", **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", *argv],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=root,
    )
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


@dataclass
class Shared:
    """What several cases share, made once: a finished two-point run of the fake runtime."""

    root: Path
    _base: Path | None = None
    #: Other things made once and shared (`states.py`: the sound bisect state), by name.
    made: dict[str, Any] = field(default_factory=dict)

    def base_run(self) -> Path:
        if self._base is None:
            tmp = self.root / "base"
            tmp.mkdir(parents=True, exist_ok=True)
            spec = write_spec(
                tmp, BASE_PORT, fake_env=fake_runtime_env(tmp), topk=(4,), prompts=1,
                repeats=1, max_tokens=4,
            )  # fmt: skip
            done = sweeper("run", str(spec), "--results", str(tmp / "results"), "--plain")
            assert done.code == 0, done.stderr
            self._base = Path(done.stdout.strip().splitlines()[-1])
        return self._base


@dataclass
class Ctx:
    """One case's scratch space; `stack` undoes what the case set up (mounts)."""

    tmp: Path
    shared: Shared
    stack: ExitStack = field(default_factory=ExitStack)

    def spec(self, text: str, name: str = "spec.yaml") -> Path:
        path = self.tmp / name
        path.write_text(text)
        return path

    def run_copy(self, name: str = "a") -> Path:
        """A copy of the shared finished run, as `<tmp>/<name>/t/<run id>`."""
        base = self.shared.base_run()
        target = self.tmp / name / "t" / base.name
        shutil.copytree(base, target)
        return target

    def tmpfs(self, size: str, read_only: bool = False) -> Path:
        """A tmpfs of `size` mounted for this case (root only), unmounted after it."""
        path = Path(tempfile.mkdtemp(dir=self.tmp, prefix="tmpfs-"))
        options = f"size={size}" + (",ro" if read_only else "")
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
        self.stack.callback(subprocess.run, ["umount", "-l", str(path)], check=False)
        return path


def manifest(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / "manifest.json").read_text()))


def point_ids(run_dir: Path) -> list[str]:
    """Every point line's id, in file order (a duplicate would appear twice)."""
    lines = (run_dir / "points.jsonl").read_text().splitlines()
    return [json.loads(line)["point_id"] for line in lines]
