"""The client's self-check: the verdict on crafted stats, and a CPU-starved client (root)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweeper.measure.load_process import WorkerStats
from sweeper.measure.selfcheck import (
    CHECK_PERCENTILE,
    CPU_SHARE_MAX,
    LATE_MAX_S,
    LOOP_LAG_MAX_S,
    achieved,
    check_client,
)
from tests.sweeper.measure.cpu_limit import cpu_limited, why_no_cpu_limit
from tests.sweeper.measure.sse_server import start_server

LOAD_CLIENT = Path(__file__).with_name("load_client.py")
PROJECT = Path(__file__).resolve().parents[3]
#: The whole starved client (start, warm-up, the point at 3% of a core) takes ~22 s here.
RESULT_TIMEOUT_S = 120.0


def stats(worker: int = 0, *, cpu: float = 0.2, lag_ms: float = 1.0) -> WorkerStats:
    return WorkerStats(
        worker=worker, cpu_s=cpu * 10, wall_s=10.0, lags_ns=[int(lag_ms * 1e6)] * 100, n_sent=10
    )


def sends(late_s: list[float]) -> list[dict]:
    return [{"late_s": x, "sent_s": float(i), "done_s": i + 0.5} for i, x in enumerate(late_s)]


def test_a_client_within_bounds_is_not_flagged() -> None:
    check = check_client([stats(0), stats(1)], sends([0.001] * 50))
    assert not check.client_bound and check.reasons == ()
    assert check.thresholds["percentile"] == CHECK_PERCENTILE


@pytest.mark.parametrize(
    ("worker_stats", "late", "reason"),
    [
        ([stats(0), stats(1, cpu=CPU_SHARE_MAX + 0.05)], [0.0] * 20, "worker 1: CPU 95%"),
        ([stats(0, lag_ms=LOOP_LAG_MAX_S * 1e3 * 2)], [0.0] * 20, "worker 0: event-loop lag p90"),
        ([stats(0)], [LATE_MAX_S * 2] * 20, "arrivals late: p90 50.0 ms"),
    ],
)
def test_each_bound_flags_the_point_with_its_value(
    worker_stats: list[WorkerStats], late: list[float], reason: str
) -> None:
    check = check_client(worker_stats, sends(late))
    assert check.client_bound
    assert len(check.reasons) == 1 and check.reasons[0].startswith(reason)


def test_a_few_stalls_do_not_flag_but_a_tenth_late_does() -> None:
    assert not check_client([stats()], sends([0.0] * 95 + [1.0] * 5)).client_bound
    assert check_client([stats()], sends([0.0] * 85 + [1.0] * 15)).client_bound


def test_slot_waits_are_not_lateness() -> None:
    records = [{"late_s": 0.001, "slot_wait_s": 5.0, "sent_s": 1.0, "done_s": 2.0}] * 10
    check = check_client([stats()], records)
    assert not check.client_bound and check.late_p90_s == pytest.approx(0.001)


def test_achieved_rate_and_in_flight() -> None:
    # Four requests sent 1 s apart, each 2.5 s long. Over the sends' span [0, 3]: 1 in flight
    # for 1 s, 2 for 1 s, 3 for 0.5 s, then 2 for 0.5 s once the first ends at 2.5.
    records = [{"sent_s": float(i), "done_s": i + 2.5} for i in range(4)]
    rate, mean, peak = achieved(records)
    assert rate == pytest.approx(1.0) and peak == 3
    assert mean == pytest.approx((1 + 2 + 1.5 + 1) / 3)


# --------------------------------------------------------------------------- starved client


@pytest.fixture(scope="module")
def fast() -> Iterator[str]:
    proc, base = start_server()
    yield base
    proc.kill()
    proc.wait()


def run_client(base: str, quota: float | None) -> dict:
    """The same open-loop point in a cgroup of its own, with `quota` of one core or no limit.

    The group has the most CPU weight either way, so the machine's other load cannot starve the
    unlimited run; the quota is the only difference. It is applied after the client's imports,
    so it bites on the spawned workers and the measurement.
    """
    point = {"rate": 40, "duration_s": 2.0, "max_tokens": 200, "processes": 2, "seed": 3}
    point["grace_s"] = 3.0  # a starved client's stragglers are cut, not waited for (30 s)
    with cpu_limited("sweeper-loadtest") as (procs, set_quota):
        proc = subprocess.Popen(
            [sys.executable, str(LOAD_CLIENT), base, json.dumps(point)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=PROJECT,
            env={**os.environ, "PYTHONPATH": str(PROJECT)},
            preexec_fn=lambda: procs.write_text(str(os.getpid())),
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            assert proc.stdout.readline().strip() == "IMPORTED"
            set_quota(quota)
            proc.stdin.write("go\n")
            proc.stdin.flush()
            # Bounded: a client that cannot finish the point at its quota fails the test here,
            # naming it, rather than holding the quiet lane until CI's own limit.
            ready, _, _ = select.select([proc.stdout], [], [], RESULT_TIMEOUT_S)
            assert ready, f"no result in {RESULT_TIMEOUT_S:.0f} s at quota {quota}"
            out = json.loads(proc.stdout.readline())
        finally:
            proc.kill()
            proc.wait()
    return out


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.quiet  # a CPU-starved client must be the only thing late (tests/lanes.py)
@pytest.mark.skipif(why_no_cpu_limit() is not None, reason=str(why_no_cpu_limit()))
def test_a_cpu_starved_client_is_flagged_and_the_same_point_unstarved_is_not(fast: str) -> None:
    free = run_client(fast, None)
    # The client needs ~5% of a core here (two workers at ~2.5% each); 3% leaves it behind its
    # schedule all the time.
    starved = run_client(fast, 0.03)
    assert free["n"] == starved["n"] > 60
    assert not free["check"]["client_bound"], free["check"]["reasons"]
    assert starved["check"]["client_bound"]
    reasons = " ".join(starved["check"]["reasons"])
    assert "event-loop lag" in reasons and "arrivals late" in reasons
