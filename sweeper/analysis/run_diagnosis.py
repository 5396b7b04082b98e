"""The diagnosis of a run directory: its verdicts and factors read through the one reader, then
the pure attribution (`diagnosis.py`). Used by the report, `compare`, nightly and `diagnose`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweeper.analysis.diagnosis import Diagnosis, diagnose
from sweeper.results.reader import load_request_columns, request_columns
from sweeper.results.records import factor_kinds

#: Columns a request's outcome and identity are read from, besides its factors.
OUTCOME_COLUMNS = ["verdict", "error", "mode", "temperature", "host", "point_id", "repeat"]


def run_requests(run_dirs: Sequence[Path]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The judged-request columns of one or more runs (a run and its follow-ups), and the
    factors they share."""
    frames, kinds = [], None
    for run_dir in run_dirs:
        names = request_columns(run_dir)
        if "verdict" not in names:
            continue
        found = factor_kinds(names)
        kinds = found if kinds is None else {c: k for c, k in kinds.items() if c in found}
        wanted = list(dict.fromkeys([*OUTCOME_COLUMNS, *found]))
        frames.append(load_request_columns(run_dir, wanted, categorical=False))
    if not frames:
        return pd.DataFrame(), {}
    return pd.concat(frames, ignore_index=True), kinds or {}


def diagnose_run(*run_dirs: Path) -> Diagnosis | None:
    """The diagnosis over the runs' requests together (None when none has request records)."""
    requests, kinds = run_requests(run_dirs)
    if requests.empty:
        return None
    return diagnose(requests, kinds)
