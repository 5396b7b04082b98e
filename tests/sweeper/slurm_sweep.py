"""Helpers for the `sweeper run` tests through a real Slurm (tests/slurm_cluster.py): a spec whose
host is the cluster, the CLI run in a subprocess, and what the run left in the results and in the
scheduler's queue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from sweeper.analysis.best import SERVED_BY, served_rows
from sweeper.hosts.slurm_commands import job_name, parse_run_jobs, run_jobs_argv
from tests.signals import default_signals
from tests.slurm_cluster import GPUS_PER_NODE, PARTITION, SlurmCluster

#: The real bundled runtime on a tiny random model: AR plus two speculative configs.
GRID = {"budget": [8], "topk": [1, 2], "block_size": [4], "cuda_graph": [False]}


def hosts_yaml(slurm: SlurmCluster, **extra: Any) -> dict[str, Any]:
    """The `hosts:` entry for the cluster (the venv's Python runs the runtime on the nodes)."""
    login = slurm.controller
    host = {
        "kind": "slurm",
        "name": "cluster",
        "address": login.address,
        "user": login.user,
        "key_file": login.key_file,
        "known_hosts": slurm.known_hosts,
        "shared_dir": str(slurm.shared_dir),
        "python": sys.executable,
        "partition": PARTITION,
        "gpus_per_node": GPUS_PER_NODE,
        "time_limit": "30",
        "allocations": 2,
        **extra,
    }
    return {"hosts": [host]}


def write_spec(
    tmp: Path,
    name: str,
    slurm: SlurmCluster,
    *,
    port: int,
    temperature: tuple[float, ...] = (0, 0.7),
    prompts: int = 2,
    max_tokens: int = 12,
    repeats: int = 1,
    secrets: dict[str, str] | None = None,
    **host: Any,
) -> Path:
    body = {
        "name": name,
        **hosts_yaml(slurm, **host),
        "runtime": {
            "model": "tiny-random",
            "draft": "ngram",
            "device": "cpu",
            "port": port,
            "ready_timeout_s": 120,
            **({"secrets": secrets} if secrets else {}),
        },
        "grid": {**GRID, "temperature": list(temperature)},
        "baseline": True,
        "workload": {
            "api": "completions",
            "prompts": [
                {"id": f"p{i}", "text": f"Count with me: {i}, {i + 1},"} for i in range(prompts)
            ],
            "max_tokens": max_tokens,
            "repeats": repeats,
            "concurrency": [1],
            "warmup": 1,
            "seed": 7,
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def sweep_argv(spec: Path, results: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "sweeper.cli", "run", str(spec), "--results", str(results)] + [
        "--plain",
        *extra,
    ]


def run_sweep(
    spec: Path, results: Path, *extra: str, timeout: float = 400, env: dict[str, str] | None = None
) -> tuple[int, Path, str]:
    """`sweeper run` to the end: exit code, run directory, stderr."""
    proc = subprocess.run(
        sweep_argv(spec, results, *extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-3000:]
    return proc.returncode, Path(lines[-1]), proc.stderr


def start_sweep(spec: Path, results: Path, log: Path) -> subprocess.Popen[bytes]:
    """`sweeper run` in the background (SIGINT reaches it as a Ctrl-C would)."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            sweep_argv(spec, results),
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=default_signals,  # SIGINT must reach it whoever started the suite
        )


def run_dir_of(results: Path, name: str) -> Path | None:
    runs = sorted((results / name).glob("*/manifest.json")) if (results / name).exists() else []
    return runs[-1].parent if runs else None


def recorded(run_dir: Path | None) -> list[dict[str, Any]]:
    """The point lines recorded so far (complete lines only)."""
    if run_dir is None or not (run_dir / "points.jsonl").exists():
        return []
    text = (run_dir / "points.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def interrupt(proc: subprocess.Popen[bytes], timeout: float = 60) -> tuple[int, float]:
    """SIGINT (Ctrl-C); the exit code and the seconds until it exited."""
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout), time.monotonic() - started


def run_jobs(slurm: SlurmCluster, run_id: str) -> dict[str, str]:
    """`squeue --name sweeper-<run>`: every job of the run the scheduler still lists."""
    out = slurm.run(run_jobs_argv(run_id))
    assert out.returncode == 0, out.stderr
    return parse_run_jobs(out.stdout)


def job_state(slurm: SlurmCluster, job: str) -> str:
    out = slurm.run(["scontrol", "show", "job", "-o", job]).stdout
    fields = dict(w.split("=", 1) for w in out.split() if "=" in w)
    return fields.get("JobState", "")


def points(run_dir: Path) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "points.parquet")


def squeue_name(run_dir: Path) -> str:
    return job_name(run_dir.name)


def planned_and_confirming(table: pd.DataFrame, run_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The plan's points (restart 0) and those of each config the answer would name at a level
    that was measured there only after a switch, again there on a fresh process (restart 1,
    served by a load). Which config wins on tiny-random is chance, so a run has none or one
    such config; asserted here."""
    identities = json.loads((run_dir / "manifest.json").read_text())["identities"]
    served = pd.DataFrame(served_rows(table.to_dict("records"), identities))
    plan, again = served[served.restart == 0], served[served.restart > 0]
    assert set(again.restart) <= {1} and again.server_config_id.nunique() <= 1
    assert set(again[SERVED_BY]) <= {"load"}
    twin_of = ["budget", "topk", "block_size", "request_config_id"]
    for _, fresh in again.iterrows():
        twin = plan[(plan[twin_of] == fresh[twin_of]).all(axis=1)]
        assert len(twin) == 1 and set(twin[SERVED_BY]) == {"switch"}
    return plan, again


def failures(table: pd.DataFrame, log: str = "") -> str:
    """Every failed point with its whole reason, then the end of the run's log (for asserts)."""
    rows = table[table.status != "ok"]
    lines = [f"{r.point_id}: {r.reason}" for r in rows.itertuples()]
    return "\n".join(lines) + "\n--- log:\n" + log[-3000:]
