"""The multi-process load pool against a real raw-asyncio SSE server on loopback."""

from __future__ import annotations

import math
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from sweeper.engines.base import RequestSpec
from sweeper.measure.arrivals import ArrivalProfile, exponential_ks, schedule
from sweeper.measure.load_process import UNFINISHED
from sweeper.measure.pool import NOT_SENT, ClosedLoop, OpenLoop, run_load
from sweeper.measure.senders import spec_payload
from tests.sweeper.measure.sse_server import TOKEN_ID, start_server

# quiet: the send times and concurrency it checks bend under other load (tests/lanes.py).
pytestmark = [pytest.mark.slow, pytest.mark.quiet]

ECHO_SENDER = "tests.sweeper.measure.echo_sender:echo_sender"


def payloads(n: int, max_tokens: int) -> list[dict]:
    return [
        spec_payload(
            RequestSpec(prompt_id=f"p{i}", prompt=f"p{i}", max_tokens=max_tokens, temperature=0.0)
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def fast() -> Iterator[str]:
    proc, base = start_server()
    yield base
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def slow() -> Iterator[str]:
    """Each request holds its connection ~0.25 s: 10 tokens, 25 ms apart."""
    proc, base = start_server(token_delay=0.025)
    yield base
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def held() -> Iterator[str]:
    """Each request waits 2 s before its first token."""
    proc, base = start_server(first_delay=2.0)
    yield base
    proc.kill()
    proc.wait()


def server_stats(base: str) -> dict:
    return httpx.get(base + "/stats").json()


@pytest.mark.parametrize(("concurrency", "processes"), [(7, 3), (5, 2)])
def test_closed_loop_holds_the_asked_concurrency_at_the_server(
    slow: str, concurrency: int, processes: int
) -> None:
    httpx.post(slow + "/reset")
    result = run_load(
        slow,
        payloads(3, 10),
        ClosedLoop(concurrency, requests=8 * concurrency),
        processes=processes,
    )
    stats = server_stats(slow)
    assert result.processes == processes
    assert [r["index"] for r in result.records] == list(range(8 * concurrency))
    assert all(r["error"] is None and r["output_tokens"] == 10 for r in result.records)
    assert [r["payload_index"] for r in result.records[:4]] == [0, 1, 2, 0]
    # Never more than asked, and asked most of the time (the rest is ramp-up and drain).
    assert stats["peak"] == concurrency
    busy = {int(k): v for k, v in stats["time_at"].items() if int(k) > 0}
    assert max(busy, key=lambda level: busy[level]) == concurrency
    assert busy[concurrency] > 0.5 * sum(busy.values())
    assert result.check.max_in_flight == concurrency
    assert {r["worker"] for r in result.records} == set(range(processes))


def test_records_are_the_default_senders_with_send_times(fast: str) -> None:
    chat = RequestSpec(
        prompt_id="c",
        prompt="",
        max_tokens=50,
        temperature=0.0,
        chat=True,
        messages=({"role": "user", "content": "hi"},),
    )
    loads = [*payloads(1, 50), spec_payload(chat, model="m")]
    result = run_load(fast, loads, ClosedLoop(2, requests=6), processes=2)
    assert [r["text"] == " t" * 50 for r in result.records] == [True] * 6
    for r in result.records:
        assert r["token_ids"] == [TOKEN_ID] * 50 and r["finish_reason"] == "length"
        assert r["finished"] is True and r["late_s"] is None
        assert 0 <= r["scheduled_s"] <= r["sent_s"] < r["done_s"] <= result.wall_s
        assert r["ttft"] > 0 and r["e2e"] <= r["done_s"] - r["sent_s"] + 0.01


def test_recorded_poisson_send_times_pass_ks_and_wrong_shapes_fail(fast: str) -> None:
    """The send times the records carry (not the generator's draws) follow Exp(rate).

    Seed 1235's own draws are unremarkable (KS D = 0.044, p = 0.73), so a failure here is the
    client bending the schedule. The bound, p > 1e-4 (D < ~0.14 for 239 gaps), leaves room for
    a few hundred ms of stalls on a busy machine (at load 8-10 recorded runs gave D 0.03-0.055);
    the same test must reject constant and bursty gamma schedules by orders of magnitude.
    """
    rate, seed = 60.0, 1235

    def recorded_gaps(profile: ArrivalProfile) -> tuple[np.ndarray, str]:
        result = run_load(fast, payloads(1, 2), OpenLoop(profile, seed=seed), processes=2)
        sent = np.sort([r["sent_s"] for r in result.records])
        assert len(sent) == profile.requests
        late = [r["late_s"] for r in result.records]
        return np.diff(sent), f"late p90 {np.percentile(late, 90):.3f} s, max {max(late):.3f} s"

    gaps, late = recorded_gaps(ArrivalProfile(rate=rate, requests=240))
    d, p = exponential_ks(gaps, rate)
    assert p > 1e-4, f"KS rejects recorded Poisson gaps: D={d:.3f} p={p:.2g} ({late})"
    # Fewer requests suffice to reject the wrong shapes (and keep the test short).
    constant = ArrivalProfile(rate=rate, arrival="constant", requests=120)
    d, p = exponential_ks(recorded_gaps(constant)[0], rate)
    assert p < 1e-6, f"KS accepts constant gaps as Poisson: D={d:.3f} p={p:.2g}"
    bursty = ArrivalProfile(rate=rate, arrival="gamma", burstiness=0.25, requests=120)
    d, p = exponential_ks(recorded_gaps(bursty)[0], rate)
    assert p < 1e-6, f"KS accepts gamma(0.25) gaps as Poisson: D={d:.3f} p={p:.2g}"


def test_open_loop_max_concurrency_is_global(slow: str) -> None:
    httpx.post(slow + "/reset")
    load = OpenLoop(ArrivalProfile(rate=math.inf, requests=30), seed=0, max_concurrency=5)
    result = run_load(slow, payloads(1, 10), load, processes=2)
    assert server_stats(slow)["peak"] == 5 and result.check.max_in_flight == 5
    assert all(r["error"] is None for r in result.records)
    # All were due at t0: the first five found a free slot, the other 25 waited for one. The
    # wait is the load's shape; lateness is counted from the slot's freeing, so it stays small.
    assert [r["slot_wait_s"] > 0 for r in result.records] == [False] * 5 + [True] * 25
    assert all(r["late_s"] is not None for r in result.records)
    assert all(r["slot_wait_s"] >= 0.2 for r in result.records[10:])  # at least one 0.25 s hold


@pytest.mark.parametrize("max_concurrency", [None, 1])
def test_requests_in_flight_after_duration_and_grace_are_unfinished(
    held: str, max_concurrency: int | None
) -> None:
    """Requests hold 2 s; the window is 0.5 s with 0.2 s of grace."""
    load = OpenLoop(
        ArrivalProfile(rate=20, duration_s=0.5), seed=5, max_concurrency=max_concurrency
    )
    n = len(schedule(load.profile, 5))
    result = run_load(held, payloads(1, 3), load, processes=2, grace_s=0.2)
    assert [r["index"] for r in result.records] == list(range(n)) and n >= 5
    assert not any(r["finished"] for r in result.records)
    unfinished = [r for r in result.records if r["error"] == UNFINISHED]
    unsent = [r for r in result.records if r["error"] == NOT_SENT]
    # One slot: the first request holds it past the end and the rest were never sent.
    assert len(unfinished) == (n if max_concurrency is None else 1)
    assert len(unsent) == n - len(unfinished)
    assert all(r["sent_s"] is None for r in unsent)
    assert all(0.7 <= r["done_s"] < 1.7 for r in unfinished)


def test_closed_loop_duration_starts_nothing_after_it(slow: str) -> None:
    result = run_load(slow, payloads(1, 10), ClosedLoop(2, duration_s=0.6), processes=2)
    assert len(result.records) >= 4
    assert all(r["finished"] and r["error"] is None for r in result.records)
    assert max(r["sent_s"] for r in result.records) < 0.65


def test_pluggable_sender_and_sender_errors_are_records(fast: str) -> None:
    loads = [{"k": 0}, {"k": 1, "boom": True}, {"k": 2}]
    result = run_load(fast, loads, ClosedLoop(2, requests=6), processes=2, sender=ECHO_SENDER)
    assert [r.get("echo") for r in result.records] == [0, None, 2, 0, None, 2]
    assert [r["index"] for r in result.records] == list(range(6))  # ours win over the sender's
    assert result.records[1]["error"] == "sender raised RuntimeError: boom"
    with pytest.raises(ValueError, match="has no nope"):
        run_load(fast, loads, ClosedLoop(1), sender="tests.sweeper.measure.echo_sender:nope")
