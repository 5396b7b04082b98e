"""From one point's request rows to its judged columns and per-request verdicts: the runner's one
call into the pure functions of `sweeper.analysis.metrics`, `sweeper.proof.determinism` and
`sweeper.analysis.goodput`. Measuring hands the rows on (`sweeper.measure.point.request_rows`);
the runner judges them here and gives the result back to `measured_point` for the records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sweeper.analysis.goodput import goodput_columns, latency_speedups
from sweeper.analysis.metrics import point_metrics, speedup
from sweeper.config import RequestConfig, ServerConfig
from sweeper.proof.determinism import SampledVerdict, judge_point
from sweeper.proof.verdicts import UNJUDGED
from sweeper.results.rows import choice_of
from sweeper.spec import DeterminismSpec, SloSpec
from sweeper.spec.model import SampledCheck


def summarize(
    server_config: ServerConfig,
    rc: RequestConfig,
    rows: Sequence[Mapping[str, Any]],
    wall_s: float,
    *,
    policy: DeterminismSpec,
    baseline_rows: Sequence[Mapping[str, Any]] | None,
    baseline_point: Mapping[str, Any] | None,
    slo: SloSpec | None = None,
    speed_baseline_point: Mapping[str, Any] | None = None,
    sampled_check: SampledCheck | None = None,
    sampled_verdict: SampledVerdict | None = None,
) -> tuple[dict[str, Any], list[tuple[str, int | None]]]:
    """A point's columns (metrics, speedups, determinism, goodput against `slo`) and, per row in
    order, (verdict, divergence index). `speed_baseline_point` is the production AR's
    (`runtime.speed_baseline`), when the spec names one; `sampled_check` (the point's, None at
    temperature 0) and `sampled_verdict` judge a sampled point
    (`sweeper.proof.determinism.judge_point`)."""
    columns = point_metrics(list(rows), wall_s).as_columns()
    columns["speedup"] = speedup(
        columns["output_tok_s"], (baseline_point or {}).get("output_tok_s")
    )
    judged = judge_point(
        list(rows),
        list(baseline_rows) if baseline_rows is not None else None,
        temperature=rc.temperature,
        seed=rc.seed,
        policy=policy,
        # An AR point is the reference, unless an earlier run's AR rows are (baseline_run).
        is_baseline=server_config.mode == "ar" and baseline_rows is None,
        sampled_check=sampled_check or "repeats",
        sampled_verdict=sampled_verdict,
    )
    columns["determinism"] = judged.status
    columns["sampled_check"] = sampled_check
    if judged.status == "unproven":
        why = next((v.detail for v in judged.requests if v.verdict in UNJUDGED), "")
        columns["unproven_reason"] = why or "nothing was compared with anything"
    if sampled_verdict is not None and rc.temperature > 0:
        columns["sampled_detail"] = sampled_verdict.detail
    columns.update(goodput_columns(rows, slo, wall_s))
    columns.update(latency_speedups(columns, baseline_point))
    if speed_baseline_point is not None:
        columns["speed_speedup"] = speedup(
            columns.get("output_tok_s"), speed_baseline_point.get("output_tok_s")
        )
    by_key = {(v.prompt_id, v.repeat, v.choice): v for v in judged.requests}
    per_row: list[tuple[str, int | None]] = []
    for row in rows:
        verdict = by_key.get((str(row["prompt_id"]), int(row["repeat"]), choice_of(row)))
        per_row.append((verdict.verdict, verdict.divergence_index) if verdict else ("n/a", None))
    return columns, per_row
