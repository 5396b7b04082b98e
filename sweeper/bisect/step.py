"""One bisect step: a commit's tree written out, the reproducer spec pointed at it, and an
ordinary `sweeper run` of it.

The step's directory (`steps/<sha12>/`) holds the tree (`tree/`, the step's `runtime.package`:
the identity proof checks that the server runs exactly this source, by hash, as for any
package), the spec (`spec.yaml`: the user's spec cut down to the chosen points and prompts, a
plain spec anyone can run again), the run's log, and its results root (`runs/`): every run
there is an ordinary run directory that report, compare and diagnose read. The run goes
through `python -m sweeper.cli run` as a subprocess, as the nightly's does, so a bisect depends
only on that command's contract (last stdout line: the run directory; exit 0/3/4/6 measured,
130 interrupted), and a killed step leaves a run that `--resume-latest` continues. Any other
exit (a spec or resume the run refuses, its own I/O error, a lease it waited for in vain) is
about the bisect's own inputs, never the commit: it stops the bisect (`StepBroken`), nothing
recorded, and `--resume` measures the step again once that is fixed. Lines the run says while
it waits for a host another run leases are passed on to the terminal.

The tree written at a commit is checked before every use against the digest recorded when it
was written (`tree.sha256`): an edited or damaged tree stops the bisect, never measured as
that commit.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from sweeper.bisect.history import Source
from sweeper.bisect.state import BisectStateError
from sweeper.exit_codes import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNPROVEN,
    EXIT_VIOLATION,
)
from sweeper.results.history import HISTORY_ENV, HISTORY_FILE
from sweeper.results.reader import is_finished, runs_of_sweep
from sweeper.spec import Spec
from sweeper.spec.load import PACKAGE_MARKER
from sweeper.statefile import STATE, read_state

#: A step's run exit codes that mean "measured" (all well, failed points, violation, unproven).
MEASURED = frozenset({EXIT_OK, EXIT_FAILED, EXIT_VIOLATION, EXIT_UNPROVEN})
#: Lines of a step's run passed on to the bisect's terminal (its other lines go to the log).
RELAYED = ("waiting for host",)


class StepInterrupted(Exception):
    """The step's run was interrupted (Ctrl-C, SIGTERM): the bisect stops, resumable."""


class NoPackage(ValueError):
    """The commit's tree holds no `ddtree_runtime` package: the commit cannot be judged."""


class StepBroken(RuntimeError):
    """The step's run ended in a way that says nothing about the commit (the sweeper's own
    error, a lock): the bisect stops with its message instead of blaming or skipping."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)


def step_spec(spec: Spec, points: list[str], prompts: list[str], restarts: int) -> dict[str, Any]:
    """The reproducer: `spec` with only the chosen points (and their baselines), only the
    chosen prompts (with the turns they answer from), `restarts` starts of each config; each
    step points it at its commit (`prepare`)."""
    data = spec.model_dump(mode="json", exclude_none=True)
    workload = data["workload"]
    workload.pop("prompts_file", None)
    workload.pop("datasets", None)  # already expanded into `prompts` by load_spec
    if prompts:
        wanted = set(prompts) | {
            e for p in spec.workload.prompts if p.id in prompts for e in p.answers_from
        }
        workload["prompts"] = [p for p in workload["prompts"] if p["id"] in wanted]
    data["only"] = list(points)
    data.pop("search", None)
    data["repeats"] = {**data.get("repeats", {}), "restarts": restarts}
    return data


def step_dir(directory: Path, sha: str) -> Path:
    return directory / "steps" / sha[:12]


def prepare(directory: Path, source: Source, sha: str, spec_data: dict[str, Any]) -> Path:
    """Write the step's spec (again, when a kill left it half written), pointed at commit
    `sha`: an engine's checkout on its hosts (`runtime.source.rev`: each host writes the tree
    itself), else the bundled runtime's tree written here as `runtime.package` (NoPackage when
    the commit holds none; a BisectStateError when the tree written before was changed since)."""
    here = step_dir(directory, sha)
    here.mkdir(parents=True, exist_ok=True)
    runtime = dict(spec_data["runtime"])
    if "source" in runtime:
        runtime["source"] = {**runtime["source"], "rev": sha}
    else:
        tree = _tree(here, source, sha)
        if not tree.joinpath(*PACKAGE_MARKER).is_file():
            raise NoPackage(f"the commit's tree holds no {'/'.join(PACKAGE_MARKER)}")
        runtime["package"] = str(tree)
    spec_path = here / "spec.yaml"
    spec_data = {**spec_data, "runtime": runtime}
    spec_path.write_text(yaml.safe_dump(spec_data, sort_keys=False))
    return spec_path


def _tree(here: Path, source: Source, sha: str) -> Path:
    """The commit's tree under the step's directory, written once; its marker (`tree.sha256`:
    the sha and the digest of every file) is written last, so a tree without one was cut short
    by a kill and is written again, and a tree whose files no longer match it is refused."""
    tree, marker = here / "tree", here / "tree.sha256"
    if not marker.exists():
        shutil.rmtree(tree, ignore_errors=True)
        source.materialise(sha, tree)
        marker.write_text(f"{sha} {_digest(tree)}\n")
        return tree
    try:
        recorded = read_state(marker, STATE).decode().split()
    except (OSError, UnicodeDecodeError) as exc:
        recorded = [str(exc)]
    if recorded != [sha, _digest(tree)]:
        raise BisectStateError(
            f"{tree} is not commit {sha[:10]}'s tree as written ({marker} disagrees: edited or "
            f"damaged since): remove {tree} and {marker}, and --resume writes them again"
        )
    return tree


def _digest(tree: Path) -> str:
    """sha256 over the tree's files (relative path and bytes, in order), leaving out the
    bytecode Python writes beside a package it imports."""
    if not tree.is_dir():
        return "missing"
    digest = hashlib.sha256()
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(tree).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def finished_runs(directory: Path, sha: str, sweep: str) -> list[Path]:
    root = step_dir(directory, sha) / "runs" / sweep
    return [r for r in runs_of_sweep(root) if is_finished(r)] if root.is_dir() else []


#: Seconds a step's run waits for a host another run leases before the step fails with exit 75
#: (naming that run): a bisect left unattended outlasts a colleague's short sweep.
HOST_WAIT_S = 3600


def unfinished_run(directory: Path, sha: str, sweep: str) -> Path | None:
    root = step_dir(directory, sha) / "runs" / sweep
    left = [r for r in runs_of_sweep(root) if not is_finished(r)] if root.is_dir() else []
    return left[-1] if left else None


def run_step(
    directory: Path, sha: str, sweep: str, spec_path: Path, say: Callable[[str], None]
) -> int:
    """Run (or resume) the step's sweep; its exit code, one of `MEASURED`. Its lines go to
    the step's log; those that say it waits for a host (`RELAYED`) also to `say`."""
    here = step_dir(directory, sha)
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(spec_path), "--plain"]
    argv += ["--results", str(here / "runs"), "--wait-for-hosts", str(HOST_WAIT_S)]
    if unfinished_run(directory, sha, sweep) is not None:
        argv.append("--resume-latest")
    log = here / "run.log"
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        # A step is a measurement of an old commit, not a night of the sweep: its runs go into
        # a history of the step's own (beside its results), never the team's (whatever
        # SWEEPER_HISTORY_URL names), whose series it would break.
        own = {HISTORY_ENV: str(here / "runs" / HISTORY_FILE)}
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env={**os.environ, **own},
        )
        printed: list[str] = []
        reader = threading.Thread(target=lambda: printed.extend(process.stdout or ()))
        reader.start()
        try:
            for line in process.stderr or ():
                out.write(line)
                out.flush()
                if line.startswith(RELAYED):
                    say(f"  {line.rstrip()}")
            process.wait()
        except BaseException:
            # Stopped mid-step: the run stops as interrupted (resumable), never left behind.
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
            raise
        finally:
            reader.join(timeout=60)
        out.write("".join(printed))
    code = process.returncode
    tail = _last_line(log)
    if code == EXIT_INTERRUPTED or code < 0:
        raise StepInterrupted(f"the step's run was interrupted ({tail})")
    if code not in MEASURED:
        raise StepBroken(code, f"the step's run ended with exit {code}: {tail} (log {log})")
    return code


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error")]
    return (errors or lines or ["(no output)"])[-1].strip()
