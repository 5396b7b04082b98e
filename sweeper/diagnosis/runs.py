"""The diagnosis of a run: its verdicts and factors read from the run as the one reader read it
(`sweeper.results.reader.Run`), then the pure attribution (`rule.py`). Used by the report,
`compare`, nightly and `diagnose`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pandas as pd

from sweeper.config.labels import point_label
from sweeper.diagnosis.rule import Diagnosis, diagnose
from sweeper.proof.calibration import ar_control, calibration_text, near_tie_rates
from sweeper.results.reader import Run
from sweeper.results.records import factor_kinds

#: Columns a request's outcome and identity are read from, besides its factors.
OUTCOME_COLUMNS = ["verdict", "error", "mode", "temperature", "host", "point_id", "repeat"]
#: Read besides, for the near-tie calibration (`proof/calibration.py`): what AR-vs-AR compares.
_CONTROL_COLUMNS = ["sha256", "restart", "prompt_id", "max_tokens", "concurrency", "rate"]


def run_requests(runs: Sequence[Run]) -> tuple[pd.DataFrame, dict[str, str]]:
    """The judged-request columns of one or more runs (a run and its follow-ups), and the
    factors they share."""
    frames, kinds = [], None
    for run in runs:
        names = run.request_names
        if "verdict" not in names:
            continue
        found = factor_kinds(names)
        kinds = found if kinds is None else {c: k for c, k in kinds.items() if c in found}
        present = [c for c in _CONTROL_COLUMNS if c in names]
        wanted = list(dict.fromkeys([*OUTCOME_COLUMNS, *found, *present]))
        frames.append(run.requests(wanted, categorical=False))
    if not frames:
        return pd.DataFrame(), {}
    return calibrated(pd.concat(frames, ignore_index=True)), kinds or {}


def calibrated(requests: pd.DataFrame) -> pd.DataFrame:
    """The requests with `near_tie_excess`: True on the near-ties of a config whose near-tie
    rate exceeds the AR-vs-AR control's, which the diagnosis then counts as broken."""
    rows = requests.to_dict("records")
    rates = near_tie_rates(rows, ar_control(rows))
    flagged = {label for label, rate in rates.items() if rate.flagged}
    excess = [
        r.get("verdict") == "near-tie" and point_label(r) in flagged and r.get("mode") != "ar"
        for r in rows
    ]
    return requests.assign(near_tie_excess=excess)


def diagnose_requests(requests: pd.DataFrame, kinds: dict[str, str]) -> Diagnosis:
    """The attribution of `run_requests`' frame, with its near-tie calibration in words."""
    rows = requests.to_dict("records")
    control = ar_control(rows)
    text = calibration_text(control, near_tie_rates(rows, control))
    return replace(diagnose(requests, kinds), calibration=text)


def diagnose_run(*runs: Run) -> Diagnosis | None:
    """The diagnosis over the runs' requests together (None when none has request records)."""
    requests, kinds = run_requests(runs)
    if requests.empty:
        return None
    return diagnose_requests(requests, kinds)
