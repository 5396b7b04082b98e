"""Bench: what a Slurm host costs the sweeper, next to the SSH + systemd path, in one run on one
machine, through the product's own classes.

Boots the test Slurm cluster (root + Slurm packages; tests/slurm_cluster.py). Its controller is
also the login host and runs systemd, so the SSH/systemd figures come from the same machine over
the same kind of paramiko connection. A stand-in server (stdlib HTTP, ready as soon as Python is)
replaces the model load in the first two parts:
  1. submission to a running step: sbatch until RUNNING (queue), then `SlurmStepService.start`
     (srun in the background until squeue lists the step and the node lists its pid), then until
     the server answers from here; beside it, a unit's first start under `SystemdService`;
  2. step restart: stop (SIGTERM step / systemctl stop) + start + server answers + the /proc
     identity probe (through `srun --overlap` on the node / over SSH);
  3. per-point orchestration overhead of a whole `Runner` sweep with the tests' fake runtime
     (1.0 s "model load"): wall time minus queue waits, readiness waits and measurement windows,
     for a slurm host (one allocation) and for the same machine as an SSH host.

Run: `sudo .venv/bin/python bench/slurm_orchestration.py [--restarts 8] [--submissions 5]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweeper.engines.launch import Launch  # noqa: E402
from sweeper.engines.registry import engine_for  # noqa: E402
from sweeper.hosts import Host  # noqa: E402
from sweeper.hosts.slurm import Allocation, NodeHost, SlurmLogin  # noqa: E402
from sweeper.hosts.slurm_commands import AllocationOptions  # noqa: E402
from sweeper.hosts.ssh import SSHHost, SSHTarget  # noqa: E402
from sweeper.plan import build_plan  # noqa: E402
from sweeper.progress import PlainProgress  # noqa: E402
from sweeper.results.store import RunStore  # noqa: E402
from sweeper.runner import Runner  # noqa: E402
from sweeper.services import Service  # noqa: E402
from sweeper.services.identity import read_process  # noqa: E402
from sweeper.services.runtime_package import runtime_source_hash  # noqa: E402
from sweeper.services.slurm import SlurmStepService  # noqa: E402
from sweeper.services.systemd import SystemdService  # noqa: E402
from sweeper.spec import load_spec  # noqa: E402
from sweeper.workers.backends import open_backend  # noqa: E402
from tests import slurm_cluster  # noqa: E402
from tests.sweeper.sweep_fixtures import shim_env, shim_files  # noqa: E402

PORT = 18950
PYTHON = "/usr/bin/python3"
SERVER = """
import http.server, sys
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("0.0.0.0", int(sys.argv[1])), Ok).serve_forever()
"""


def poll(probe: Callable[[], object], timeout: float = 60.0, step: float = 0.02) -> float:
    """Seconds until probe() is truthy."""
    started = time.monotonic()
    while not probe():
        if time.monotonic() - started > timeout:
            raise TimeoutError("bench step did not complete")
        time.sleep(step)
    return time.monotonic() - started


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


def launch(port: int) -> Launch:
    argv = (PYTHON, "-c", SERVER, str(port))
    return Launch(argv=argv, port=port, launch_id=uuid.uuid4().hex[:16], env={"BENCH": "1"})


def job_gone(login: SlurmLogin, job: str) -> bool:
    """True once squeue no longer lists the job."""
    return login.job(job) is None


def median_row(rows: Sequence[tuple[float, ...]]) -> list[float]:
    return [statistics.median(col) for col in zip(*rows, strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=8)
    parser.add_argument("--submissions", type=int, default=5)
    parser.add_argument("--sweep-configs", type=int, default=4, help="0 skips part 3")
    args = parser.parse_args()
    reason = slurm_cluster.skip_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    cluster = slurm_cluster.boot_slurm_cluster()
    print(f"slurm cluster boot (3 hosts, until both nodes idle): {cluster.boot_s:.2f} s")
    c = cluster.controller
    ssh = SSHHost(
        "login", SSHTarget(c.address, 22, "root", (c.key_file,), None, cluster.known_hosts)
    )
    try:
        ssh.run(["true"])
        options = AllocationOptions(time_limit="30", gpus_per_node=slurm_cluster.GPUS_PER_NODE)
        login = SlurmLogin(ssh, uuid.uuid4().hex[:8], options, str(cluster.shared_dir))
        submissions(login, ssh, args.submissions)
        restarts(login, ssh, args.restarts)
        login.cancel_run()
        if args.sweep_configs:
            sweeps(cluster, args.sweep_configs)
    finally:
        ssh.close()
        slurm_cluster.shutdown_slurm_cluster(cluster)
    return 0


def allocate(login: SlurmLogin) -> tuple[Allocation, float]:
    started = time.monotonic()
    job = login.submit()
    poll(lambda: (line := login.job(job)) is not None and line.state == "RUNNING", step=0.05)
    line = login.job(job)
    assert line is not None
    return login.allocation(job, line), time.monotonic() - started


def submissions(login: SlurmLogin, ssh: SSHHost, n: int) -> None:
    rows, units = [], []
    for i in range(n):
        allocation, queued = allocate(login)
        service = SlurmStepService(login, allocation, NodeHost(login, allocation))
        t0 = time.monotonic()
        service.start(launch(PORT))
        t1 = time.monotonic()
        poll(partial(answers, f"http://{allocation.address}:{PORT}/"))
        rows.append((queued, t1 - t0, time.monotonic() - t1))
        login.cancel(allocation.job)
        poll(partial(job_gone, login, allocation.job), step=0.05)
        unit = SystemdService(ssh, unit=f"bench-first-{i}", remote_root="/opt/bench")
        t0 = time.monotonic()
        unit.start(launch(PORT + 1))
        t1 = time.monotonic()
        with ssh.open_tunnel(PORT + 1) as local:
            poll(partial(answers, f"http://127.0.0.1:{local}/"))
        units.append((t1 - t0, time.monotonic() - t1))
        unit.stop()
        unit.remove()
    queued, start, answer = median_row(rows)
    unit_start, unit_answer = median_row(units)
    print(f"1. submission to a running server (median of {n}):")
    print(f"   slurm: sbatch until RUNNING {queued:.3f} s + step start (listed, pid) {start:.3f} s")
    print(f"          + until it answers {answer:.3f} s = {queued + start + answer:.3f} s")
    print(f"   systemd (first start of a unit): start {unit_start:.3f} s")
    print(f"          + until it answers {unit_answer:.3f} s = {unit_start + unit_answer:.3f} s")


def restart_cycle(
    service: Service, host: Host, port: int, url: Callable[[], str]
) -> tuple[float, ...]:
    t0 = time.monotonic()
    service.stop()
    t1 = time.monotonic()
    instance = service.start(launch(port))
    t2 = time.monotonic()
    poll(lambda: answers(url()))
    t3 = time.monotonic()
    assert instance.pid is not None
    facts = read_process(host, PYTHON, instance.pid, port, ["BENCH"])
    assert facts.alive and facts.listeners, facts
    return (t1 - t0, t2 - t1, t3 - t2, time.monotonic() - t3)


def restarts(login: SlurmLogin, ssh: SSHHost, n: int) -> None:
    allocation, _ = allocate(login)
    node = NodeHost(login, allocation)
    step = SlurmStepService(login, allocation, node)
    url = f"http://{allocation.address}:{PORT}/"
    # The first start has nothing to stop: not a restart.
    slurm = [restart_cycle(step, node, PORT, lambda: url) for _ in range(n + 1)][1:]
    unit = SystemdService(ssh, unit="bench-restart", remote_root="/opt/bench")
    with ssh.open_tunnel(PORT + 1) as local:
        systemd = [
            restart_cycle(unit, ssh, PORT + 1, lambda: f"http://127.0.0.1:{local}/")
            for _ in range(n + 1)
        ][1:]
    unit.stop()
    unit.remove()
    print(f"2. restart to a proven server (median of {n}):")
    for name, rows in (("slurm step", slurm), ("systemd unit", systemd)):
        stop, start, answer, probe = median_row(rows)
        print(
            f"   {name:12}: stop {stop:.3f} + start {start:.3f} + answers {answer:.3f}"
            f" + /proc probe {probe:.3f} = {stop + start + answer + probe:.3f} s"
        )


def sweeps(cluster: slurm_cluster.SlurmCluster, n_configs: int) -> None:
    shim = cluster.shared_dir / "bench-shim"
    for name, text in shim_files().items():
        (shim / name).parent.mkdir(parents=True, exist_ok=True)
        (shim / name).write_text(text)
    c = cluster.controller
    login = {
        "address": c.address,
        "user": "root",
        "key_file": c.key_file,
        "known_hosts": cluster.known_hosts,
        "python": sys.executable,
    }
    hosts: dict[str, dict[str, Any]] = {
        "slurm": {
            "kind": "slurm",
            "name": "cluster",
            "shared_dir": str(cluster.shared_dir),
            "gpus_per_node": slurm_cluster.GPUS_PER_NODE,
            "time_limit": "30",
            **login,
        },
        "ssh": {"kind": "ssh", "name": "login", "remote_root": "/opt/bench", **login},
    }
    print("3. per-point orchestration of a Runner sweep (fake runtime, 1.0 s load, direct):")
    for kind, host in hosts.items():
        figures = sweep(host, shim, n_configs)
        print(
            f"   {kind:5}: {figures['points']} points, {figures['restarts']} restarts in "
            f"{figures['wall']:.2f} s; queue {figures['queue']:.2f} s, readiness "
            f"{figures['ready']:.2f} s, measurement {figures['measured']:.2f} s excluded; "
            f"orchestration {figures['overhead'] / figures['points']:.3f} s per point, "
            f"{figures['overhead'] / figures['restarts']:.3f} s per restart"
        )


def sweep(host: dict[str, Any], shim: Path, n_configs: int) -> dict[str, float]:
    body = {
        "name": "bench",
        "hosts": [host],
        "runtime": {
            "model": "fake",
            "port": PORT + 2,
            "env": {**shim_env(str(shim)), "FAKE_START_DELAY": "1.0"},
        },
        "grid": {
            "budget": [8 * (i + 1) for i in range(n_configs)],
            "topk": [1],
            "block_size": [4],
            "temperature": [0.0, 0.7],
        },
        "workload": {
            "api": "completions",
            "prompts": [{"id": "a", "text": "a"}, {"id": "b", "text": "b"}],
            "max_tokens": 16,
            "repeats": 2,
            "warmup": 1,
            "seed": 1,
        },
    }
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "bench.yaml").write_text(yaml.safe_dump(body))
        spec = load_spec(tmp / "bench.yaml")
        plan = build_plan(spec)
        fields = {
            "sweep": "bench",
            "sweeper_version": "bench",
            "spec": spec.model_dump(mode="json"),
            "runtime_source_hash": runtime_source_hash(),
        }
        store = RunStore.create(tmp / "results", fields)
        engine = engine_for(spec.runtime, store.manifest.runtime_source_hash)
        backends = {
            h.name: open_backend(h, spec, store.dir / "service", run_id=store.run_id)
            for h in spec.hosts
        }
        runner = Runner(spec, plan, store, backends, PlainProgress(), engine)
        started = time.monotonic()
        code = runner.run()
        wall = time.monotonic() - started
        for backend in backends.values():
            backend.host.close()
        points = store.points()
        assert code == 0 and all(p["status"] == "ok" for p in points.values()), points
        timings = store.manifest.timings
        name = host["name"]
        queue, ready = timings.get(f"{name}.queue_s", 0.0), timings[f"{name}.ready_s"]
        measured = sum(p["wall_s"] for p in points.values())
    return {
        "points": len(points),
        "restarts": plan.restarts,
        "wall": wall,
        "queue": queue,
        "ready": ready,
        "measured": measured,
        "overhead": wall - queue - ready - measured,
    }


if __name__ == "__main__":
    raise SystemExit(main())
