"""One load-generating client process (of the pool): its share of a point's requests, sent with
asyncio over the measurement transport (sweeper.measure.sse_http).

Two ways to hold the load, chosen by the parent (sweeper.measure.pool):
- slots: this worker runs `slots` loops; each takes the next request index from a counter shared
  by every worker, waits for its scheduled time (open loop) or not (closed loop), sends it and
  takes the next. The slots of all workers add up to the asked concurrency (closed loop) or
  `max_concurrency` (open loop), so that many requests are in flight globally, whatever the
  number of processes, until the indices run out.
- static: an unbounded open loop; this worker owns a fixed shard of the schedule and sends each
  request at its time, whatever is already in flight.

Times are CLOCK_MONOTONIC nanoseconds (`time.monotonic_ns`, one clock for every process on the
host); records carry seconds relative to the point's t0. After t0 + duration a closed loop
starts nothing new, and an open-loop request still queued for a free slot is never sent (one
merely late against its schedule still goes: its lateness is measured); whatever is in flight at
t0 + duration + grace is cancelled and recorded as not finished. The parent, which knows the
whole schedule, records the requests that were never sent.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.measure.senders import Sender, load_sender
from sweeper.measure.sse_http import StreamClient

#: The loop-lag ticker's period. 5 ms: a few hundred wake-ups a second cost nothing, and its own
#: granularity (epoll rounds timeouts up to 1 ms) stays well below sweeper.measure.selfcheck's
#: bounds.
TICK_S = 0.005
#: How long a ready worker waits for the start signal before it concludes the parent is gone.
START_WAIT_S = 600.0
UNFINISHED = "unfinished: still in flight at the end of duration_s + grace_s"


@dataclass(frozen=True)
class WorkerStats:
    """What one worker process measured about itself over the point."""

    worker: int
    cpu_s: float
    wall_s: float
    #: Ticker lateness samples, nanoseconds.
    lags_ns: Sequence[int]
    n_sent: int

    @property
    def cpu_share(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True)
class WorkerJob:
    """Everything one worker needs (picklable: it crosses into a spawned process)."""

    worker: int
    base_url: str
    sender: str
    payloads: Sequence[dict[str, Any]]
    #: The whole schedule in ns from t0 (open loop), or None (closed loop).
    offsets_ns: Sequence[int] | None
    #: Slot mode: this worker's slots. 0 means static mode over `indices`.
    slots: int
    #: Static mode: the request indices this worker owns, in schedule order.
    indices: Sequence[int]
    #: Slot mode: stop taking indices at this count (None: only the duration ends it).
    n_requests: int | None
    duration_ns: int | None
    grace_ns: int
    request_timeout_s: float


def worker_main(job: WorkerJob, counter: Any, t0_ns: Any, start: Any, results: Any) -> None:
    """Process entry: report ready, wait for t0, run, send ("done", worker, records, stats)."""
    try:
        asyncio.run(_Worker(job, counter, results).run(t0_ns, start))
    except BaseException:
        results.put(("error", job.worker, traceback.format_exc()))


class _Worker:
    def __init__(self, job: WorkerJob, counter: Any, results: Any) -> None:
        self.job = job
        self.counter = counter
        self.results = results
        self.records: list[dict[str, Any]] = []
        self.lags_ns = array("q")
        self.t0 = 0
        self.sent = 0
        self.sender: Sender = load_sender(job.sender)
        self.client: StreamClient | None = None
        self.inflight: set[asyncio.Task[None]] = set()

    async def run(self, t0_ns: Any, start: Any) -> None:
        job = self.job
        async with StreamClient(timeout_s=job.request_timeout_s) as client:
            self.client = client
            self.results.put(("ready", job.worker, None))
            loop = asyncio.get_running_loop()
            if not await loop.run_in_executor(None, start.wait, START_WAIT_S):
                return  # the parent gave up (or died): leave quietly, nothing was sent
            self.t0 = int(t0_ns.value)
            await _sleep_until(self.t0)
            # This thread's CPU: a worker may share its process with the controller.
            cpu0 = time.thread_time()
            ticker = asyncio.create_task(self._tick())
            await self._drive()
            end = time.monotonic_ns()
            cpu = time.thread_time() - cpu0
            ticker.cancel()
        stats = WorkerStats(
            worker=job.worker,
            cpu_s=cpu,
            wall_s=(end - self.t0) / 1e9,
            lags_ns=list(self.lags_ns),
            n_sent=self.sent,
        )
        self.results.put(("done", job.worker, self.records, stats))

    async def _drive(self) -> None:
        """Run the producers, then wait for what is in flight, up to the hard deadline."""
        job = self.job
        deadline = None
        if job.duration_ns is not None:
            deadline = self.t0 + job.duration_ns + job.grace_ns
        if job.slots:
            producers = [asyncio.create_task(self._slot()) for _ in range(job.slots)]
        else:
            producers = [asyncio.create_task(self._dispatch())]
        pending = await _wait(producers, deadline)
        pending |= await _wait(list(self.inflight), deadline)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _take(self) -> int:
        with self.counter.get_lock():
            i = int(self.counter.value)
            self.counter.value = i + 1
        return i

    def _past_duration(self) -> bool:
        d = self.job.duration_ns
        return d is not None and time.monotonic_ns() >= self.t0 + d

    async def _slot(self) -> None:
        job = self.job
        free = self.t0  # when this slot last became free
        while True:
            if job.offsets_ns is None and self._past_duration():
                return  # closed loop: nothing new after the duration
            i = self._take()
            if job.n_requests is not None and i >= job.n_requests:
                return
            if job.offsets_ns is None:
                await self._one(i, scheduled=time.monotonic_ns(), late=None, slot_wait=0)
            else:
                due = self.t0 + job.offsets_ns[i]
                # A request due while its slot was busy waits for it (the load shape's wait);
                # only the delay after max(due, slot free) is the client's lateness.
                wait = max(0, free - due)
                if wait and self._past_duration():
                    return  # still queued for a slot at the end: never sent (the parent says so)
                ready = due + wait
                await _sleep_until(ready)
                late = time.monotonic_ns() - ready
                await self._one(i, scheduled=due, late=late, slot_wait=wait)
            free = time.monotonic_ns()

    async def _dispatch(self) -> None:
        offsets = self.job.offsets_ns
        assert offsets is not None
        for i in self.job.indices:
            due = self.t0 + offsets[i]
            await _sleep_until(due)
            late = time.monotonic_ns() - due
            task = asyncio.create_task(self._one(i, scheduled=due, late=late, slot_wait=0))
            self.inflight.add(task)
            task.add_done_callback(self.inflight.discard)

    async def _one(self, i: int, *, scheduled: int, late: int | None, slot_wait: int) -> None:
        job, t0 = self.job, self.t0
        payload_index = i % len(job.payloads)
        ours: dict[str, Any] = {
            "index": i,
            "payload_index": payload_index,
            "worker": job.worker,
            "scheduled_s": (scheduled - t0) / 1e9,
            "late_s": None if late is None else late / 1e9,
            "slot_wait_s": slot_wait / 1e9,
        }
        sent = time.monotonic_ns()
        ours["sent_s"] = (sent - t0) / 1e9
        self.sent += 1
        assert self.client is not None
        try:
            out = await self.sender(self.client, job.base_url, job.payloads[payload_index])
        except asyncio.CancelledError:
            ours.update(finished=False, done_s=(time.monotonic_ns() - t0) / 1e9)
            self.records.append({"error": UNFINISHED, **ours})
            raise
        except Exception as exc:  # a sender bug must not lose the point
            out = {"error": f"sender raised {type(exc).__name__}: {exc}"}
        ours.update(finished=True, done_s=(time.monotonic_ns() - t0) / 1e9)
        self.records.append({**out, **ours})

    async def _tick(self) -> None:
        period = int(TICK_S * 1e9)
        due = time.monotonic_ns() + period
        while True:
            await _sleep_until(due)
            now = time.monotonic_ns()
            self.lags_ns.append(now - due)
            due = now + period


async def _sleep_until(due_ns: int) -> None:
    delay = (due_ns - time.monotonic_ns()) / 1e9
    if delay > 0:
        await asyncio.sleep(delay)


async def _wait(
    tasks: list[asyncio.Task[None]], deadline_ns: int | None
) -> set[asyncio.Task[None]]:
    """Wait for `tasks` until the deadline; return those still pending."""
    if not tasks:
        return set()
    timeout = None if deadline_ns is None else max(0.0, (deadline_ns - time.monotonic_ns()) / 1e9)
    _done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in _done:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    return set(pending)
