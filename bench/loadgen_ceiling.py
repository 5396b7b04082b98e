"""The load generator's ceiling: streamed chunks per client CPU-second and per second on one
core, for the sweeper's client before and after the fast hot path (issue 23) and for GuideLLM,
side by side against the same server in the same run; then the pool over 1, 2 and 4 processes,
2 processes on 2 cores, and Poisson arrivals.

The server is tests/sweeper/measure/sse_server.py (raw asyncio, HTTP/1.1 keep-alive, one-token
SSE chat events; not uvicorn, which is itself the bottleneck), pinned to the last core with this
process; each client runs as a child process pinned to the first core (the 2-core row: both).
A child's CPU is its whole process tree's (every worker and helper process, sampled from /proc
every 20 ms) over its load window: from the first request sent to the last answer read (for
GuideLLM, its benchmark's start and end), so start-up and reporting are left out. Chunks per
second is chunks over that window: with the child alone on its core, its rate on one core. In
flight is the client's own count (requests started and not yet read to the end), time-weighted
over the window. "before" is the sweeper at --before (the commit before the fast hot path),
exported with `git archive` and run by the same code; GuideLLM comes from .venv-guidellm
(`make guidellm-setup`). The machine may be shared: quote the ratios within one round.

    python bench/loadgen_ceiling.py [--tokens 2000] [--requests 64] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# A row child may run another tree's sweeper (--before): it comes first on the path.
sys.path.insert(0, os.environ.get("LOADGEN_TREE", str(ROOT)))

import numpy as np  # noqa: E402

from sweeper.engines.base import RequestSpec  # noqa: E402
from sweeper.measure.arrivals import ArrivalProfile, exponential_ks  # noqa: E402
from sweeper.measure.pool import ClosedLoop, LoadResult, OpenLoop, run_load  # noqa: E402
from sweeper.measure.senders import spec_payload  # noqa: E402
from tests.sweeper.measure.sse_server import start_server  # noqa: E402

#: main just before the fast hot path: the client the issue measured.
BEFORE = "b1937b3ab8bbf6d82bec3f4e3bfac3d75abf7ed2"
GUIDELLM = ROOT / ".venv-guidellm" / "bin" / "guidellm"
TICK = os.sysconf("SC_CLK_TCK")


def in_flight(spans: list[tuple[float, float]]) -> dict[str, float]:
    """Requests in flight, time-weighted: the mean while the loop held its load (from the first
    start to the last: after that, the slots run out of requests one by one), the mean over the
    whole window and the peak; and the window."""
    steps = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    start, end = steps[0][0], steps[-1][0]
    last_start = max(a for a, _ in spans)
    level = peak = 0
    area, held, last = 0.0, 0.0, start
    for t, d in steps:
        area += level * (t - last)
        if last < last_start:
            held += level * (min(t, last_start) - last)
        level, last = level + d, t
        peak = max(peak, level)
    return {
        "held": held / max(last_start - start, 1e-9),
        "mean_in_flight": area / max(end - start, 1e-9),
        "max_in_flight": peak,
        "start": start,
        "end": end,
    }


def row(tokens: int, concurrency: int, n: int, processes: int) -> dict[str, Any]:
    """One closed-loop point of this tree's pool (run in a child: see `--row`)."""
    spec = RequestSpec(prompt_id="p", prompt="p", max_tokens=tokens, temperature=0.0, chat=True)
    base = os.environ["LOADGEN_BASE"]
    result = run_load(
        base, [spec_payload(spec)], ClosedLoop(concurrency, requests=n), processes=processes
    )
    errors = [r["error"] for r in result.records if r["error"]]
    # Records carry monotonic seconds from t0; the window is reported on the wall clock.
    wall_t0 = time.time() - (time.monotonic_ns() - result.t0_ns) / 1e9
    spans = [(wall_t0 + r["sent_s"], wall_t0 + r["done_s"]) for r in result.records]
    return {
        "chunks": sum(r["output_tokens"] for r in result.records),
        **in_flight(spans),
        "worker_cpu_s": sum(w.cpu_s for w in result.check.workers),
        "client_bound": result.check.client_bound,
        "errors": errors[:3],
        "sha256": sorted({r["sha256"] for r in result.records}),
    }


class TreeCPU:
    """Samples the CPU seconds of a process and all its descendants every 50 ms (following
    /proc/PID/task/TID/children: a few small reads, not a scan of /proc, on the server's core)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, float]] = []
        #: The last CPU seen of each process of the tree, so one that exits still counts.
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(0.05)

    def _sample(self) -> None:
        todo = [self.pid]
        while todo:
            pid = todo.pop()
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                for task in os.scandir(f"/proc/{pid}/task"):
                    todo += [int(c) for c in Path(task.path, "children").read_text().split()]
            except OSError:
                continue  # gone: its last sample stands
            fields = stat[stat.rindex(")") + 2 :].split()
            self.seen[pid] = (int(fields[11]) + int(fields[12])) / TICK
        self.samples.append((time.time(), sum(self.seen.values())))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, start: float, end: float) -> float:
        """CPU seconds spent between two wall-clock times (interpolated between samples)."""
        times = [t for t, _ in self.samples]
        values = [v for _, v in self.samples]
        return float(np.interp(end, times, values) - np.interp(start, times, values))


def run_child(argv: list[str], cpus: set[int], env: dict[str, str]) -> tuple[str, TreeCPU]:
    """Run a client child pinned to `cpus`; its stdout and its tree's CPU samples."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        preexec_fn=lambda: os.sched_setaffinity(0, cpus),
    )
    sampler = TreeCPU(proc.pid)
    out, err = proc.communicate(timeout=900)
    sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed ({proc.returncode}):\n{err[-3000:]}")
    return out, sampler


def sweeper_row(tree: Path, base: str, args: argparse.Namespace, procs: int, cpus: set[int]):
    argv = [sys.executable, __file__, "--row", "--processes", str(procs)]
    argv += ["--tokens", str(args.tokens), "--requests", str(args.requests)]
    argv += ["--concurrency", str(args.concurrency)]
    env = {"LOADGEN_TREE": str(tree), "LOADGEN_BASE": base, "PYTHONPATH": ""}
    out, cpu = run_child(argv, cpus, env)
    got = json.loads(out.strip().splitlines()[-1])
    assert not got["errors"], got["errors"]
    got["cpu_s"] = cpu.between(got["start"], got["end"])
    return got


def guidellm_row(base: str, args: argparse.Namespace, cpus: set[int], work: Path) -> dict:
    data = work / "data.jsonl"
    row_data = {"prompt": "p", "prompt_tokens_count": 1, "output_tokens_count": args.tokens}
    data.write_text("\n".join(json.dumps(row_data) for _ in range(args.requests)) + "\n")
    out = work / "guidellm.json"
    argv = [
        str(GUIDELLM),
        "run",
        "--backend",
        f"kind=openai_http,target={base},model=m",
        "--profile",
        f"kind=concurrent,streams={args.concurrency}",
        "--constraint",
        f"kind=max_requests,count={args.requests}",
        "--data",
        f"kind=json_file,path={data}",
        "--output",
        f"kind=json,path={out}",
        "--disable-console",
    ]
    _stdout, cpu = run_child(argv, cpus, {})
    bench = json.loads(out.read_text())["benchmarks"][0]
    done = bench["requests"]["successful"]
    assert len(done) == args.requests, f"GuideLLM finished {len(done)} of {args.requests}"
    spans = [(r["info"]["started_at"], r["info"]["completed_at"]) for r in done]
    window = in_flight(spans)
    return {
        "chunks": sum(r["output_metrics"]["text_tokens"] for r in done),
        **window,
        "cpu_s": cpu.between(window["start"], window["end"]),
    }


def line(name: str, got: dict, concurrency: int) -> str:
    span = got["end"] - got["start"]
    return (
        f"  {name:<26} {got['chunks'] / span:>9,.0f} chunks/s   "
        f"{got['chunks'] / got['cpu_s']:>9,.0f} chunks/client-CPU-s   in flight: held "
        f"{got['held']:.1f} of {concurrency} (max {got['max_in_flight']}), "
        f"{got['mean_in_flight']:.1f} over the window"
        + ("   CLIENT-BOUND" if got.get("client_bound") else "")
    )


def side_by_side(base: str, args: argparse.Namespace, client: set[int], work: Path) -> None:
    before = work / "before"
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", args.before, "sweeper"], capture_output=True
    )
    if archive.returncode == 0:
        before.mkdir()
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
    else:
        print(f"  (no 'before' row: git archive {args.before}: {archive.stderr.decode().strip()})")
    if not GUIDELLM.exists():
        print(f"  (no GuideLLM row: {GUIDELLM} missing; run `make guidellm-setup`)")
    for k in range(args.rounds):
        print(f"round {k + 1}, load average {os.getloadavg()[0]:.1f}:")
        rates: dict[str, dict] = {}
        if before.exists():
            rates["before"] = sweeper_row(before, base, args, 1, client)
            print(line(f"sweeper before ({args.before[:7]})", rates["before"], args.concurrency))
        rates["after"] = sweeper_row(ROOT, base, args, 1, client)
        print(line("sweeper (this tree)", rates["after"], args.concurrency))
        if GUIDELLM.exists():
            rates["guidellm"] = guidellm_row(base, args, client, work)
            print(line("GuideLLM 0.8.1", rates["guidellm"], args.concurrency))
        after = rates["after"]
        for other in ("before", "guidellm"):
            if other in rates:
                o = rates[other]
                per_s = (after["chunks"] / (after["end"] - after["start"])) / (
                    o["chunks"] / (o["end"] - o["start"])
                )
                per_cpu = (after["chunks"] / after["cpu_s"]) / (o["chunks"] / o["cpu_s"])
                print(f"  this tree / {other}: {per_s:.2f}x chunks/s, {per_cpu:.2f}x per CPU-s")
        if "before" in rates and rates["before"]["sha256"] != after["sha256"]:
            print("  !! request sha256s differ between before and after")


def pool_rows(base: str, args: argparse.Namespace, client: set[int], cores: list[int]) -> None:
    print(f"the pool (this tree), load average {os.getloadavg()[0]:.1f}:")
    per_cpu: dict[int, float] = {}
    one_core_rate = 0.0
    for procs in args.processes:
        got = sweeper_row(ROOT, base, args, procs, client)
        per_cpu[procs] = got["chunks"] / got["cpu_s"]
        if procs == 1:
            one_core_rate = got["chunks"] / (got["end"] - got["start"])
        name = f"{procs} process{'es' if procs > 1 else ''}, core {sorted(client)}"
        print(line(name, got, args.concurrency))
    first = args.processes[0]
    print(
        f"  per client-CPU-s relative to {first} process: "
        + ", ".join(f"{n}: {v / per_cpu[first]:.2f}" for n, v in per_cpu.items())
    )
    if len(cores) >= 2 and one_core_rate and 1 in per_cpu:
        both = set(cores[:2])
        got = sweeper_row(ROOT, base, args, 2, both)
        rate = got["chunks"] / (got["end"] - got["start"])
        print(line(f"2 processes, cores {sorted(both)}", got, args.concurrency))
        print(
            f"  2 processes on 2 cores: {rate:,.0f} chunks/s aggregate, efficiency "
            f"{rate / (2 * one_core_rate):.0%} of 2 x the 1-process rate on one core "
            "(the server shares the second core); per client-CPU-s "
            f"{got['chunks'] / got['cpu_s'] / per_cpu[1]:.0%} of 1 process's"
        )


def flag(result: LoadResult) -> str:
    return "client-bound: " + "; ".join(result.check.reasons) if result.check.client_bound else ""


def poisson_row(base: str, rate: float, duration_s: float, tokens: int, procs: int) -> None:
    spec = RequestSpec(prompt_id="p", prompt="p", max_tokens=tokens, temperature=0.0)
    profile = ArrivalProfile(rate=rate, duration_s=duration_s)
    result = run_load(base, [spec_payload(spec)], OpenLoop(profile, seed=2024), processes=procs)
    sent = np.sort([r["sent_s"] for r in result.records if r.get("sent_s") is not None])
    scheduled = len(result.offsets_s or ())
    d, p = exponential_ks(np.diff(sent), rate)
    # The schedule's own draws, so a low p from an unlucky seed is not blamed on the client.
    d0, p0 = exponential_ks(np.diff(np.asarray(result.offsets_s or ())), rate)
    c = result.check
    late = [r["late_s"] for r in result.records if r.get("late_s") is not None]
    print(
        f"Poisson {rate:g} req/s x {duration_s:g} s, {tokens} tokens, {procs} processes: "
        f"scheduled {scheduled} ({scheduled / duration_s:.1f} req/s drawn), sent {len(sent)}, "
        f"achieved {c.achieved_rate:.1f} req/s; lateness p50 "
        f"{np.median(late) * 1e3:.1f}"
        f" p90 {c.late_p90_s * 1e3:.1f} p99 {c.late_p99_s * 1e3:.1f} ms; "  # type: ignore[operator]
        f"KS vs Exp(rate) on recorded gaps D={d:.3f} p={p:.2g} (drawn D={d0:.3f} p={p0:.2g}); "
        "worker CPU " + " ".join(f"{w.cpu_share:.0%}" for w in c.workers) + f"  {flag(result)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--row", action="store_true", help="internal: one client row, as JSON")
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before", default=BEFORE, help="the git commit of the 'before' row")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rate", type=float, nargs="*", default=[25.0, 100.0])
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args()
    if args.row:
        print(json.dumps(row(args.tokens, args.concurrency, args.requests, args.processes[0])))
        return
    cores = sorted(os.sched_getaffinity(0))
    server = {cores[-1]}
    client = {cores[0]}
    os.sched_setaffinity(0, server)  # this process samples the clients: off their core
    proc, base = start_server(cpus=server)
    try:
        print(
            f"server and this process on core {sorted(server)}, clients on core "
            f"{sorted(client)}; closed loop at concurrency {args.concurrency}, {args.requests} "
            f"chat requests of {args.tokens} one-token chunks"
        )
        with tempfile.TemporaryDirectory(prefix="loadgen-") as work:
            side_by_side(base, args, client, Path(work))
        pool_rows(base, args, client, cores)
        os.sched_setaffinity(0, client)  # the Poisson rows' workers start from here
        for rate in args.rate:
            poisson_row(base, rate, args.duration, 200, 2)
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
