"""Per-point numbers from request records (pure): throughput, latency percentiles, tau, speedup.

Records are mappings or a DataFrame with the request columns of docs/results.md (ttft, itls, e2e,
output_tokens, tau, error). Failed requests (a non-empty `error`) count in `n_errors` only.
Throughput divides by the wall time of the point's measurement window, which the caller measures
(concurrent requests overlap, so summing their latencies would be wrong). Percentiles use linear
interpolation (numpy's default); a statistic with no data is None.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from sweeper.results.rows import is_failed, is_missing, request_rows_of, rows_of

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class PointMetrics:
    """The numbers of one point; `as_columns()` gives the points-table columns."""

    n_requests: int
    n_errors: int
    output_tokens: int
    wall_s: float
    output_tok_s: float | None
    request_s: float | None
    ttft_p50: float | None
    ttft_p90: float | None
    ttft_p99: float | None
    itl_p50: float | None
    itl_p90: float | None
    itl_p99: float | None
    e2e_p50: float | None
    e2e_p90: float | None
    e2e_p99: float | None
    tau: float | None

    def as_columns(self) -> dict[str, Any]:
        return asdict(self)


def percentiles(values: Iterable[float | None], name: str) -> dict[str, float | None]:
    """`{name}_p50/p90/p99` of the values (None when there are none)."""
    data = np.asarray([v for v in values if not is_missing(v)], dtype=float)
    if data.size == 0:
        return {f"{name}_p{p}": None for p in PERCENTILES}
    return {f"{name}_p{p}": float(np.percentile(data, p)) for p in PERCENTILES}


def point_metrics(records: Any, wall_s: float) -> PointMetrics:
    """Metrics of one point from its (measured, non-warmup) request records: output tokens
    of every choice's row, everything else per request (`request_rows_of`)."""
    tokens = sum(int(r.get("output_tokens") or 0) for r in rows_of(records) if not is_failed(r))
    rows = request_rows_of(rows_of(records))
    ok = [r for r in rows if not is_failed(r)]
    itls = [float(x) for r in ok for x in (_seq(r.get("itls")))]
    taus = [float(r["tau"]) for r in ok if not is_missing(r.get("tau"))]
    rate = wall_s > 0 and bool(ok)
    return PointMetrics(
        n_requests=len(ok),
        n_errors=len(rows) - len(ok),
        output_tokens=tokens,
        wall_s=float(wall_s),
        output_tok_s=tokens / wall_s if rate else None,
        request_s=len(ok) / wall_s if rate else None,
        **percentiles((r.get("ttft") for r in ok), "ttft"),
        **percentiles(itls, "itl"),
        **percentiles((r.get("e2e") for r in ok), "e2e"),
        tau=float(np.mean(taus)) if taus else None,
    )


def speedup(output_tok_s: float | None, baseline_tok_s: float | None) -> float | None:
    """Throughput ratio to the AR baseline; None when either side is unknown or zero."""
    if not output_tok_s or not baseline_tok_s:
        return None
    return output_tok_s / baseline_tok_s


def _seq(value: Any) -> Sequence[Any]:
    return [] if value is None else list(value)
