"""Arrival schedules: drawn once from a seed, the asked distribution, and bad profiles refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.measure.arrivals import ArrivalProfile, exponential_ks, schedule
from sweeper.measure.pool import ClosedLoop, OpenLoop, plan_jobs, split_slots


def test_same_seed_same_schedule_other_seed_other_schedule() -> None:
    profile = ArrivalProfile(rate=10, requests=200)
    assert np.array_equal(schedule(profile, 7), schedule(profile, 7))
    assert not np.array_equal(schedule(profile, 7), schedule(profile, 8))


def test_schedule_does_not_depend_on_the_number_of_processes() -> None:
    load = OpenLoop(ArrivalProfile(rate=25, duration_s=4.0), seed=3)
    payloads = [{"k": 0}, {"k": 1}]
    plans = [
        plan_jobs(
            "http://x", payloads, load, processes=n, sender="m:f", grace_s=1, request_timeout_s=1
        )
        for n in (1, 3, 4)
    ]
    offsets = [tuple(jobs[0].offsets_ns or ()) for jobs, _ in plans]
    assert offsets[0] == offsets[1] == offsets[2]
    # Round-robin shards cover every request exactly once.
    for jobs, sched in plans:
        assert sched is not None
        owned = sorted(i for job in jobs for i in job.indices)
        assert owned == list(range(len(sched)))


def test_poisson_is_gamma_with_burstiness_one() -> None:
    poisson = schedule(ArrivalProfile(rate=5, requests=50), 11)
    gamma = schedule(ArrivalProfile(rate=5, arrival="gamma", burstiness=1.0, requests=50), 11)
    assert np.array_equal(poisson, gamma)


def test_duration_window_holds_a_poisson_count() -> None:
    profile = ArrivalProfile(rate=50, duration_s=20.0)
    offsets = schedule(profile, 1)
    assert offsets.max() < 20.0 and np.all(np.diff(offsets) >= 0)
    # Poisson(1000): 5 standard deviations either side.
    assert abs(len(offsets) - 1000) < 5 * math.sqrt(1000)


def test_constant_and_inf() -> None:
    constant = schedule(ArrivalProfile(rate=4, arrival="constant", requests=5), 0)
    assert constant == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.25])
    assert np.array_equal(schedule(ArrivalProfile(rate=math.inf, requests=4), 0), np.zeros(4))


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_the_asked_mean_and_spread(burstiness: float) -> None:
    gaps = np.diff(
        schedule(ArrivalProfile(rate=8, arrival="gamma", burstiness=burstiness, requests=20_000), 5)
    )
    assert gaps.mean() == pytest.approx(1 / 8, rel=0.05)
    # A gamma's coefficient of variation is 1 / sqrt(shape).
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.1)


def test_ks_is_calibrated_on_exponentials_and_rejects_others() -> None:
    rng = np.random.default_rng(0)
    # Under the null, p < 0.05 about 5% of the time (binomial sd 1.1% over 400 samples).
    ps = np.array([exponential_ks(rng.exponential(0.1, 300), rate=10)[1] for _ in range(400)])
    assert 0.02 <= float(np.mean(ps < 0.05)) <= 0.09
    _, p_uniform = exponential_ks(rng.uniform(0, 0.2, 300), rate=10)
    _, p_wrong_rate = exponential_ks(rng.exponential(0.1, 300), rate=20)
    assert p_uniform < 1e-3 and p_wrong_rate < 1e-3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": 0, "requests": 1}, "rate must be > 0"),
        ({"rate": float("nan"), "requests": 1}, "rate must be > 0"),
        ({"rate": 1, "arrival": "uniform", "requests": 1}, "arrival must be one of"),
        ({"rate": 1, "burstiness": 2.0, "requests": 1}, "gamma only"),
        ({"rate": 1, "arrival": "gamma", "burstiness": 0, "requests": 1}, "burstiness"),
        ({"rate": 1}, "exactly one of"),
        ({"rate": 1, "requests": 3, "duration_s": 2.0}, "exactly one of"),
        ({"rate": math.inf, "duration_s": 2.0}, "unbounded"),
        ({"rate": 1, "requests": 0}, "requests must be"),
    ],
)
def test_bad_profiles_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ArrivalProfile(**kwargs)


def test_slots_cover_a_concurrency_the_processes_do_not_divide() -> None:
    assert split_slots(7, 3) == [3, 2, 2]
    assert split_slots(2, 4) == [1, 1]  # never an idle worker
    jobs, sched = plan_jobs(
        "http://x",
        [{}],
        ClosedLoop(concurrency=7),
        processes=3,
        sender="m:f",
        grace_s=1,
        request_timeout_s=1,
    )
    assert sched is None and sum(j.slots for j in jobs) == 7 and jobs[0].n_requests == 1
