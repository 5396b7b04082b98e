"""The AR points of an earlier run as this run's baseline (`runtime.baseline_run`): for an
endpoint the sweeper does not start and that has no baseline endpoint beside it.

A point's baseline is the earlier run's ok AR point with the same temperature, top-p, top-k,
max_tokens and request features (`sweeper.config.features`), preferring the same load
(concurrency, or rate and arrival); its request rows are what determinism compares against,
and its samples what a distribution test compares with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from sweeper.config.features import FEATURES
from sweeper.results.reader import is_run_dir, read_run
from sweeper.results.records import RequestRecord

#: The request columns a verdict reads.
JUDGED = [
    "point_id",
    "prompt_id",
    "repeat",
    "token_ids",
    "text",
    "top2_margins",
    "sample_margins",
    "error",
]


class _Load(Protocol):
    """What a planned point's request config says of its load (`sweeper.plan.RequestConfig`;
    a protocol, so that this bottom layer needs nothing of the plan's)."""

    @property
    def temperature(self) -> float: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def concurrency(self) -> int | None: ...
    @property
    def rate(self) -> float | None: ...
    @property
    def arrival(self) -> str | None: ...
    @property
    def top_p(self) -> float | None: ...
    @property
    def top_k(self) -> int | None: ...
    def columns(self) -> dict[str, Any]: ...


class _Planned(Protocol):
    """A planned point (`sweeper.plan.Point`), as far as its baseline needs it."""

    @property
    def request_config(self) -> _Load: ...


class EarlierBaseline:
    """Baseline rows and points from an earlier run directory."""

    def __init__(self, run_dir: Path) -> None:
        if not is_run_dir(run_dir):
            raise FileNotFoundError(f"baseline_run {run_dir} is not a run directory")
        run = read_run(run_dir)
        points = run.points
        if points is None or "mode" not in points:
            points = pd.DataFrame(columns=["point_id", "mode", "status"])
        self.points = points[(points["mode"] == "ar") & (points["status"] == "ok")]
        columns = [*JUDGED, "token_ids_source"]
        columns = [c for c in columns if c in RequestRecord.model_fields]
        wanted = list(self.points["point_id"])
        self.requests = run.requests(
            columns, filters=[("point_id", "in", wanted)] if wanted else None
        )
        self.samples = [row for row in run.samples if row.get("mode") == "ar"]
        run.close()
        self.run_dir = Path(run_dir)

    def point_for(self, point: _Planned) -> dict[str, Any] | None:
        """The earlier AR point this point is judged against, or None."""
        rc = point.request_config
        same = self.points[
            (self.points["temperature"] == rc.temperature)
            & (self.points["max_tokens"] == rc.max_tokens)
        ]
        # The same distribution and features: outputs compare (a feature as its column holds it).
        asked = rc.columns()
        for column in ("top_p", "top_k", *(f.column for f in FEATURES)):
            wanted = asked[column]
            values = same[column] if column in same else pd.Series(None, index=same.index)
            same = same[values.isna() if wanted is None else values == wanted]
        if same.empty:
            return None
        exact = same
        for column in ("concurrency", "rate", "arrival"):
            wanted = getattr(rc, column)
            values = exact[column] if column in exact else pd.Series(None, index=exact.index)
            exact = exact[values.isna() if wanted is None else values == wanted]
        row = (exact if not exact.empty else same).iloc[0]
        return dict(row)

    def rows_for(self, point: _Planned) -> list[dict[str, Any]] | None:
        """That point's request rows, or None."""
        found = self.point_for(point)
        if found is None:
            return None
        rows = self.requests[self.requests["point_id"] == found["point_id"]]
        return list(rows.to_dict("records"))

    def samples_for(self, point: _Planned) -> list[dict[str, Any]]:
        """That point's samples (drawn by it, or by the sibling it shared them with)."""
        found = self.point_for(point)
        if found is None:
            return []
        source = found.get("samples_point_id")
        source = found["point_id"] if source is None or source != source else source
        return [row for row in self.samples if row.get("point_id") == source]
