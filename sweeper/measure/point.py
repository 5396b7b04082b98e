"""Turning one point's measurement into records: the request rows (`request_rows`), then, with
the numbers and verdicts analysis judged from them (`sweeper.analysis.summary`), the request
records and the point row with its acceptance, exposure, self-check and host load; or the row of
a point that failed.

Pure record building: the runner sends the requests, fetches the logs and has the rows judged;
this module shapes what they gave and judges nothing. A measured and a failed point take their
identifying columns from the same `point_columns`, so the two never differ in what identifies
them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import httpx

from sweeper.engines.base import Engine, RequestSpec
from sweeper.engines.capabilities import Capabilities
from sweeper.engines.stream import SOURCE_ORDER
from sweeper.measure.client import choice_records
from sweeper.measure.exposure import point_exposure
from sweeper.measure.lengths import point_lengths, request_columns
from sweeper.measure.selfcheck import check_columns
from sweeper.measure.workload import WorkloadResult
from sweeper.plan import Point
from sweeper.results.records import PointRecord, RequestRecord
from sweeper.results.rows import is_missing, request_rows_of

#: Characters of a service log kept in a point row (the whole log is in logs/<point>.log).
LOG_TAIL_CHARS = 4000


def point_columns(run_id: str, point: Point, attempt: str, engine: str) -> dict[str, Any]:
    """What identifies a point in every row it writes: run, host, point, attempt, and its
    configs' own columns (`ServerConfig.columns`, `RequestConfig.columns`)."""
    return {
        "run_id": run_id,
        "host": point.host,
        "point_id": point.point_id,
        "attempt": attempt,
        **point.server_config.columns(engine),
        **point.request_config.columns(),
    }


def request_rows(
    result: WorkloadResult, key: Mapping[str, Any], *, near_tie_margin: float | None
) -> list[dict[str, Any]]:
    """The point's request rows as measured, in order, one per choice of each request
    (`choice_records`; n = 1: one per request): what identifies the point (`key`), the prompt,
    repeat and seed, the engine's calibrated near-tie margin in nats (None: it has none; what
    the greedy judge reads, `sweeper.proof.determinism.greedy_margin`), the client's record
    and its asked lengths; no verdict yet."""
    return [
        {
            **key,
            "prompt_id": spec.prompt_id,
            "repeat": spec.repeat,
            "seed": spec.seed,
            "near_tie_margin": near_tie_margin,
            **row,
            **request_columns(spec, row),
        }
        for spec, row in _choices(result)
    ]


def _choices(result: WorkloadResult) -> list[tuple[RequestSpec, dict[str, Any]]]:
    """(request, record) for every choice of every request, in order (`choice_records`)."""
    return [(spec, row) for spec, rec in result.records for row in choice_records(rec)]


def measured_point(
    point: Point,
    result: WorkloadResult,
    rows: list[dict[str, Any]],
    *,
    summary: Mapping[str, Any],
    verdicts: Sequence[tuple[str, int | None]],
    key: Mapping[str, Any],
    baseline_point: Mapping[str, Any] | None,
    fingerprint: str | None,
    started_at: str,
    finished_at: str,
    log_path: str,
    log_text: str,
    acceptance: Mapping[str, float] | None = None,
    capabilities: Capabilities | None = None,
    host_load: Mapping[str, Any] | None = None,
) -> tuple[PointRecord, list[RequestRecord]]:
    """The point row and its request records from `rows` (`request_rows`) and what analysis
    judged of them: `summary`, the point's judged columns, and `verdicts`, (verdict, divergence
    index) per row in order (`sweeper.analysis.summary.summarize`). `acceptance` holds the
    engine's counter deltas over the measured requests when it counts per server.

    Requests cut off by an open loop's duration (never sent, or still in flight after the
    grace) are SLO misses, not failures: the point fails only for requests that ended in an
    error. A client-bound point (or one compared with a client-bound baseline) gets no speedup:
    its numbers describe the client. `host_load` (`sweeper.measure.hostload`) flags a busy host,
    and `baseline_busy` a baseline measured on one: their speedups are kept but not trusted.
    """
    sent = request_rows_of(rows)  # one per request: its choices share its error
    errors = [r["error"] for r in sent if r.get("error") and r.get("finished", True)]
    completed = sum(r.get("finished", True) and not r.get("error") for r in sent)
    if errors:
        reason = f"{len(errors)}/{len(sent)} requests failed: {errors[0]}"
    elif not completed:
        # Nothing measured is never ok: a duration too short for one request (or none sent).
        reason = f"no request completed ({len(sent)} sent or cut off by the load's duration)"
        errors = [reason]
    else:
        reason = ""
    numbers = dict(summary)
    for row, (verdict, index) in zip(rows, verdicts, strict=True):
        row["verdict"], row["divergence_index"] = verdict, index
    if errors:
        numbers["determinism"] = "n/a"  # a failed point has no verdict, only its reason
    numbers.update(point_acceptance(numbers.get("tau"), acceptance))
    if capabilities is not None:
        # Where margins came from, and why a point has no acceptance (an AR one needs none).
        numbers["margin_source"] = capabilities.margins
        numbers["acceptance_source"] = numbers["acceptance_source"] or capabilities.acceptance
    numbers["n_unfinished"] = sum(not r.get("finished", True) for r in sent)
    numbers.update(check_columns(result.check, result.processes))
    numbers.update(point_lengths(_choices(result)))
    if _flag(numbers.get("client_bound")) or _flag((baseline_point or {}).get("client_bound")):
        numbers.update(speedup=None, e2e_speedup=None, itl_speedup=None, speed_speedup=None)
    numbers.update(host_load or {})
    if baseline_point is not None and "host_busy" in baseline_point:
        numbers["baseline_busy"] = _flag(baseline_point.get("host_busy"))
    numbers.update(point_exposure(rows, acceptance, str(key.get("engine"))))
    sources = {r.get("token_ids_source") or "engine" for r in rows}
    numbers["token_ids_source"] = next((s for s in SOURCE_ORDER if s in sources), "engine")
    status: Literal["ok", "failed"] = "failed" if errors else "ok"
    record = PointRecord(
        **key,
        covers_labels=list(point.server_config.covers),
        status=status,
        reason=reason,
        fingerprint=fingerprint,
        started_at=started_at,
        finished_at=finished_at,
        log_path=log_path,
        log_tail=log_text[-LOG_TAIL_CHARS:] if errors else "",
        **numbers,
    )
    return record, [RequestRecord(**r) for r in rows]


def _flag(value: Any) -> bool:
    return not is_missing(value) and bool(value)


def point_acceptance(
    request_tau: float | None, counters: Mapping[str, float] | None
) -> dict[str, Any]:
    """A point's tau and where it came from: the engine's counters over the measured requests
    (mean tokens per verify step: 1 + accepted / drafts), else the requests' own mean."""
    if counters and counters.get("drafts"):
        return {
            "tau": 1.0 + counters["accepted_tokens"] / counters["drafts"],
            "acceptance_source": "metrics",
            "accepted_tokens": counters["accepted_tokens"],
            "draft_tokens": counters.get("draft_tokens"),
        }
    return {"tau": request_tau, "acceptance_source": "requests" if request_tau else None}


class Counters:
    """Per-server acceptance counters read around a point's measured requests (after warm-up,
    then at the end), for engines that count acceptance per server rather than per response."""

    def __init__(self, engine: Engine, base_url: str) -> None:
        self.engine = engine
        self.base_url = base_url
        self.before: dict[str, float] | None = None

    def read(self) -> dict[str, float] | None:
        with httpx.Client(timeout=10.0) as client:
            return self.engine.acceptance_counters(client, self.base_url)

    def start(self) -> None:
        self.before = self.read()

    def delta(self) -> dict[str, float] | None:
        """What the counters grew by since `start` (None when the engine has none)."""
        if self.before is None:
            return None
        after = self.read()
        if after is None:
            return None
        return {key: after[key] - self.before.get(key, 0.0) for key in after}


def failed_point(
    key: Mapping[str, Any], *, reason: str, at: str, log_path: str, log_tail: str
) -> PointRecord:
    """The row of a point that could not be measured, with its reason and log tail."""
    return PointRecord(
        **key,
        status="failed",
        reason=reason,
        started_at=at,
        finished_at=at,
        log_path=log_path,
        log_tail=log_tail[-LOG_TAIL_CHARS:],
    )
