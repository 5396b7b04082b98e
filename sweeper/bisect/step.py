"""One bisect step: a commit's tree written out, the reproducer spec pointed at it, and an
ordinary `sweeper run` of it.

The step's directory (`steps/<sha12>/`) holds the tree (`tree/`, the step's `runtime.package`:
the identity proof checks that the server runs exactly this source, by hash, as for any
package), the spec (`spec.yaml`: the user's spec cut down to the chosen points and prompts, a
plain spec anyone can run again), the run's log, and its results root (`runs/`): every run
there is an ordinary run directory that report, compare and diagnose read. The run goes
through `python -m sweeper.cli run` as a subprocess, as the nightly's does, so a bisect depends
only on that command's contract (last stdout line: the run directory; exit 0/3/4/6 measured,
2 a spec that does not load, 130 interrupted), and a killed step leaves a run that
`--resume-latest` continues.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from sweeper.bisect.history import Source
from sweeper.exit_codes import EXIT_BAD_SPEC, EXIT_INTERRUPTED
from sweeper.results.reader import is_finished, runs_of_sweep
from sweeper.spec import Spec

#: A step's run exit codes that mean "measured" (all well, failed points, violation, unproven).
MEASURED = frozenset({0, 3, 4, 6})


class StepInterrupted(Exception):
    """The step's run was interrupted (Ctrl-C, SIGTERM): the bisect stops, resumable."""


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
    itself), else the bundled runtime's tree written here as `runtime.package`."""
    here = step_dir(directory, sha)
    here.mkdir(parents=True, exist_ok=True)
    runtime = dict(spec_data["runtime"])
    if "source" in runtime:
        runtime["source"] = {**runtime["source"], "rev": sha}
    else:
        tree = here / "tree"
        if not (tree / ".complete").exists():
            source.materialise(sha, tree)
            (tree / ".complete").write_text(sha + "\n")
        runtime["package"] = str(tree)
    spec_path = here / "spec.yaml"
    spec_data = {**spec_data, "runtime": runtime}
    spec_path.write_text(yaml.safe_dump(spec_data, sort_keys=False))
    return spec_path


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
    directory: Path, sha: str, sweep: str, spec_path: Path
) -> tuple[int, Path | None, str]:
    """Run (or resume) the step's sweep; (exit code, run dir, the log's last line)."""
    here = step_dir(directory, sha)
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(spec_path), "--plain"]
    argv += ["--results", str(here / "runs"), "--wait-for-hosts", str(HOST_WAIT_S)]
    if unfinished_run(directory, sha, sweep) is not None:
        argv.append("--resume-latest")
    log = here / "run.log"
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=out, text=True)
        try:
            stdout, _ = process.communicate()
        except BaseException:
            # Stopped mid-step: the run stops as interrupted (resumable), never left behind.
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
            raise
        out.write(stdout)
    code = process.returncode
    lines = stdout.strip().splitlines()
    run_dir = Path(lines[-1]) if lines and Path(lines[-1]).is_dir() else None
    tail = _last_line(log)
    if code == EXIT_INTERRUPTED or code < 0:
        raise StepInterrupted(f"the step's run was interrupted ({tail})")
    if code not in MEASURED and code != EXIT_BAD_SPEC:
        raise StepBroken(code, f"the step's run ended with exit {code}: {tail} (log {log})")
    return code, run_dir, tail


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("error", "/"))]
    return (errors or lines or ["(no output)"])[-1].strip()
