"""Open-loop points through the product's record path: `summarize` judges goodput and latency
speedups, `measured_point` adds the client's self-check, `RunStore` writes, `build_view` and the
report read. A client-bound point is flagged in the records and the report and never reported as
the server's number: no speedup, never the best config, a knee scan stops at it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from sweeper.analysis.summary import summarize
from sweeper.config import RequestConfig, ServerConfig
from sweeper.engines.base import RequestSpec
from sweeper.engines.capabilities import near_tie_margin
from sweeper.measure.load_process import UNFINISHED
from sweeper.measure.point import measured_point, point_columns, request_rows
from sweeper.measure.pool import NOT_SENT
from sweeper.measure.selfcheck import ClientCheck
from sweeper.measure.workload import WorkloadResult
from sweeper.plan import Point
from sweeper.report.assemble import build_view
from sweeper.report.render import render_html
from sweeper.results.reader import read_run
from sweeper.results.records import PointRecord
from sweeper.results.store import RunStore, utc_now
from sweeper.spec import DeterminismSpec, SloSpec

SLO = SloSpec(ttft_s=0.5, itl_s=0.1, attainment=0.9)
AR = ServerConfig.make("ar", {"cuda_graph": False})
TREE = {"block_size": 8, "cuda_graph": False}
FAST = ServerConfig.make("speculative", {"budget": 16, "topk": 4, **TREE}, ("budget", "topk"))
BOUND = ServerConfig.make("speculative", {"budget": 8, "topk": 1, **TREE}, ("budget", "topk"))
IDS = list(range(10, 20))


def rc(rate: float) -> RequestConfig:
    return RequestConfig.make(0.0, 10, None, seed=3, rate=rate)


def check(bound: bool) -> ClientCheck:
    reasons = ("worker 0: event-loop lag p90 95.0 ms > 20 ms",) if bound else ()
    return ClientCheck(bound, reasons, (), 0.001, 0.002, 0.003, 1.9, 2.5, 4)


def requests(n: int, *, e2e: float, ttft: float = 0.1, cut: int = 0) -> list[dict[str, Any]]:
    """`n` finished requests of 10 tokens, the last `cut` of them cut off by the duration."""
    out = []
    for i in range(n):
        rec: dict[str, Any] = {
            "ttft": ttft,
            "itls": [0.01] * 9,
            "e2e": e2e,
            "output_tokens": 10,
            "token_ids": IDS,
            "text": "the tide comes in",
            "top2_margins": [2.0] * 10,
            "error": None,
            "sha256": "",
            "index": i,
            "worker": 0,
            "scheduled_s": i * 0.5,
            "sent_s": i * 0.5 + 0.001,
            "done_s": i * 0.5 + e2e,
            "slot_wait_s": 0.0,
            "late_s": 0.001,
            "finished": True,
        }
        if i >= n - cut:
            rec.update(error=UNFINISHED if i % 2 else NOT_SENT, finished=False, ttft=None)
        out.append(rec)
    return out


def result(records: list[dict[str, Any]], bound: bool = False) -> WorkloadResult:
    specs = [
        RequestSpec(f"p{i % 2}", "", 10, 0.0, seed=3, repeat=i // 2) for i in range(len(records))
    ]
    return WorkloadResult(list(zip(specs, records, strict=True)), 8.0, check(bound), 2)


def measure(
    store: RunStore, point: Point, res: WorkloadResult, baseline: PointRecord | None
) -> PointRecord:
    key = point_columns(store.run_id, point, RunStore.new_attempt(), "ddtree_runtime")
    measured, base = (
        request_rows(res, key, near_tie_margin=near_tie_margin("ddtree_runtime")),
        baseline.model_dump() if baseline else None,
    )
    # Judged against the AR point's outputs (the same ids): proven exact, so it may be best.
    judged_against = (
        request_rows(res, key, near_tie_margin=near_tie_margin("ddtree_runtime"))
        if baseline is not None
        else None
    )
    summary, verdicts = summarize(
        point.server_config,
        point.request_config,
        measured,
        res.wall_s,
        policy=DeterminismSpec(),
        baseline_rows=judged_against,
        baseline_point=base,
        slo=SLO,
    )
    record, rows = measured_point(
        point,
        res,
        measured,
        summary=summary,
        verdicts=verdicts,
        key=key,
        baseline_point=base,
        fingerprint=None,
        started_at=utc_now(),
        finished_at=utc_now(),
        log_path="",
        log_text="",
    )
    store.commit_point(record, rows)
    return record


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, PointRecord]]:
    manifest = {"sweep": "rates", "sweeper_version": "0", "spec": {}, "runtime_source_hash": ""}
    store = RunStore.create(tmp_path_factory.mktemp("results"), manifest)
    out: dict[str, PointRecord] = {}
    for rate, ar_e2e in ((1.0, 1.0), (math.inf, 3.0)):
        ar = Point("h", AR, rc(rate))
        # At rate inf the AR baseline queues: 3 of its 16 requests cut off by the duration.
        out[f"ar {rate}"] = base = measure(
            store, ar, result(requests(16, e2e=ar_e2e, cut=3 if math.isinf(rate) else 0)), None
        )
        fast = Point("h", FAST, rc(rate), ar.point_id)
        out[f"fast {rate}"] = measure(store, fast, result(requests(16, e2e=0.5)), base)
        # Lower latency still, but measured by a client that could not keep up.
        bound = Point("h", BOUND, rc(rate), ar.point_id)
        out[f"bound {rate}"] = measure(store, bound, result(requests(16, e2e=0.2), True), base)
    return store.dir, out


def test_cut_off_requests_are_slo_misses_not_failures(run: tuple[Path, dict]) -> None:
    _, points = run
    queued = points["ar inf"]
    assert queued.status == "ok" and queued.reason == ""
    assert (queued.n_unfinished, queued.n_errors, queued.n_requests) == (3, 3, 13)
    assert queued.goodput_share == pytest.approx(0.0)  # E2E 3 s: every ITL is 0.32 s > 0.1
    fine = points["ar 1.0"]
    assert fine.goodput_share == 1.0 and fine.meets_slo and fine.goodput_rps == 2.0
    assert fine.request_itl_p50 == pytest.approx((1.0 - 0.1) / 9)
    assert (fine.rate, fine.arrival, fine.concurrency) == (1.0, "poisson", None)


def test_a_client_bound_point_gets_no_speedup_and_says_why(run: tuple[Path, dict]) -> None:
    _, points = run
    fast, bound = points["fast 1.0"], points["bound 1.0"]
    assert fast.client_bound is False and fast.client_processes == 2
    assert fast.speedup is not None and fast.e2e_speedup == pytest.approx(2.0)
    assert fast.itl_speedup == pytest.approx(0.9 / 0.4)
    assert bound.client_bound is True and "event-loop lag" in bound.client_bound_reason
    assert (bound.speedup, bound.e2e_speedup, bound.itl_speedup) == (None, None, None)
    assert bound.output_tok_s is not None  # the numbers are kept, flagged, not reported
    assert (bound.achieved_rate, bound.mean_in_flight, bound.max_in_flight) == (1.9, 2.5, 4)


def test_report_flags_client_bound_points_and_never_marks_them_best(run: tuple[Path, dict]) -> None:
    run_dir, _ = run
    view = build_view(read_run(run_dir))
    best = view.points[view.points["best"]]
    # The client-bound config has the lowest E2E at each rate; the best is the other one.
    assert sorted(best["config"]) == ["b16 k4 bs8", "b16 k4 bs8"]
    html = render_html(view)
    assert "2 client-bound points" in html
    assert html.count('class="badge v-client-bound"') >= 2
    knees = html[html.index("Rate sweep: knees") :]
    # AR meets the SLO at 1 req/s only; b16 k4 meets it at both (censored); the knee scan of
    # b8 k1 stops at its first (client-bound) point.
    assert "misses the SLO at rate inf (0% good)" in knees
    assert "client-bound at 1 req/s" in knees
    assert "&ge; inf" in knees or "\u2265 inf" in knees
    assert "E2E \u00d72.00 / ITL \u00d72.25 *" in knees  # 1 req/s is below both knees
