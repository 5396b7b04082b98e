"""A point's load over N worker processes: closed loop (a concurrency) or open loop (a rate).

`run_load` draws the open-loop schedule once (sweeper.measure.arrivals), splits the work over
`processes` workers (sweeper.measure.load_process; one runs on a thread of this process, more
are forked processes), starts them all on one t0 of the shared monotonic clock, and merges
their records in request order. How the load is held:
- ClosedLoop(concurrency=C): C slots in all (C // N each, the first C % N workers one more),
  pulling request indices from one shared counter: exactly C in flight, globally, until the
  indices run out (or the duration ends), whatever N is.
- OpenLoop(profile, seed): each request is sent at its scheduled time. Without
  max_concurrency the schedule is dealt round-robin to the workers; with it, max_concurrency
  slots pull indices in schedule order (a request waits for a free slot, as in vLLM's bench,
  and its `slot_wait_s` says how long), so the bound holds across processes.
Request i carries payloads[i % len(payloads)]. Every record gets `index`, `payload_index`,
`worker`, `scheduled_s`, `sent_s`, `done_s` (seconds from t0), `slot_wait_s` (how long it was
due while every slot was busy), `late_s` (open loop: actual send minus the later of its
scheduled time and its slot's freeing, i.e. the client's own delay) and `finished`. With a
duration, a closed loop starts nothing after it and an open-loop request still queued for a
slot then is never sent; requests in flight get `grace_s` more, then are cancelled: `finished`
False and an `error`, as is every scheduled request that was never sent. The client's self-check
(sweeper.measure.selfcheck) comes with the records.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import queue
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sweeper.measure.arrivals import ArrivalProfile, schedule
from sweeper.measure.load_process import WorkerJob, worker_main
from sweeper.measure.selfcheck import ClientCheck, WorkerStats, check_client
from sweeper.measure.senders import DEFAULT_SENDER, load_sender

#: Time every worker gets between the start signal and t0, so all start on the same instant
#: (a lone worker thread needs next to none).
START_LEAD_S = 0.1
START_LEAD_THREAD_S = 0.005
DEFAULT_GRACE_S = 30.0
#: How long a message a worker put before it ended may take to arrive (`_collect`).
LAST_WORDS_S = 5.0
NOT_SENT = "not sent: still queued at the end of duration_s (+ grace_s)"


@dataclass(frozen=True)
class ClosedLoop:
    """`concurrency` requests in flight at all times; `requests` in all (default: one per
    payload), or as many as fit in `duration_s` when that is given."""

    concurrency: int
    requests: int | None = None
    duration_s: float | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, not {self.concurrency}")
        if self.requests is not None and self.requests < 1:
            raise ValueError(f"requests must be >= 1, not {self.requests}")
        if self.duration_s is not None and not (0 < self.duration_s < math.inf):
            raise ValueError(f"duration_s must be a finite number > 0, not {self.duration_s}")


@dataclass(frozen=True)
class OpenLoop:
    """Requests sent on a schedule drawn from `seed`; at most `max_concurrency` in flight."""

    profile: ArrivalProfile
    seed: int
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, not {self.max_concurrency}")


Load = ClosedLoop | OpenLoop


@dataclass(frozen=True)
class LoadResult:
    """The point's records (request order), its span, its t0 and the client's self-check."""

    records: list[dict[str, Any]]
    wall_s: float
    t0_ns: int
    check: ClientCheck
    processes: int
    #: The open-loop schedule (seconds from t0); None for a closed loop.
    offsets_s: tuple[float, ...] | None


def split_slots(total: int, processes: int) -> list[int]:
    """`total` slots over at most `processes` workers, none empty: 7 over 3 is [3, 2, 2]."""
    n = max(1, min(processes, total))
    return [total // n + (1 if k < total % n else 0) for k in range(n)]


def plan_jobs(
    base_url: str,
    payloads: Sequence[dict[str, Any]],
    load: Load,
    *,
    processes: int,
    sender: str,
    grace_s: float,
    request_timeout_s: float,
) -> tuple[list[WorkerJob], np.ndarray | None]:
    """The workers' jobs and the open-loop schedule (drawn once, whatever `processes` is)."""
    if not payloads:
        raise ValueError("no payloads to send")
    if processes < 1:
        raise ValueError(f"processes must be >= 1, not {processes}")
    common = dict(
        base_url=base_url,
        sender=sender,
        payloads=list(payloads),
        grace_ns=int(grace_s * 1e9),
        request_timeout_s=request_timeout_s,
    )
    if isinstance(load, ClosedLoop):
        n = load.requests
        if n is None and load.duration_s is None:
            n = len(payloads)
        duration_ns = None if load.duration_s is None else int(load.duration_s * 1e9)
        jobs = [
            WorkerJob(
                worker=k,
                offsets_ns=None,
                slots=s,
                indices=(),
                n_requests=n,
                duration_ns=duration_ns,
                **common,  # type: ignore[arg-type]
            )
            for k, s in enumerate(split_slots(load.concurrency, processes))
        ]
        return jobs, None
    offsets = schedule(load.profile, load.seed)
    offsets_ns = [int(round(x * 1e9)) for x in offsets]
    duration = load.profile.duration_s
    duration_ns = None if duration is None else int(duration * 1e9)
    if load.max_concurrency is not None:
        jobs = [
            WorkerJob(
                worker=k,
                offsets_ns=offsets_ns,
                slots=s,
                indices=(),
                n_requests=len(offsets),
                duration_ns=duration_ns,
                **common,  # type: ignore[arg-type]
            )
            for k, s in enumerate(split_slots(load.max_concurrency, processes))
        ]
    else:
        n_workers = max(1, min(processes, len(offsets)))
        jobs = [
            WorkerJob(
                worker=k,
                offsets_ns=offsets_ns,
                slots=0,
                indices=list(range(k, len(offsets), n_workers)),
                n_requests=None,
                duration_ns=duration_ns,
                **common,  # type: ignore[arg-type]
            )
            for k in range(n_workers)
        ]
    return jobs, offsets


def run_load(
    base_url: str,
    payloads: Sequence[dict[str, Any]],
    load: Load,
    *,
    processes: int = 1,
    sender: str = DEFAULT_SENDER,
    grace_s: float = DEFAULT_GRACE_S,
    request_timeout_s: float = 600.0,
    start_timeout_s: float = 60.0,
) -> LoadResult:
    """Run one point's load (see the module doc); blocks until every worker has reported."""
    load_sender(sender)  # a bad path fails here, once, not in every worker
    jobs, offsets = plan_jobs(
        base_url,
        payloads,
        load,
        processes=processes,
        sender=sender,
        grace_s=grace_s,
        request_timeout_s=request_timeout_s,
    )
    # One client process is the controller itself (a worker thread): it has everything
    # imported already, so a point pays no process start; more go to forked processes.
    ctx = mp.get_context() if processes == 1 else _context()
    counter, t0_value, start, results = (
        ctx.Value("q", 0),
        ctx.Value("q", 0),
        ctx.Event(),
        ctx.Queue(),
    )
    workers: list[Any] = [
        (threading.Thread if processes == 1 else ctx.Process)(
            target=worker_main,
            args=(job, counter, t0_value, start, results),
            name=f"sweeper-load-{job.worker}",
            daemon=True,
        )
        for job in jobs
    ]
    for w in workers:
        w.start()
    records: list[dict[str, Any]] = []
    stats: list[WorkerStats] = []
    try:
        _collect(results, workers, "ready", time.monotonic() + start_timeout_s)
        lead = START_LEAD_THREAD_S if processes == 1 else START_LEAD_S
        t0 = time.monotonic_ns() + int(lead * 1e9)
        t0_value.value = t0
        start.set()
        for _worker, recs, st in _collect(results, workers, "done", None):
            records.extend(recs)
            stats.append(st)
    finally:
        for w in workers:
            w.join(5)
            if w.is_alive() and hasattr(w, "kill"):
                w.kill()
                w.join(5)
    if offsets is not None:
        records.extend(_unsent(records, offsets, len(payloads)))
    records.sort(key=lambda r: r["index"])
    ends = [r["done_s"] for r in records if r.get("done_s") is not None]
    return LoadResult(
        records=records,
        wall_s=max(ends, default=0.0),
        t0_ns=t0,
        check=check_client(stats, records),
        processes=len(workers),
        offsets_s=None if offsets is None else tuple(float(x) for x in offsets),
    )


def _context() -> Any:
    """Workers fork from a forkserver: a clean single-threaded process started once (the runner
    has threads, and a fork of it would copy their held locks) that has imported the worker's
    modules already, so a point's workers start in milliseconds rather than each paying an
    interpreter start and the imports (~0.5 s a point on a busy 2-core machine).

    Every forked worker also re-runs the controller's main module (multiprocessing does, so that
    what it defines can be unpickled; CPython 3.11's forkserver ignores "__main__" in the preload
    list). For the `sweeper` CLI that is an import of every command, ~1 CPU-second per worker
    per point, and numpy's thread pool started in each worker. So the forkserver preloads every
    sweeper module the controller has imported: re-running the main module then finds its
    imports done and costs milliseconds."""
    ctx = mp.get_context("forkserver")
    ours = sorted(name for name in sys.modules if name.partition(".")[0] == "sweeper")
    ctx.set_forkserver_preload(["sweeper.measure.load_process", *ours])
    return ctx


def _collect(results: Any, workers: list[Any], kind: str, deadline: float | None) -> list[Any]:
    """One `kind` message from every worker; a worker's error or death raises RuntimeError.

    A worker that has ended is dead only once what it put before ending has had
    `LAST_WORDS_S` to arrive: a put can still be on its way when the worker is gone (a
    multiprocessing queue's feeder thread writes it to the pipe after `put` returns), and a
    worker that reported and ended must not fail its point."""
    got: dict[int, Any] = {}
    while len(got) < len(workers):
        try:
            msg = results.get(timeout=0.5)
        except queue.Empty:
            dead = [w for k, w in enumerate(workers) if k not in got and not w.is_alive()]
            if dead:
                try:
                    msg = results.get(timeout=LAST_WORDS_S)
                except queue.Empty:
                    code = getattr(dead[0], "exitcode", None)
                    raise RuntimeError(
                        f"load worker {dead[0].name} ended (exit code {code}) before reporting "
                        f"{kind}"
                    ) from None
            elif deadline is not None and time.monotonic() > deadline:
                raise RuntimeError(f"load workers not {kind} in time") from None
            else:
                continue
        if msg[0] == "error":
            raise RuntimeError(f"load worker {msg[1]} failed:\n{msg[2]}")
        if msg[0] != kind:
            raise RuntimeError(f"load worker {msg[1]} sent {msg[0]!r}, expected {kind!r}")
        got[msg[1]] = msg[1:]
    return [got[k] for k in sorted(got)]


def _unsent(records: list[dict[str, Any]], offsets: np.ndarray, n_payloads: int) -> list[dict]:
    """Records for the scheduled requests no worker sent (the duration ended first)."""
    seen = {r["index"] for r in records}
    return [
        {
            "error": NOT_SENT,
            "index": i,
            "payload_index": i % n_payloads,
            "worker": None,
            "scheduled_s": float(offsets[i]),
            "late_s": None,
            "slot_wait_s": None,
            "sent_s": None,
            "done_s": None,
            "finished": False,
        }
        for i in range(len(offsets))
        if i not in seen
    ]
