"""Compare two runs point by point: deltas, noise-aware regression flags, new breakage.

`compare_runs` is pure: frames in, a `Comparison` out (`compare_loaded` takes them from two
runs as read, `sweeper.results.reader.Run`). Points are matched by identity (host + server params +
request params), never by run-specific ids; when both runs' requests name datasets, each point
is split by dataset (`sweeper.analysis.datasets`) and matched per dataset, so a regression on
one suite is not averaged away by the others. A metric change is flagged only when it exceeds
both the relative threshold and the noise of the two runs: twice the combined standard error
of the per-request values, where each request is measured against its own prompt's mean so that
prompts of different lengths do not count as noise (the spread of repeats). A config measured
on several restarts (`repeats.restarts`) is one row, its means over restarts; where both runs have
2+ restarts of it, their 95% intervals are the noise (`restart_noise`): a change whose intervals
overlap is "within noise", neither a regression nor an improvement.
A regression is a flagged slowdown (tok/s or tau down, TTFT up), a point that newly failed, or
determinism newly broken (no violation before, one now: diverged, garbled, ...), or a point
no longer proven (a clean verdict before, none now: unproven, or a damaged record whose verdict is
missing or no verdict's name, `proof.verdicts.standing`); a newly broken config gets run B's
diagnosis from `sweeper.diagnosis.compare` (a layer above).
A point whose throughput speedup is impossible in either run (above its tau: its AR baseline ran
slower than its own steps allow, `sweeper.analysis.impossible`) is marked with the numbers and
the likely cause (`untrusted`): its speedup is no result, whatever the deltas say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sweeper.analysis.datasets import (
    DATASET_REQUEST_COLUMNS,
    dataset_points,
    dataset_requests,
    has_datasets,
)
from sweeper.analysis.drift import mark_drift
from sweeper.analysis.impossible import mark_impossible
from sweeper.analysis.objective import Interval
from sweeper.analysis.restart_noise import collapse_restarts, relative_noise, spread_of
from sweeper.config.labels import point_label_long
from sweeper.proof.calibration import calibrated_frame
from sweeper.proof.verdicts import standing, verdict_damage
from sweeper.results.reader import Run
from sweeper.results.records import CONFIG_COLUMNS, extra_config_columns

# metric -> (per-request value column or recipe, True when higher is better)
METRICS: dict[str, bool] = {"output_tok_s": True, "tau": True, "ttft_p50": False}
NOISE_SIGMAS = 2.0


@dataclass
class PointDelta:
    """One point present in either run, with its numbers in both and what changed."""

    key: tuple[str, ...]
    host: str
    label: str
    a: dict[str, Any]
    b: dict[str, Any]
    delta: dict[str, float | None]
    noise: dict[str, float]
    flags: list[str] = field(default_factory=list)
    is_regression: bool = False
    #: The point in run B (empty when it is only in A).
    point_id: str = ""
    #: For a config whose determinism newly broke: where run B's violations live and how this
    #: point's requests stand (`sweeper.diagnosis.compare.with_diagnosis`).
    diagnosis: str = ""
    #: Changes beyond the threshold but inside both runs' restart intervals (not flags).
    within_noise: list[str] = field(default_factory=list)
    #: Numbers of this point that are no result, and why (an impossible speedup; not flags).
    untrusted: list[str] = field(default_factory=list)

    @property
    def flag_text(self) -> str:
        return ", ".join(self.flags)


@dataclass
class Comparison:
    """All point deltas of run B against run A."""

    baseline_name: str
    threshold: float
    rows: list[PointDelta]

    @property
    def regressions(self) -> list[PointDelta]:
        """The points that regressed."""
        return [r for r in self.rows if r.is_regression]

    @property
    def regressed(self) -> bool:
        """True when any point regressed."""
        return bool(self.regressions)

    @property
    def summary(self) -> str:
        """One line for humans."""
        flagged = sum(1 for r in self.rows if r.flags)
        only_a = sum(1 for r in self.rows if r.b["status"] == "absent")
        only_b = sum(1 for r in self.rows if r.a["status"] == "absent")
        unmatched = f" ({only_a} only in A, {only_b} only in B)" if only_a or only_b else ""
        inside = sum(1 for r in self.rows if r.within_noise and not r.flags)
        within = f", {inside} changed within restart noise" if inside else ""
        impossible = sum(1 for r in self.rows if r.untrusted)
        marked = f", {impossible} with an impossible speedup (above tau)" if impossible else ""
        return (
            f"{len(self.rows)} points compared{unmatched}, {flagged} changed beyond noise"
            f"{within}, {len(self.regressions)} regressions{marked}."
        )


def parse_threshold(text: str, above_zero: bool = False, below: float = 10.0) -> float:
    """'5%' or '0.05' -> 0.05, at least 0 (above 0 with `above_zero`) and under `below`;
    refuses nonsense with one message naming the bounds, the same words for every command."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"threshold {text!r} is not a number or percentage like 5%") from None
    low_ok = value > 0 if above_zero else value >= 0
    if not (low_ok and value < below):
        lower = "above 0%" if above_zero else "at least 0%"
        raise ValueError(f"threshold {text!r} must be {lower} and below {below * 100:g}%")
    return value


def config_keys(points: pd.DataFrame, cols: list[str]) -> pd.Series:
    """Each point's identity over `cols` (`identity_columns`) as a tuple of strings: exact
    numbers, a missing value and a column the frame lacks alike as unset."""

    def norm(v: Any) -> str:
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return "-"
        if isinstance(v, (bool, np.bool_)):
            return str(bool(v))
        if isinstance(v, (int, float, np.integer, np.floating)):
            # Exact (8 and 8.0 alike): "g" alone would give 0.1234561 and 0.1234562 one key.
            short = f"{float(v):g}"
            return short if float(short) == float(v) else repr(float(v))
        return str(v)

    for col in cols:  # a column one run lacks (a grid flag only B has) reads as unset there
        if col not in points:
            points = points.assign(**{col: None})

    return pd.Series(
        [tuple(norm(r[c]) for c in cols) for r in points[cols].to_dict("records")],
        index=points.index,
    )


def request_noise(requests: pd.DataFrame) -> pd.DataFrame:
    """Per point_id, the relative standard error of each metric's per-request values."""
    if requests is None or requests.empty or "point_id" not in requests:
        return pd.DataFrame(columns=list(METRICS))
    req = requests.copy()
    if {"output_tokens", "e2e"} <= set(req):
        req["output_tok_s"] = req["output_tokens"] / req["e2e"].where(req["e2e"] > 0)
    if "ttft" in req:
        req["ttft_p50"] = req["ttft"]
    group = ["point_id", "prompt_id"] if "prompt_id" in req else ["point_id"]
    out = {}
    for metric in METRICS:
        if metric not in req:
            continue
        values = req[metric].astype(float)
        rel = values / values.groupby([req[g] for g in group]).transform("mean") - 1.0
        stats = rel.groupby(req["point_id"]).agg(["std", "count"])
        out[metric] = (stats["std"].fillna(0.0) / np.sqrt(stats["count"].clip(lower=1))).fillna(0.0)
    return pd.DataFrame(out)


def _values(row: pd.Series | None) -> dict[str, Any]:
    if row is None:
        return {m: None for m in METRICS} | {"status": "absent", "determinism": "absent"}
    vals: dict[str, Any] = {m: _num(row.get(m)) for m in METRICS}
    vals["status"] = str(row.get("status", "ok"))
    vals["determinism"] = row.get("determinism")  # as recorded: missing is damage, not n/a
    return vals


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(f) else f


#: The request columns the noise estimate reads.
NOISE_COLUMNS = ["point_id", "prompt_id", "output_tokens", "e2e", "ttft"]
#: What compare reads of the requests: the noise columns, and what a per-dataset split needs.
COMPARED_COLUMNS = list(dict.fromkeys([*NOISE_COLUMNS, *DATASET_REQUEST_COLUMNS]))


def compare_loaded(run_a: Run, run_b: Run, threshold: float) -> Comparison:
    """Compare run B against A, reading only what the comparison needs."""
    frames, impossible = [], []
    for run in (run_a, run_b):
        points, requests = run_frames(run)
        impossible.append(impossible_by_point(points))
        frames.append((points, requests))
    if all(has_datasets(requests) for _, requests in frames):
        frames = [(dataset_points(p, r), dataset_requests(r)) for p, r in frames]
    (points_a, requests_a), (points_b, requests_b) = frames
    return compare_runs(
        points_a, points_b, requests_a, requests_b, threshold, run_a.dir.name, *impossible
    )


def run_frames(run: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run's points as every judge reads them (near-ties above the AR-vs-AR control are
    violations; no points: an empty frame) and the request columns compare reads."""
    points = run.points
    points = (
        calibrated_frame(points, run) if points is not None else pd.DataFrame(columns=["point_id"])
    )
    return points, run.requests(COMPARED_COLUMNS, categorical=False)


def identity_columns(*frames: pd.DataFrame) -> list[str]:
    """What a point is, over every frame given: host, config columns, every extra grid flag of
    any of them (a flag only one has must still tell its points apart: left out, they would
    share one key and all but one would silently vanish), and dataset; those some frame has."""
    names = [c for frame in frames for c in frame.columns]
    identity = ["host", *CONFIG_COLUMNS, *dict.fromkeys(extra_config_columns(names)), "dataset"]
    return [c for c in identity if any(c in frame for frame in frames)]


def impossible_by_point(points: pd.DataFrame | None) -> dict[str, str]:
    """Point id -> why its speedup is impossible (`impossible.mark_impossible`, its cause read
    from the run's baseline drift), for the points of one run that have one."""
    if points is None or points.empty:
        return {}
    marked = mark_impossible(mark_drift(points.to_dict("records")))
    return {
        str(r["point_id"]): str(r["speedup_impossible_reason"])
        for r in marked
        if r.get("speedup_impossible") is True
    }


def compare_runs(
    points_a: pd.DataFrame,
    points_b: pd.DataFrame,
    requests_a: pd.DataFrame | None = None,
    requests_b: pd.DataFrame | None = None,
    threshold: float = 0.05,
    baseline_name: str = "run A",
    impossible_a: Mapping[str, str] | None = None,
    impossible_b: Mapping[str, str] | None = None,
) -> Comparison:
    """Every point of A and B matched by identity, with deltas of B relative to A and flags;
    `impossible_a`/`_b`: each run's impossible speedups by point id (`impossible_by_point`, of
    the points before a per-dataset split: a dataset point answers to its point's id)."""
    cols = identity_columns(points_a, points_b)
    ka, kb = config_keys(points_a, cols), config_keys(points_b, cols)
    held_a = _by_key(points_a, ka, impossible_a or {})
    held_b = _by_key(points_b, kb, impossible_b or {})
    # Restarts of one config share its key: one row each, with their intervals.
    points_a, spread_a = collapse_restarts(points_a, ka, METRICS)
    points_b, spread_b = collapse_restarts(points_b, kb, METRICS)
    if spread_a or spread_b:
        ka, kb = config_keys(points_a, cols), config_keys(points_b, cols)
    noise_a = request_noise(requests_a if requests_a is not None else pd.DataFrame())
    noise_b = request_noise(requests_b if requests_b is not None else pd.DataFrame())
    index_a, index_b = _index(ka), _index(kb)
    rows = []
    for key in list(dict.fromkeys([*kb.tolist(), *ka.tolist()])):
        ra = points_a.loc[index_a[key]] if key in index_a else None
        rb = points_b.loc[index_b[key]] if key in index_b else None
        noise = (_noise(noise_a, ra), _noise(noise_b, rb))
        spread = (spread_of(spread_a, ra), spread_of(spread_b, rb))
        delta = _delta(key, ra, rb, *noise, threshold, spread)
        for side, held in ((baseline_name, held_a), ("this run", held_b)):
            if key in held:
                delta.untrusted.append(f"impossible speedup in {side}: {held[key]}")
        rows.append(delta)
    return Comparison(baseline_name=baseline_name, threshold=threshold, rows=rows)


def _by_key(
    points: pd.DataFrame, keys: pd.Series, reasons: Mapping[str, str]
) -> dict[tuple[str, ...], str]:
    """Config key -> why its speedup is impossible; a dataset point (`<point id>/<dataset>`)
    answers to its point's id."""
    if not reasons or "point_id" not in points:
        return {}
    out: dict[tuple[str, ...], str] = {}
    for index, pid in points["point_id"].astype(str).items():
        reason = reasons.get(pid) or reasons.get(pid.rpartition("/")[0])
        if reason:
            out.setdefault(keys[index], reason)
    return out


def _index(keys: pd.Series) -> dict[tuple[str, ...], Any]:
    """Key -> row; two points of one run with one key would make one of them vanish."""
    index: dict[tuple[str, ...], Any] = {}
    for i, key in keys.items():
        if key in index:
            raise ValueError(f"two points of one run share the config {key}; cannot match them")
        index[key] = i
    return index


def _noise(noise: pd.DataFrame, row: pd.Series | None) -> dict[str, float]:
    if row is None or row.get("point_id") not in noise.index:
        return {}
    return {m: float(v) for m, v in noise.loc[row["point_id"]].items() if pd.notna(v)}


def _delta(
    key: tuple[str, ...],
    ra: pd.Series | None,
    rb: pd.Series | None,
    na: dict[str, float],
    nb: dict[str, float],
    threshold: float,
    spread: tuple[dict[str, Interval], dict[str, Interval]] = ({}, {}),
) -> PointDelta:
    a, b = _values(ra), _values(rb)
    some = rb if rb is not None else ra
    assert some is not None
    label = point_label_long(some)
    if isinstance(some.get("dataset"), str):
        label += f" [{some['dataset']}]"
    out = PointDelta(key, str(some.get("host")), label, a, b, dict.fromkeys(METRICS), {})
    out.point_id = "" if rb is None else str(rb.get("point_id"))
    if ra is None or rb is None:
        out.flags.append("new point" if ra is None else "missing in this run")
        return out
    for metric, higher_is_better in METRICS.items():
        va, vb = a[metric], b[metric]
        change = vb / va - 1.0 if va and vb is not None else None
        out.delta[metric] = change
        ia, ib = spread[0].get(metric), spread[1].get(metric)
        if ia is not None and ib is not None:  # restarts on both sides: their spread is the noise
            out.noise[metric] = relative_noise(ia, ib)
            if change is None or abs(change) <= threshold:
                continue
            if ia.overlaps(ib):
                out.within_noise.append(f"{metric} {change:+.1%} within restart noise")
                continue
        else:
            bound = NOISE_SIGMAS * float(np.hypot(na.get(metric, 0.0), nb.get(metric, 0.0)))
            out.noise[metric] = bound
            if change is None or abs(change) <= max(threshold, bound):
                continue
        worse = change < 0 if higher_is_better else change > 0
        out.flags.append(f"{metric} {change:+.1%}" + (" regression" if worse else " improvement"))
        out.is_regression |= worse
    if a["status"] == "ok" and b["status"] == "failed":
        out.flags.append("new failure")
        out.is_regression = True
    elif a["status"] == "failed" and b["status"] == "ok":
        out.flags.append("fixed")
    was, now = standing(a["determinism"]), standing(b["determinism"])
    if was != "violation" and now == "violation":
        out.flags.append(f"determinism broken ({b['determinism']})")
        out.is_regression = True
    elif was == "violation" and now in ("proven", "unjudged"):
        out.flags.append("determinism fixed")
    if was == "proven" and now in ("unjudged", "damaged") and b["status"] == "ok":
        # A nightly that can no longer prove a config right must say so, not pass quietly.
        why = (
            f"damaged: {verdict_damage(b['determinism'])}" if now == "damaged" else b["determinism"]
        )
        out.flags.append(f"no longer proven ({why})")
        out.is_regression = True
    return out


#: What two runs must share to be one sweep measured twice: the workload's requests. The grid
#: and the load levels may differ (points are matched by them).
SAME_SWEEP_KEYS = ("prompts", "api", "max_tokens", "repeats", "seed")


def sweep_differences(spec_a: dict[str, Any], spec_b: dict[str, Any]) -> list[str]:
    """Why two runs' specs are not the same sweep (different name, prompts or workload): a
    comparison of them would call a different workload a regression."""
    out = []
    if spec_a.get("name") != spec_b.get("name"):
        out.append(f"sweep {spec_a.get('name')!r} vs {spec_b.get('name')!r}")
    work_a, work_b = spec_a.get("workload") or {}, spec_b.get("workload") or {}
    for key in SAME_SWEEP_KEYS:
        if work_a.get(key) != work_b.get(key):
            out.append("other prompts" if key == "prompts" else f"workload.{key} differs")
    return out
