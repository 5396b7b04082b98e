"""Bench: SSH round trips and the sweeper's orchestration cost per point on a remote host.

Boots one disposable test host (root only; see tests/testhosts.py) and measures, over one reused
paramiko connection:
  - round trip of a trivial command (`true`), and of an SFTP atomic file write;
  - per point, the orchestration the sweeper adds around a restart: stop the previous unit,
    render + install the unit, daemon-reload, restart, wait for the new InvocationID/MainPID,
    notice /health turning 200, fetch the point's journal lines. The "model load" is replaced by
    a tiny stdlib HTTP server that is ready as soon as Python has started; its own start-up
    time (exec to listening) is reported apart and excluded, as is measurement.

Then a whole `Runner` sweep on the host (SSHHost + SystemdService + bundle, through an SSH tunnel)
with the fake runtime of the tests (FAKE_START_DELAY=1.0 s "model load"), measured like
bench/orchestration_overhead.py: wall time minus readiness waits minus measurement windows.

Run: `sudo .venv/bin/python bench/ssh_orchestration.py [--commands 200] [--points 10]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweeper.engines.launch import Launch  # noqa: E402
from sweeper.hosts.ssh import SSHHost  # noqa: E402
from sweeper.hosts.ssh_target import SSHTarget  # noqa: E402
from sweeper.services.readiness import wait_healthy  # noqa: E402
from sweeper.services.systemd import SystemdService  # noqa: E402
from tests import testhosts  # noqa: E402

PORT = 18900
SERVER = """
import http.server, sys, time
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("0.0.0.0", int(sys.argv[1])), Health)
open(sys.argv[2], "w").write(repr(time.time()))
server.serve_forever()
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--points", type=int, default=10)
    parser.add_argument("--sweep-configs", type=int, default=4, help="0 skips the sweep part")
    args = parser.parse_args()
    reason = testhosts.skip_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    boot_started = time.monotonic()
    test_host = testhosts.boot("swbench", 240)
    boot_s = time.monotonic() - boot_started
    try:
        run(test_host, boot_s, args.commands, args.points)
        if args.sweep_configs:
            run_sweep(test_host, args.sweep_configs)
        return 0
    finally:
        down_started = time.monotonic()
        testhosts.shutdown(test_host)
        print(f"test host down: {time.monotonic() - down_started:.2f} s")


def run(test_host: testhosts.TestHost, boot_s: float, n_commands: int, n_points: int) -> int:
    target = SSHTarget(
        test_host.address, 22, "root", (test_host.key_file,), None, test_host.known_hosts
    )
    host = SSHHost("bench", target)
    started = time.monotonic()
    host.run(["true"])
    connect_ms = (time.monotonic() - started) * 1000
    trips = []
    for _ in range(n_commands):
        t0 = time.perf_counter()
        host.run(["true"])
        trips.append((time.perf_counter() - t0) * 1000)
    writes = []
    for i in range(50):
        t0 = time.perf_counter()
        host.put_file(f"/tmp/bench/{i % 5}.txt", b"x" * 1024)
        writes.append((time.perf_counter() - t0) * 1000)
    print(f"test host boot: {boot_s:.2f} s; first connect + command: {connect_ms:.0f} ms")
    print(
        f"SSH command round trip over the reused connection (n={n_commands}): "
        f"median {statistics.median(trips):.1f} ms, p90 {pct(trips, 0.9):.1f} ms, "
        f"min {min(trips):.1f} ms"
    )
    print(
        f"SFTP atomic 1 KiB write (temp + rename, n=50): median {statistics.median(writes):.1f} ms"
    )

    service = SystemdService(host, unit="bench-orchestration", remote_root="/opt/bench")
    rows = []
    for i in range(n_points):
        ready_file = f"/tmp/ready-{uuid.uuid4().hex[:8]}"
        launch = Launch(
            argv=("/usr/bin/python3", "-c", SERVER, str(PORT), ready_file),
            port=PORT,
            launch_id=uuid.uuid4().hex[:12],
            env={"BENCH_POINT": str(i)},
        )
        t0 = time.monotonic()
        service.stop()
        t1 = time.monotonic()
        service.start(launch)
        t2 = time.monotonic()
        wait_healthy(service, f"http://{host.address}:{PORT}", 60.0)
        t3 = time.monotonic()
        service.logs()
        t4 = time.monotonic()
        ready_at = float(host.read_file(ready_file))
        # Wall-clock times: the test host shares this machine's clock (no time namespace).
        server_up = ready_at - (time.time() - (time.monotonic() - t2))
        detect_lag = t3 - t2 - max(server_up, 0.0)
        rows.append((t1 - t0, t2 - t1, max(server_up, 0.0), detect_lag, t4 - t3))
    service.stop()
    service.remove()
    host.close()
    stop, start, load, lag, logs = (statistics.median(col) for col in zip(*rows, strict=True))
    orchestration = stop + start + lag + logs
    print(f"per point (median of {n_points} restarts of a systemd unit over SSH):")
    print(f"  stop previous unit + port free      {stop:6.3f} s")
    print("  install unit + reload + restart +")
    print(f"    new InvocationID/MainPID proven   {start:6.3f} s")
    print(f"  server start-up (stand-in for model load, excluded)  {load:6.3f} s")
    print(f"  /health readiness detection lag     {lag:6.3f} s")
    print(f"  journal lines by cursor             {logs:6.3f} s")
    print(
        f"  orchestration per point (excluding model load and measurement): {orchestration:.3f} s"
    )
    print(f"  connections opened: {host.connects}")
    return 0


def run_sweep(test_host: testhosts.TestHost, n_configs: int) -> None:
    """A Runner sweep over SSH; orchestration = wall - readiness waits - measurement."""
    import tempfile

    import yaml

    from sweeper.engines.registry import engine_for
    from sweeper.plan import build_plan
    from sweeper.progress import PlainProgress
    from sweeper.results.store import RunStore
    from sweeper.runner import Runner
    from sweeper.services.runtime_package import runtime_source_hash
    from sweeper.spec import load_spec
    from sweeper.workers.backends import open_backend
    from tests.sweeper.sweep_fixtures import shim_env, shim_files
    from tests.sweeper.testhost_fixture import hosts_yaml

    # The fake starts on the host exactly as the runtime would (a shim `ddtree_runtime`).
    target = SSHTarget(
        test_host.address, 22, "root", (test_host.key_file,), None, test_host.known_hosts
    )
    setup = SSHHost("setup", target)
    for name, text in shim_files().items():
        setup.run(["mkdir", "-p", "/opt/bench-fake/ddtree_runtime"])
        setup.put_file(f"/opt/bench-fake/{name}", text.encode())
    setup.close()
    env = {**shim_env("/opt/bench-fake"), "FAKE_START_DELAY": "1.0", "FAKE_TOKEN_DELAY": "0.005"}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        hosts = hosts_yaml([test_host], test_host.known_hosts, access="tunnel")
        body = {
            "runtime": {"model": "fake", "port": PORT + 1, "env": env},
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
        spec_path = tmp / "bench.yaml"
        spec_path.write_text("name: sshbench\n" + hosts + yaml.safe_dump(body, sort_keys=False))
        spec = load_spec(spec_path)
        plan = build_plan(spec)
        source = runtime_source_hash()
        fields = {
            "sweep": "sshbench",
            "sweeper_version": "b",
            "spec": {},
            "runtime_source_hash": source,
        }
        store = RunStore.create(tmp / "results", fields)
        backends = {h.name: open_backend(h, spec, store.dir / "service") for h in spec.hosts}
        engine = engine_for(spec.runtime, source)
        runner = Runner(spec, plan, store, backends, PlainProgress(), engine)
        t0 = time.monotonic()
        code = runner.run()
        wall = time.monotonic() - t0
        for backend in backends.values():
            backend.host.close()
        points = store.points()
        ready = store.manifest.timings[f"{test_host.name}.ready_s"]
        measured = sum(p["wall_s"] for p in points.values())
        overhead = wall - ready - measured
    print(f"Runner sweep over SSH (tunnel): exit {code}, {len(points)} points, ")
    print(f"  {plan.restarts} restarts in {wall:.2f} s (first restart includes the bundle upload)")
    print(f"  readiness waits (interpreter start + 1.0 s load, excluded): {ready:.2f} s")
    print(f"  measurement windows (excluded): {measured:.2f} s")
    print(
        f"  orchestration: {overhead:.2f} s total = {overhead / len(points):.3f} s per point, "
        f"{overhead / plan.restarts:.3f} s per restart"
    )


if __name__ == "__main__":
    raise SystemExit(main())
