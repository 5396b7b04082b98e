"""Bench: SSH round trips and the sweeper's orchestration cost per point on a remote host.

Boots one disposable test host (root only; see tests/testhosts.py) and measures, over one reused
paramiko connection:
  - round trip of a trivial command (`true`), and of an SFTP atomic file write;
  - per point, the orchestration the sweeper adds around a restart: stop the previous unit,
    render + install the unit, daemon-reload, restart, wait for the new InvocationID/MainPID,
    notice /health turning 200, fetch the point's journal lines. The "model load" is replaced by
    a tiny stdlib HTTP server that is ready as soon as Python has started; its own start-up
    time (exec to listening) is reported apart and excluded, as is measurement.

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

from sweeper.hosts.ssh import SSHHost, SSHTarget  # noqa: E402
from sweeper.readiness import wait_healthy  # noqa: E402
from sweeper.services import Launch  # noqa: E402
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
    args = parser.parse_args()
    reason = testhosts.skip_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    boot_started = time.monotonic()
    test_host = testhosts.boot("swbench", 240)
    boot_s = time.monotonic() - boot_started
    try:
        return run(test_host, boot_s, args.commands, args.points)
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
        instance = service.start(launch)
        t2 = time.monotonic()
        wait_healthy(service, instance.base_url, 60.0)
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


if __name__ == "__main__":
    raise SystemExit(main())
