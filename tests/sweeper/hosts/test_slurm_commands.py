"""The Slurm command lines and parsers of sweeper/hosts/slurm_commands.py, without a cluster:
hostile values stay single words, the background launch line runs detached and records srun's
exit status, squeue/scontrol outputs parse. (The real Slurm behind them: test_slurm_cluster.py.)
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper.hosts import slurm_commands as cmd
from tests.slurm_helpers import free_port, probe_argv

HOSTILE = "x'; touch /tmp/pwned-slurm; echo '$HOME `id`"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("45", 45.0),
        ("3:05", 185.0),
        ("1:02:03", 3723.0),
        ("2-00:00:00", 172800.0),
        ("1-02:03:04", 93784.0),
        ("UNLIMITED", None),
        ("NOT_SET", None),
    ],
)
def test_time_left_parses_every_squeue_form(text: str, seconds: float | None) -> None:
    assert cmd.time_left_seconds(text) == seconds


def test_job_id_from_sbatch_parsable() -> None:
    assert cmd.parse_job_id("123\n") == "123"
    assert cmd.parse_job_id("77;othercluster\n") == "77"
    with pytest.raises(ValueError, match="no job id"):
        cmd.parse_job_id("sbatch: error: Batch job submission failed\n")


def test_show_job_fields() -> None:
    line = (
        "JobId=9 JobName=sweeper-r1 JobState=NODE_FAIL Reason=NodeDown Dependency=(null) "
        "ExitCode=0:0 NodeList=sl204n2 Command=(null)\n"
    )
    fields = cmd.parse_show_job(line)
    assert fields["JobState"] == "NODE_FAIL"
    assert fields["Reason"] == "NodeDown"
    assert fields["ExitCode"] == "0:0"
    assert fields["JobName"] == "sweeper-r1"


def test_steps_by_name() -> None:
    text = "12.0|sweeper-r1-c0\n12.batch|batch\n12.3|sweeper-r1-c1\n"
    assert cmd.parse_steps(text) == {
        "sweeper-r1-c0": "12.0",
        "batch": "12.batch",
        "sweeper-r1-c1": "12.3",
    }


def test_allocation_keeps_spec_values_as_single_words() -> None:
    options = cmd.AllocationOptions(
        time_limit="30",
        gpus_per_node=8,
        partition=HOSTILE,
        account="acct",
        qos="high",
        constraint="b300",
        extra=("--reservation=x y",),
    )
    argv = cmd.allocate_argv("r1", options, output="/shared/alloc-%j.out")
    assert argv[0] == "sbatch" and argv[-1] == f"--wrap={cmd.HOLD_SCRIPT}"
    assert "--job-name=sweeper-r1" in argv
    assert {"--exclusive", "--no-requeue", "--gres=gpu:8", "--constraint=b300"} <= set(argv)
    assert shlex.split(shlex.join(argv)) == argv
    assert f"--partition={HOSTILE}" in argv


def test_background_line_detaches_and_records_srun_status(tmp_path: Path) -> None:
    # A stand-in srun: prints its argv one per line, then exits 3 after a moment.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "srun").write_text(
        '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\nsleep 0.3\nexit 3\n'
    )
    (fake_bin / "srun").chmod(0o755)
    files = cmd.step_files(str(tmp_path), "sweeper-r1-c0")
    argv = cmd.step_srun_argv(
        "12", "sweeper-r1-c0", ["python3", "-c", HOSTILE], files, cpus=4, env={"K": HOSTILE}
    )
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}"}
    started = time.monotonic()
    out = subprocess.run(
        ["sh", "-c", cmd.background_line(argv, files)],
        capture_output=True,
        text=True,
        env=env,
        timeout=10,
    )
    assert time.monotonic() - started < 0.3  # returned before srun ended: detached
    assert out.returncode == 0 and out.stdout.strip().isdigit()
    deadline = time.monotonic() + 10
    while not Path(files.srun_rc).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Path(files.srun_rc).read_text() == "3\n"
    assert Path(files.srun_log).read_text().splitlines() == argv[1:]
    assert not Path("/tmp/pwned-slurm").exists()


def test_probe_finds_the_server_pid_cmdline_env_keys_and_listener(tmp_path: Path) -> None:
    """The /proc probe against a real local server; `scontrol listpids` is a stand-in here."""
    port = free_port()
    server_argv = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]
    server_env = {**os.environ, "WANTED": "yes", "SECRET_TOKEN": "hunter2"}
    server = subprocess.Popen(
        server_argv, env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        fake_bin = tmp_path / "bin"
        fake_bin.mkdir()
        (fake_bin / "scontrol").write_text(
            f"#!/bin/sh\necho 'PID JOBID STEPID LOCALID GLOBALID'\necho '{server.pid} 12 0 0 0'\n"
        )
        (fake_bin / "scontrol").chmod(0o755)
        argv = probe_argv("12", "12.0", port, sys.executable, ["WANTED"])
        assert argv[:3] == ["srun", "--jobid=12", "--overlap"]
        on_node = argv[argv.index(sys.executable) :]  # what srun runs on the node
        env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}"}
        seen = json.loads(subprocess.run(on_node, capture_output=True, text=True, env=env).stdout)
    finally:
        server.terminate()
        server.wait(10)
    assert seen["pids"] == seen["roots"] == seen["listeners"] == [server.pid]
    proc = seen["procs"][str(server.pid)]
    assert proc["cmdline"] == server_argv
    assert proc["env"] == {"WANTED": "yes"}  # only the keys asked for (and SLURM ones)


def test_squeue_lines_parse() -> None:
    assert cmd.parse_job_line("RUNNING|None|sl5n1|29:55\n") == cmd.JobLine(
        "RUNNING", "None", "sl5n1", "29:55"
    )
    assert cmd.parse_job_line("") is None  # squeue no longer lists it
    assert cmd.parse_run_jobs("12|RUNNING\n13|PENDING\n") == {"12": "RUNNING", "13": "PENDING"}


def test_the_task_pid_is_the_local_id_0_row_of_listpids() -> None:
    text = (
        "PID      JOBID    STEPID   LOCALID GLOBALID\n"
        "166      1        3        -       -       \n"
        "165      1        3        0       0       \n"
    )
    assert cmd.parse_listpids(text) == 165
    assert cmd.parse_listpids("PID      JOBID    STEPID   LOCALID GLOBALID\n") is None


def test_overlap_steps_run_any_argv_beside_the_server() -> None:
    argv = cmd.overlap_argv("12", ["python3", "-c", HOSTILE])
    assert argv[:3] == ["srun", "--jobid=12", "--overlap"]
    assert argv[-3:] == ["python3", "-c", HOSTILE]
    assert shlex.split(shlex.join(argv)) == argv


def test_a_step_takes_every_cpu_and_gpu_and_one_output_file() -> None:
    files = cmd.step_files("/shared/run", "sweeper-r1-abc")
    argv = cmd.step_srun_argv("12", "sweeper-r1-abc", ["serve"], files, cpus=32, gpus=8)
    assert {
        "--cpus-per-task=32",
        "--gres=gpu:8",
        "--mem=0",
        "--output=/shared/run/sweeper-r1-abc.out",
    } <= set(argv)
    assert not any(a.startswith("--error") for a in argv)  # stderr joins stdout, in order
