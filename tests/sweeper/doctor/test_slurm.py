"""`sweeper doctor` against a real Slurm: the login host, the partition, a short allocation of its
own, the shared directory seen from a node, the node's Python and packages, the runtime's
selftest as a step; and a partition the cluster does not have. No job is left behind.

Root + the Slurm packages only (tests/slurm_cluster.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.exit_codes import EXIT_CHECK_FAILED
from tests.slurm_cluster import SlurmCluster
from tests.sweeper.doctor.test_checks import _rows
from tests.sweeper.slurm_sweep import hosts_yaml

pytestmark = pytest.mark.slow
CHECKS = ("connectivity", "partition", "allocation", "shared_dir", "python", "gpus", "disk")


def _spec(tmp_path: Path, slurm: SlurmCluster, **host: object) -> Path:
    body = {
        "name": "doctor",
        **hosts_yaml(slurm, **host),
        "runtime": {"model": "tiny-random", "port": 18660},
        "workload": {"prompts": [{"id": "p", "text": "hi"}]},
    }
    path = tmp_path / "doctor.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def _doctor_jobs(slurm: SlurmCluster) -> list[str]:
    names = slurm.run(["squeue", "-h", "-o", "%j"]).stdout.split()
    return [n for n in names if n.startswith("sweeper-doctor-")]


def test_doctor_checks_a_slurm_host_and_runs_the_selftest_as_a_step(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    result = CliRunner().invoke(app, ["doctor", str(_spec(tmp_path, slurm_cluster))])
    rows = _rows(result.output)
    for check in (*CHECKS, "selftest"):
        assert rows.get(("cluster", check)) == "ok", result.output
    assert result.exit_code == 0, result.output
    assert "torch 2." in result.output
    assert _doctor_jobs(slurm_cluster) == []


def test_doctor_names_a_partition_the_cluster_lacks(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, slurm_cluster, partition="nope")
    result = CliRunner().invoke(app, ["doctor", str(spec), "--no-selftest"])
    rows = _rows(result.output)
    assert rows[("cluster", "connectivity")] == "ok"
    assert rows[("cluster", "partition")] == "fail"
    assert rows[("cluster", "allocation")] == "fail"
    assert "Invalid partition name specified" in result.output  # sbatch's own words
    assert result.exit_code == EXIT_CHECK_FAILED
    assert _doctor_jobs(slurm_cluster) == []
