"""From one point's request rows to its point columns and per-request verdicts: the runner's one
call into the pure functions of `sweeper.analysis.metrics` and `sweeper.analysis.determinism`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sweeper.analysis.determinism import judge_point
from sweeper.analysis.metrics import point_metrics, speedup
from sweeper.spec import DeterminismSpec


def summarize(
    rows: Sequence[Mapping[str, Any]],
    wall_s: float,
    *,
    temperature: float,
    seed: int | None,
    is_baseline: bool,
    baseline_rows: Sequence[Mapping[str, Any]] | None,
    baseline_point: Mapping[str, Any] | None,
    policy: DeterminismSpec,
) -> tuple[dict[str, Any], list[tuple[str, int | None]]]:
    """Point columns (metrics, speedup, determinism) and, per row in order, (verdict, index)."""
    columns = point_metrics(list(rows), wall_s).as_columns()
    columns["speedup"] = speedup(
        columns["output_tok_s"], (baseline_point or {}).get("output_tok_s")
    )
    judged = judge_point(
        list(rows),
        list(baseline_rows) if baseline_rows is not None else None,
        temperature=temperature,
        seed=seed,
        policy=policy,
        is_baseline=is_baseline,
    )
    columns["determinism"] = judged.status
    by_key = {(v.prompt_id, v.repeat): v for v in judged.requests}
    per_row: list[tuple[str, int | None]] = []
    for row in rows:
        verdict = by_key.get((str(row["prompt_id"]), int(row["repeat"])))
        per_row.append((verdict.verdict, verdict.divergence_index) if verdict else ("n/a", None))
    return columns, per_row
