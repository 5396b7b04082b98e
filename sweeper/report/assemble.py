"""One run (`sweeper.results.reader.Run`) shaped into the report's view model; a partial or
failed run still loads.

Reads only the columns it needs (a run may hold millions of request rows) and records, rather
than raises on, whatever is absent: no manifest, no points yet, missing contract columns,
points planned but not done. Those notes become the report's "What is missing" section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sweeper.analysis.best import served_rows
from sweeper.analysis.drift import mark_drift
from sweeper.analysis.impossible import IMPOSSIBLE_COLUMNS, mark_impossible
from sweeper.analysis.objective import withheld_speedup
from sweeper.config.labels import point_label, point_label_long
from sweeper.proof.calibration import calibrated_frame
from sweeper.proof.indistinguishable import describe, indistinguishable_in
from sweeper.proof.verdicts import SEVERITY, VIOLATIONS, worst_by_group
from sweeper.report.answer import Answer, Blocker, answers, blockers, starred
from sweeper.report.features import FeatureTable, feature_table
from sweeper.report.outputs import Divergence, load_divergences
from sweeper.results.manifest import PROMPT_PLAIN_CHAT
from sweeper.results.reader import POINTS_CSV, POINTS_PARQUET, REQUESTS_PARQUET, Run
from sweeper.results.records import PointRecord
from sweeper.spec.search import ConstraintsSpec
from sweeper.statefile import LOG, read_state

#: What `build_view` adds to the point records for the page (never grid flags).
VIEW_COLUMNS = ("config", "config_long", "best", *IMPOSSIBLE_COLUMNS)
#: The points contract's columns, from the record model (docs/results.md).
POINT_COLUMNS = list(PointRecord.model_fields)
REQUEST_SCALARS = [
    "host",
    "point_id",
    "prompt_id",
    "repeat",
    "temperature",
    "ttft",
    "e2e",
    "output_tokens",
    "tau",
    "verdict",
    "divergence_index",
    "error",
]
LOG_TAIL_LINES = 40


@dataclass
class Failure:
    """A failed point: what it was, why it failed, the end of its log."""

    host: str
    label: str
    reason: str
    log_tail: str


@dataclass
class RunView:
    """Everything the template and the figures need, already shaped."""

    run_dir: Path
    #: The run as read (the diagnosis and dataset sections read their columns from it).
    run: Run
    run_id: str
    sweep: str
    status: str
    manifest: dict[str, Any]
    points: pd.DataFrame
    requests: pd.DataFrame
    itl_sample: pd.DataFrame
    verdict_matrix: pd.DataFrame
    #: Which request features each speculative server config is proven, violated or unproven
    #: for (`sweeper.report.features`).
    features: FeatureTable
    missing: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    divergences_total: int = 0
    #: Configs the run could not tell apart (`sweeper.proof.indistinguishable`), in words.
    indistinguishable: list[str] = field(default_factory=list)
    #: The first section: the config to deploy per host and load level, and what stops others.
    answers: list[Answer] = field(default_factory=list)
    blockers: list[Blocker] = field(default_factory=list)


def speedup_withheld(points: pd.DataFrame) -> pd.Series:
    """Why each point's speedups are no result (`objective.withheld_speedup`; "" when they are
    one): busy, or impossible (above tau, `speedup_impossible` as `_normalise` marks it)."""
    return pd.Series(
        [withheld_speedup(r) for r in points.to_dict("records")], index=points.index, dtype=object
    )


def _calibrated_requests(requests: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """The near-ties of points above the AR-vs-AR control read `diverged` in the matrix too."""
    if "near_tie_excess" not in points or requests.empty or "verdict" not in requests:
        return requests
    excess = set(points.loc[points["near_tie_excess"].fillna(False).astype(bool), "point_id"])
    if not excess:
        return requests
    hit = requests["point_id"].astype(str).isin(excess) & (requests["verdict"] == "near-tie")
    out = requests.copy()
    out["verdict"] = out["verdict"].astype(str).where(~hit, "diverged")
    return out


def build_verdict_matrix(points: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """Config x prompt -> the worst verdict over repeats; failed points show 'failed'."""
    if requests.empty or not {"verdict", "prompt_id", "point_id"} <= set(requests):
        return pd.DataFrame()
    worst = worst_by_group(requests["verdict"], [requests["point_id"], requests["prompt_id"]])
    matrix = worst.unstack("prompt_id")
    matrix.index = matrix.index.astype(str)
    labels = points.set_index("point_id")["config"]
    failed = points[points["status"] == "failed"]["point_id"]
    for pid in failed:
        matrix.loc[pid] = "failed"
    matrix = matrix.reindex([p for p in points["point_id"] if p in matrix.index])
    matrix.index = [labels.get(p, p) for p in matrix.index]
    return matrix.fillna("missing")


def _missing_notes(
    manifest: dict[str, Any] | None, points: pd.DataFrame | None, run: Run
) -> list[str]:
    notes: list[str] = []
    if manifest is None:
        notes.append("manifest.json is missing or unreadable: provenance unknown.")
    elif manifest.get("status") not in ("complete", None):
        notes.append(f"The run's status is '{manifest.get('status')}': it did not finish.")
    if points is None:
        notes.append(f"No {POINTS_PARQUET} or {POINTS_CSV}: no point finished.")
    else:
        absent = [c for c in POINT_COLUMNS if c not in points.columns]
        if absent:
            notes.append("Points lack contract columns: " + ", ".join(absent) + ".")
        total = (manifest or {}).get("points_total") or 0
        if total and len(points) < int(total):
            notes.append(f"Only {len(points)} of {total} planned points have results.")
    runtime = ((manifest or {}).get("spec") or {}).get("runtime") or {}
    no_ar = points is not None and "mode" in points and not (points["mode"] == "ar").any()
    if no_ar and not runtime.get("baseline_run"):
        notes.append(
            "No AR baseline in this run: outputs were compared with nothing, so its speculative "
            "points are unproven (an endpoint run takes runtime.baseline_url or baseline_run)."
        )
    if not run.has_requests:
        notes.append(f"No {REQUESTS_PARQUET}: latency distributions and outputs are unavailable.")
    plain = _plain_chat_servers(manifest)
    if plain:
        notes.append(
            f"Chat prompts went to {', '.join(plain)} as plain 'role: content' text (the build "
            "has no /tokenize and its chat route gives no prompt ids): not the model's chat "
            "template, so tau and speedups are not those of chat use. Every config got the "
            "same text; outputs are still judged on their token ids."
        )
    return notes


def negotiated(manifest: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """Each server's (host/config) negotiated capabilities as the manifest records them, with
    `details` always a dict; servers negotiated nothing with are left out."""
    identities = (manifest or {}).get("identities") or {}
    out = []
    for name, record in identities.items() if isinstance(identities, dict) else ():
        caps = record.get("capabilities") if isinstance(record, dict) else None
        if isinstance(caps, dict):
            details = caps.get("details")
            out.append(
                (str(name), {**caps, "details": details if isinstance(details, dict) else {}})
            )
    return out


def _plain_chat_servers(manifest: dict[str, Any] | None) -> list[str]:
    """The servers sent chat prompts as plain text (`PROMPT_PLAIN_CHAT`)."""
    return [
        n for n, caps in negotiated(manifest) if caps["details"].get("prompt") == PROMPT_PLAIN_CHAT
    ]


def _failures(points: pd.DataFrame, run_dir: Path) -> list[Failure]:
    out = []
    for _, row in points[points["status"] == "failed"].iterrows():
        tail = str(row.get("log_tail") or "")
        if not tail.strip():
            tail = _log_tail(run_dir, str(row.get("log_path") or f"logs/{row['point_id']}.log"))
        out.append(
            Failure(str(row["host"]), row["config_long"], str(row.get("reason") or "?"), tail)
        )
    return out


def _log_tail(run_dir: Path, log_path: str) -> str:
    path = Path(log_path) if Path(log_path).is_absolute() else run_dir / log_path
    try:
        text = read_state(path, LOG).decode(errors="replace")
        return "\n".join(text.splitlines()[-LOG_TAIL_LINES:])
    except OSError:
        return f"(no log at {log_path})"


def _covers(labels: Any) -> str:
    if labels is None or isinstance(labels, float) or len(labels) == 0:
        return ""
    return " = " + " = ".join(str(label) for label in labels)


def _normalise(points: pd.DataFrame) -> pd.DataFrame:
    points = points.copy()
    defaults: dict[str, Any] = {
        "host": "?",
        "mode": "speculative",
        "status": "ok",
        "temperature": 0.0,
    }
    defaults |= {"concurrency": 1, "rate": None, "determinism": "n/a", "reason": ""}
    defaults |= {"client_bound": False, "client_bound_reason": ""}
    defaults |= {"host_busy": False, "baseline_busy": False, "host_busy_reason": ""}
    for col, value in defaults.items():
        if col not in points:
            points[col] = value
    # Impossible speedups (above tau), their cause read from the baselines' drift: marked before
    # anything judges the points (the best star, the figures, the summary's badges).
    marked = mark_impossible(mark_drift(points.to_dict("records")))
    points["speedup_impossible"] = [r.get("speedup_impossible") is True for r in marked]
    points["speedup_impossible_reason"] = [
        str(r.get("speedup_impossible_reason") or "") for r in marked
    ]
    rows = points.to_dict("records")
    # A config measured once for several labels (the engine's rules) reads as all of them.
    points["config"] = [point_label(r) + _covers(r.get("covers_labels")) for r in rows]
    points["config_long"] = [point_label_long(r) for r in rows]
    sort_keys = [k for k in ("host", "temperature", "concurrency", "rate", "mode") if k in points]
    return points.sort_values(sort_keys, kind="stable").reset_index(drop=True)


def build_view(run: Run, max_divergences: int = 200) -> RunView:
    """Assemble the view model of a run; never raises on a partial run."""
    run_dir = run.dir
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run directory at {run_dir}")
    loaded = run.manifest
    manifest = loaded.model_dump(mode="json", exclude_none=True) if loaded else None
    raw_points = run.points
    if raw_points is not None:  # near-ties above the AR-vs-AR control read as violations
        raw_points = calibrated_frame(raw_points, run)
    missing = _missing_notes(manifest, raw_points, run)
    points = _normalise(
        raw_points if raw_points is not None else pd.DataFrame(columns=["point_id"])
    )
    requests = _calibrated_requests(run.requests(REQUEST_SCALARS), points)
    rows, servers = points["config_long"], points["config"]
    if points["host"].nunique() > 1:  # the same config on two hosts is two rows
        rows = points["host"].astype(str) + " " + rows
        servers = points["host"].astype(str) + " " + servers
    matrix = build_verdict_matrix(points.assign(config=rows), requests)
    divergences, total = load_divergences(run, points, max_divergences)
    # The answer is `sweeper best`'s, from the points as written (the view's own columns would
    # read as grid flags); its winners are the summary table's stars.
    written = points.drop(columns=list(VIEW_COLUMNS), errors="ignore").to_dict("records")
    written = served_rows(written, (manifest or {}).get("identities") or {})
    found = answers(written, _slo((manifest or {}).get("spec")))
    points["best"] = points["point_id"].astype(str).isin(starred(found))
    return RunView(
        run_dir=run_dir,
        run=run,
        run_id=str((manifest or {}).get("run_id") or run_dir.name),
        sweep=str((manifest or {}).get("sweep") or run_dir.parent.name),
        status=str((manifest or {}).get("status") or "unknown"),
        manifest=manifest or {},
        points=points,
        requests=requests,
        itl_sample=run.sample_list("itls").rename(columns={"value": "itl"}),
        verdict_matrix=matrix,
        features=feature_table(points, requests, servers),
        missing=missing,
        failures=_failures(points, run_dir),
        divergences=divergences,
        divergences_total=total,
        indistinguishable=describe(indistinguishable_in(run)),
        answers=found,
        blockers=blockers(written, _first_violation(divergences)),
    )


def _slo(spec: Any) -> ConstraintsSpec | None:
    """The spec's SLO as the answer's constraint at a rate (None: no `slo:`)."""
    return ConstraintsSpec(slo=True) if isinstance(spec, dict) and spec.get("slo") else None


def _first_violation(divergences: list[Divergence]) -> tuple[str, str, str] | None:
    """The worst violating output's (where, reference, output) from its first difference: the
    one the answer shows (the violations' line names the worst first too)."""
    violating = [d for d in divergences if d.verdict in VIOLATIONS]
    if not violating:
        return None
    d = max(violating, key=lambda d: SEVERITY.index(d.verdict))  # the first of the worst
    at = f", token {d.token_index}" if d.token_index is not None else ""
    return f"{d.config}, prompt {d.prompt_id}{at}", d.reference_rest, d.output_rest
