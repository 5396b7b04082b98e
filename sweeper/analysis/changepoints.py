"""Change points over a config's history: steps, drifts and verdict changes, each named with
the runs and the commits between which it happened.

Input is the history (`sweeper.results.history.history_frame`: one row per run x point); a
config's series is its rows with one identity (`series`: the history's `SERIES_COLUMNS`), in run
order. Per (config, metric) the detector sees only the nights that
count: a busy night (`host_busy`) or one not proven right (`proof.verdicts.standing` not
"proven"; the AR baseline's `n/a` counts) is left out, never averaged in.

- **Steps**: PELT with a least-squares cost (`ruptures`, a penalised piecewise-constant fit, as
  airspeed velocity's step detection), run on the series in units of the config's noise, so one
  penalty (`PENALTY_PER_LOG_N` x ln n, in noise units squared) holds the false-alarm rate for
  every config whatever its spread. The noise is a night's standard error: the larger of what
  its intervals say (`<metric>_low` / `_high`: over restarts, what `sweeper compare` calls
  restart noise, or twice the requests' standard error for a night of one restart) and the
  night-to-night scatter (a robust spread of successive differences), so a host whose nights
  move more than their restarts show raises no alarm for it.
- **Drifts**: a step detector cuts a slow drift into steps late or never; over the nights since
  the last step (at most `DRIFT_WINDOW`), a Theil-Sen slope (`scipy.stats.theilslopes`, robust
  to a single wild night) whose `DRIFT_CONFIDENCE` interval excludes zero and whose change over
  the window crosses the noise is a drift.
- **Verdicts**: the first run whose verdict is a violation after proven runs is a change point by
  itself (exact -> diverged), whatever the numbers do.

A step or drift is a regression when it goes the wrong way (every metric here is higher-better)
and crosses the noise: the step's size is beyond `NOISE_SIGMAS` standard errors of the
difference of its two segments' means; a verdict change always is.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sweeper.analysis.objective import t95
from sweeper.proof.verdicts import standing
from sweeper.results.history import SERIES_COLUMNS

#: Per-night metrics the detector watches; all higher-is-better.
METRICS = ("output_tok_s", "speedup", "tau")
#: PELT penalty per change, in noise units squared, times ln(n). Chosen on 200 simulated flat
#: 60-night series of unit noise: 2 ln n gave 0.075 false steps a series, 3 ln n 0.01, 4 ln n
#: 0.005; a two-sigma step at night 40 was placed within a night in 88% at each, a one-sigma
#: step in 46%, 42% and 31% (docs/reports.md has the bench's figures with this detector).
PENALTY_PER_LOG_N = 3.0
#: Fewest nights on either side of a step.
MIN_SEGMENT = 3
NOISE_SIGMAS = 2.0
DRIFT_WINDOW = 30
DRIFT_MIN_NIGHTS = 8
DRIFT_CONFIDENCE = 0.99
#: A step found again this many runs from where it was last night is the same step.
SAME_STEP_RUNS = 3


@dataclass(frozen=True)
class ChangePoint:
    """One change in a config's series, between two runs."""

    config: str
    metric: str  # a METRICS name, or "verdict"
    kind: str  # "step" | "drift" | "verdict"
    #: The last run before the change and the first run that shows it.
    before_run: str
    after_run: str
    #: The runtime and engine commits of those two runs: the range a bisect walks.
    before_commit: str | None
    after_commit: str | None
    before_engine_commit: str | None
    after_engine_commit: str | None
    #: Relative change (a step: after mean / before mean - 1; a drift: slope x its nights).
    change: float
    #: The relative change the noise allows (`NOISE_SIGMAS` standard errors).
    noise: float
    regression: bool
    #: A drift's slope per night, relative; None for a step or a verdict change.
    slope: float | None = None
    #: A verdict change's verdicts, before -> after.
    verdicts: tuple[str, str] | None = None
    #: The first run's row of the config: its host, server label and request config (what
    #: `sweeper bisect --points` names a point by).
    identity: tuple[str, str, str] = ("", "", "")

    @property
    def commit_range(self) -> str:
        """`good..bad` of runtime commits, or what is unknown."""
        return f"{_short(self.before_commit)}..{_short(self.after_commit)}"

    def describe(self) -> str:
        """One line: what changed, where, by how much, between which runs and commits."""
        where = f"runs {self.before_run}..{self.after_run}, runtime {self.commit_range}"
        if self.before_engine_commit != self.after_engine_commit:
            where += (
                f", engine {_short(self.before_engine_commit)}..{_short(self.after_engine_commit)}"
            )
        if self.kind == "verdict":
            assert self.verdicts is not None
            what = f"verdict {self.verdicts[0]} -> {self.verdicts[1]}"
        elif self.kind == "drift":
            what = f"{self.metric} drift {self.slope or 0.0:+.2%}/night ({self.change:+.1%})"
        else:
            what = f"{self.metric} step {self.change:+.1%}"
        verdict = "regression" if self.regression else "within noise or better"
        return f"{self.config}: {what} (noise {self.noise:.1%}, {verdict}); {where}"


def _short(commit: str | None) -> str:
    return commit[:10] if isinstance(commit, str) and commit else "unknown"


def counted(frame: pd.DataFrame) -> pd.Series:
    """Which rows the detector sees: neither busy nor unproven (proven right, or the AR
    baseline's `n/a`: the reference itself, compared with nothing)."""
    busy = frame["host_busy"].astype("boolean").fillna(False).astype(bool)
    right = frame["determinism"].map(lambda v: v == "n/a" or standing(v) == "proven")
    return ~busy & right


def series(frame: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """Each series of a history (`SERIES_COLUMNS`: one config at one load on one host, per
    dataset), oldest run first, with its label: `host server-label request-config [dataset]`
    (the server config's id where a run recorded no label)."""
    ordered = frame.sort_values(["run_time", "run_id"], kind="stable")
    for _, rows in ordered.groupby(list(SERIES_COLUMNS), dropna=False, sort=True):
        first = rows.iloc[0]
        label = first["server_label"] if isinstance(first["server_label"], str) else None
        name = f"{first['host']} {label or first['server_config_id']} {first['request_config_id']}"
        dataset = first["dataset"]
        yield (
            (name + (f" [{dataset}]" if isinstance(dataset, str) else "")),
            rows.reset_index(drop=True),
        )


def night_noise(values: np.ndarray, half: np.ndarray | None) -> float:
    """A night's relative standard error: the larger of what its intervals say (`half`: each
    night's standard error, `_standard_errors`) and the robust night-to-night scatter (1.4826 x
    the median absolute successive difference / sqrt 2, which one step barely moves)."""
    level = float(np.median(values))
    scatter = 0.0
    if len(values) >= 3:
        scatter = 1.4826 * float(np.median(np.abs(np.diff(values)))) / math.sqrt(2) / level
    intervals = 0.0
    if half is not None:
        half = half[np.isfinite(half)]
        if half.size:
            intervals = float(np.median(half)) / level
    return max(scatter, intervals)


def _standard_errors(rows: pd.DataFrame, metric: str) -> np.ndarray | None:
    """Each night's standard error from its interval: a restarts interval is t95(k - 1)
    standard errors wide each way (`objective.Interval`), a requests one two (compare's)."""
    low, high = f"{metric}_low", f"{metric}_high"
    if low not in rows or high not in rows:
        return None
    half = (rows[high].to_numpy(dtype=float) - rows[low].to_numpy(dtype=float)) / 2
    restarts = pd.to_numeric(rows.get("restarts"), errors="coerce")
    source = rows.get("noise_source")
    widths = [
        t95(int(k) - 1) if src == "restarts" and k >= 2 else 2.0 if src == "requests" else np.nan
        for k, src in zip(
            restarts if restarts is not None else [np.nan] * len(rows),
            source if source is not None else [None] * len(rows),
            strict=True,
        )
    ]
    return half / np.array(widths, dtype=float)


def change_points(frame: pd.DataFrame) -> list[ChangePoint]:
    """Every change point of every (config, metric) series of a history."""
    found: list[ChangePoint] = []
    for config, rows in series(frame):
        found.extend(_verdict_changes(config, rows))
        kept = rows[counted(rows).to_numpy()].reset_index(drop=True)
        for metric in METRICS:
            if metric not in kept:
                continue
            measured = kept[pd.to_numeric(kept[metric], errors="coerce").notna()]
            found.extend(_metric_changes(config, metric, measured.reset_index(drop=True)))
    return found


def _metric_changes(config: str, metric: str, rows: pd.DataFrame) -> list[ChangePoint]:
    values = rows[metric].to_numpy(dtype=float)
    if len(values) < 2 * MIN_SEGMENT or float(np.median(values)) <= 0:
        return []
    sigma = night_noise(values, _standard_errors(rows, metric))
    if sigma <= 0:
        return []
    level = float(np.median(values))
    found = []
    breaks = _steps((values / level - 1.0) / sigma)
    edges = [0, *breaks, len(values)]
    for i, at in enumerate(breaks):
        before, after = values[edges[i] : at], values[at : edges[i + 2]]
        change = float(after.mean() / before.mean() - 1.0)
        noise = NOISE_SIGMAS * sigma * math.sqrt(1 / len(before) + 1 / len(after))
        if abs(change) > noise:  # a boundary inside the noise (left by a merge) is no step
            found.append(_named(config, metric, "step", rows, at, change, noise))
    start = breaks[-1] if breaks else 0
    drift = _drift(values[start:][-DRIFT_WINDOW:] / level, sigma)
    if drift is not None:
        slope, change, noise = drift
        at = len(values) - min(len(values) - start, DRIFT_WINDOW)
        found.append(_named(config, metric, "drift", rows, at, change, noise, slope))
    return found


def _steps(signal: np.ndarray) -> list[int]:
    """Indexes where a new segment starts: PELT (least squares, unit-noise penalty) placing each
    change at its own night, then every segment of fewer than `MIN_SEGMENT` nights merged into
    its neighbour of nearer mean (the last one into the one before): a lone wild night is no
    step, and a step is named only once it has held `MIN_SEGMENT` nights, yet at the night it
    began (PELT held to segments of 3 would place a fresh step up to 2 nights early)."""
    import ruptures  # imported here: only history and the nightly need it

    pen = PENALTY_PER_LOG_N * math.log(len(signal))
    algo = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(signal)
    edges = [0, *(int(b) for b in algo.predict(pen=pen))]
    while len(edges) > 2:
        sizes = np.diff(edges)
        short = int(np.argmin(sizes))
        if sizes[short] >= MIN_SEGMENT:
            break
        mean = [float(signal[a:b].mean()) for a, b in zip(edges, edges[1:], strict=False)]
        if short == 0:
            drop = 1  # the first segment joins the next
        elif short == len(sizes) - 1:
            drop = short  # the last joins the one before
        else:
            nearer_before = abs(mean[short] - mean[short - 1]) <= abs(mean[short] - mean[short + 1])
            drop = short if nearer_before else short + 1
        del edges[drop]
    return edges[1:-1]


def _drift(rel: np.ndarray, sigma: float) -> tuple[float, float, float] | None:
    """(slope per night, change over the window, noise) of a significant drift, or None."""
    if len(rel) < DRIFT_MIN_NIGHTS:
        return None
    from scipy.stats import theilslopes  # ruptures' own dependency

    slope, _, low, high = theilslopes(rel, np.arange(len(rel)), alpha=DRIFT_CONFIDENCE)
    change = float(slope) * (len(rel) - 1)
    noise = NOISE_SIGMAS * sigma
    if (low > 0 or high < 0) and abs(change) > noise:
        return float(slope), change, noise
    return None


def _named(
    config: str,
    metric: str,
    kind: str,
    rows: pd.DataFrame,
    at: int,
    change: float,
    noise: float,
    slope: float | None = None,
) -> ChangePoint:
    """The change between rows[at - 1] and rows[at] (a drift: from its window's first night)."""
    before, after = rows.iloc[max(at - 1, 0)], rows.iloc[at]
    return ChangePoint(
        config=config,
        metric=metric,
        kind=kind,
        before_run=str(before["run_id"]),
        after_run=str(after["run_id"]) if kind != "drift" else str(rows.iloc[-1]["run_id"]),
        before_commit=_text(before.get("runtime_commit")),
        after_commit=_text((after if kind != "drift" else rows.iloc[-1]).get("runtime_commit")),
        before_engine_commit=_text(before.get("engine_commit")),
        after_engine_commit=_text(
            (after if kind != "drift" else rows.iloc[-1]).get("engine_commit")
        ),
        change=change,
        noise=noise,
        regression=change < 0 and abs(change) > noise,
        slope=slope,
        identity=_identity(after),
    )


def _verdict_changes(config: str, rows: pd.DataFrame) -> list[ChangePoint]:
    """The first violation after a proven run, once per stretch of violations."""
    found = []
    last_proven: Any = None
    for _, row in rows.iterrows():
        now = standing(row["determinism"])
        if now == "proven":
            last_proven = row
        elif now == "violation" and last_proven is not None:
            found.append(
                ChangePoint(
                    config=config,
                    metric="verdict",
                    kind="verdict",
                    before_run=str(last_proven["run_id"]),
                    after_run=str(row["run_id"]),
                    before_commit=_text(last_proven.get("runtime_commit")),
                    after_commit=_text(row.get("runtime_commit")),
                    before_engine_commit=_text(last_proven.get("engine_commit")),
                    after_engine_commit=_text(row.get("engine_commit")),
                    change=0.0,
                    noise=0.0,
                    regression=True,
                    verdicts=(str(last_proven["determinism"]), str(row["determinism"])),
                    identity=_identity(row),
                )
            )
            last_proven = None
    return found


def _identity(row: pd.Series) -> tuple[str, str, str]:
    return (str(row["host"]), str(row["server_label"]), str(row["request_config_id"]))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def new_regressions(
    before: list[ChangePoint], now: list[ChangePoint], runs: list[str]
) -> list[ChangePoint]:
    """The regressions of tonight's analysis that last night's did not hold: the nightly's
    alarms, once each. `runs`: every run id, oldest first. A step found again within
    `SAME_STEP_RUNS` runs of where it was (one more night moves its estimate) is the same step;
    a drift of a config and metric stays one alarm while it lasts; a verdict change is its run."""
    order = {run: i for i, run in enumerate(runs)}

    def same(old: ChangePoint, new: ChangePoint) -> bool:
        if (old.config, old.metric, old.kind) != (new.config, new.metric, new.kind):
            return False
        if new.kind == "drift":
            return True
        far = abs(order.get(old.after_run, -99) - order.get(new.after_run, 99))
        return far <= (SAME_STEP_RUNS if new.kind == "step" else 0)

    return [c for c in now if c.regression and not any(same(old, c) for old in before)]


def tonight(history: pd.DataFrame, sweep: str, run_id: str) -> list[ChangePoint]:
    """The alarms a sweep's run raises in its history: the regressions its analysis finds that
    the history without it did not (`new_regressions`); none for a run not in the history."""
    frame = history[history["sweep"] == sweep]
    runs = list(dict.fromkeys(frame.sort_values(["run_time", "run_id"])["run_id"]))
    if run_id not in runs:
        return []
    before = change_points(frame[frame["run_id"] != run_id])
    return new_regressions(before, change_points(frame), runs)


@dataclass(frozen=True)
class Band:
    """Where a run's number stands against its config's history before it."""

    config: str
    metric: str
    value: float | None
    #: The history's band: its mean +/- `NOISE_SIGMAS` nights' noise, over `nights` nights
    #: (the counted nights since the last step, at most `DRIFT_WINDOW`); None without history.
    low: float | None
    high: float | None
    nights: int
    where: str  # "inside" | "below" | "above" | "no history" | "busy" | "not proven"


def bands(history: pd.DataFrame, sweep: str, run_id: str) -> list[Band]:
    """For each series holding run `run_id` of `sweep`, per metric it measured: whether that
    night is inside the band of the nights before it (what the run's report says)."""
    out = []
    for config, rows in series(history[history["sweep"] == sweep]):
        here = rows.index[rows["run_id"] == run_id]
        if len(here) == 0:
            continue
        night, before = rows.loc[here[0]], rows.loc[: here[0] - 1]
        before = before[counted(before).to_numpy()]
        state = "busy" if night["host_busy"] is True else None
        if state is None and not counted(rows.loc[[here[0]]]).iloc[0]:
            state = "not proven"
        for metric in METRICS:
            value = pd.to_numeric(pd.Series([night[metric]]), errors="coerce").iloc[0]
            if pd.isna(value):
                continue
            measured = before[pd.to_numeric(before[metric], errors="coerce").notna()]
            past = measured[metric].to_numpy(dtype=float)
            if len(past) < MIN_SEGMENT or float(np.median(past)) <= 0:
                where = state or "no history"
                out.append(Band(config, metric, float(value), None, None, len(past), where))
                continue
            level = float(np.median(past))
            sigma = night_noise(past, _standard_errors(measured, metric))
            if len(past) >= 2 * MIN_SEGMENT and sigma > 0:
                past = past[([0, *_steps((past / level - 1.0) / sigma)])[-1] :]
            past = past[-DRIFT_WINDOW:]
            half = NOISE_SIGMAS * sigma * level
            low, high = float(past.mean()) - half, float(past.mean()) + half
            where = state or ("below" if value < low else "above" if value > high else "inside")
            out.append(Band(config, metric, float(value), low, high, len(past), where))
    return out
