"""The config queue a Slurm host's workers share, without a cluster: plan order, a lost node's
points back at the front (and failed after too many returns), the baseline gate that holds
speculative points until their AR baseline is recorded and never waits for work nobody runs,
and the estimator that refines the plan's figure with measured configs."""

from __future__ import annotations

import threading
import time

from sweeper.plan import build_plan
from sweeper.spec import parse_spec
from sweeper.workers import Work, pending_work
from sweeper.workers.queue import MAX_RELOCATIONS, ConfigQueue
from sweeper.workers.slurm import Estimator

SPEC = """
name: q
grid: {budget: [8], topk: [1, 2], block_size: [4], cuda_graph: [false], temperature: [0, 0.7]}
workload:
  prompts: [{id: a, text: hi}]
"""


def _work() -> list[Work]:
    plan = build_plan(parse_spec(SPEC))
    return pending_work(plan.hosts[0], set())


def test_configs_leave_in_plan_order_and_the_queue_ends_when_all_are_done() -> None:
    stop = threading.Event()
    queue = ConfigQueue(_work(), stop)
    taken = [queue.take() for _ in range(3)]
    assert [w.label for w in taken if w] == ["ar-cg0", "b8-k1-bs4-cg0", "b8-k2-bs4-cg0"]
    assert not queue.finished()
    for item in taken:
        assert item is not None
        assert queue.finish(item, []) == []
    assert queue.finished() and queue.take() is None


def test_pending_work_leaves_out_recorded_points() -> None:
    plan = build_plan(parse_spec(SPEC))
    points = list(plan.hosts[0].points())
    work = pending_work(plan.hosts[0], {points[0].point_id, points[1].point_id})
    assert [w.label for w in work] == ["b8-k1-bs4-cg0", "b8-k2-bs4-cg0"]  # AR done
    assert all(len(w.points) == 2 for w in work)


def test_a_lost_nodes_points_go_first_then_fail_after_too_many_returns() -> None:
    queue = ConfigQueue(_work(), threading.Event())
    item = queue.take()
    assert item is not None
    rest = item.points[1:]
    for returned in range(1, MAX_RELOCATIONS + 1):
        assert queue.finish(item, rest) == []
        item = queue.take()
        assert item is not None and item.points == rest and item.relocations == returned
    assert queue.finish(item, rest) == rest  # once more: failed, not queued
    assert [w.label for w in queue.drain()] == ["b8-k1-bs4-cg0", "b8-k2-bs4-cg0"]


def test_a_take_waits_while_a_config_runs_elsewhere_and_may_come_back() -> None:
    work = _work()[:1]
    queue = ConfigQueue(work, threading.Event())
    running = queue.take()
    assert running is not None
    got: list[Work | None] = []
    waiter = threading.Thread(target=lambda: got.append(queue.take()))
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive()  # nothing queued, but the running config may come back
    queue.finish(running, running.points[1:])
    waiter.join(5)
    assert got and got[0] is not None and got[0].points == running.points[1:]


def test_the_gate_holds_speculative_points_until_the_baseline_is_done() -> None:
    queue = ConfigQueue(_work(), threading.Event())
    ar, spec = queue.take(), queue.take()
    assert ar is not None and spec is not None
    assert queue.gate(ar) is None  # a baseline measures at once
    gate = queue.gate(spec)
    assert gate is not None
    opened: list[bool] = []
    waiter = threading.Thread(target=lambda: opened.append(gate()))
    waiter.start()
    time.sleep(0.3)
    assert not opened  # the baseline still runs on another worker
    queue.finish(ar, [])
    waiter.join(5)
    assert opened == [True]


def test_the_gate_gives_way_when_the_baseline_waits_in_the_queue_with_no_worker() -> None:
    queue = ConfigQueue(_work(), threading.Event())
    ar, spec = queue.take(), queue.take()
    assert ar is not None and spec is not None
    queue.finish(ar, ar.points)  # the baseline's node was lost: back to the queue
    gate = queue.gate(spec)
    assert gate is not None and gate() is False  # do not wait for work only you could do
    assert queue.finish(spec, spec.points) == []  # given back: to the end, not counted
    order = [queue.take() for _ in range(3)]
    assert [w.label for w in order if w] == ["ar-cg0", "b8-k2-bs4-cg0", "b8-k1-bs4-cg0"]
    assert order[2] is not None and order[2].relocations == 0


def test_a_stop_releases_every_wait() -> None:
    stop = threading.Event()
    queue = ConfigQueue(_work(), stop)
    ar, spec = queue.take(), queue.take()
    assert ar is not None and spec is not None
    gate = queue.gate(spec)
    assert gate is not None
    stop.set()
    assert gate() is False and queue.take() is None


def test_the_estimate_is_scaled_by_how_long_measured_configs_took() -> None:
    work = _work()
    estimator = Estimator(lambda step: 10.0)
    assert estimator.expected(work[0].step) == 10.0
    estimator.observe(work[0].step, 30.0)
    estimator.observe(work[1].step, 10.0)
    assert estimator.expected(work[2].step) == 20.0
