"""A synthetic nightly history, judged as `sweeper nightly` judges it: change points against the
pairwise `compare` at 5%.

Three configs over N nights, each night K restarts whose output tok/s scatter with the restart
noise this machine measured (`sweeps/search-noise.yaml`, docs/search.md: the quietest config,
b16 k2 bs4, a CV of 5.2% over its restarts; AR 10.3%):

- `step`: 3% slower from night 40 on (a runtime commit that costs 3%),
- `drift`: 0.3% slower each night from night 20 on,
- `flat`: nothing changes (its alarms are false alarms).

Every night has its own runtime commit. For each night t the detector reads the history up to
t (`changepoints.change_points`) and raises what last night's analysis did not hold
(`new_regressions`): the night an alarm is raised is what a person would see. The pairwise
compare is `sweeper compare`'s own function (`compare_runs`) on night t-1 against night t, each
night's restarts as rows, as the nightly reads two runs.

    python bench/history_synthetic.py [--nights 60] [--seeds 200] [--restarts 3]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweeper.analysis.changepoints import ChangePoint, change_points, new_regressions
from sweeper.analysis.compare import compare_runs
from sweeper.analysis.objective import Interval
from sweeper.results.history import history_frame, write_run

#: The restart noise measured here (docs/search.md, "Restart noise"): b16 k2 bs4's CV.
RESTART_CV = 0.052
BASE_TOK_S = 9.63
#: config -> (budget, topk): what compare matches the nights' points by.
CONFIGS = {"step": (16, 2), "drift": (16, 4), "flat": (4, 2)}
#: config -> the end of its series' label (`changepoints.series`).
LABELS = {name: f"b{b}-k{k}-bs8 t0-c1" for name, (b, k) in CONFIGS.items()}
SWEEP = "synthetic"


@dataclass(frozen=True)
class Plan:
    """What the history holds."""

    nights: int = 60
    restarts: int = 3
    step_night: int = 40
    step: float = -0.03
    drift_night: int = 20
    drift: float = -0.003


def commit(night: int) -> str:
    """Night `night`'s runtime commit: a stable sha-like name."""
    return hashlib.sha1(f"runtime-{night}".encode()).hexdigest()


def factor(config: str, night: int, plan: Plan) -> float:
    """The true speed of a config on a night, relative to night 0."""
    if config == "step":
        return 1.0 + (plan.step if night >= plan.step_night else 0.0)
    if config == "drift":
        return 1.0 + plan.drift * max(0, night - plan.drift_night + 1)
    return 1.0


def restart_rows(plan: Plan, seed: int) -> pd.DataFrame:
    """Every restart of every config on every night: what the nights' runs record."""
    rng = np.random.default_rng(seed)
    rows = []
    for night in range(plan.nights):
        for config, (budget, topk) in CONFIGS.items():
            level = BASE_TOK_S * factor(config, night, plan)
            for restart in range(plan.restarts):
                rows.append(
                    {
                        "night": night,
                        "config": config,
                        "restart": restart,
                        "budget": budget,
                        "topk": topk,
                        "output_tok_s": level * (1 + RESTART_CV * rng.standard_normal()),
                    }
                )
    return pd.DataFrame(rows)


def night_rows(restarts: pd.DataFrame, night: int) -> list[dict[str, object]]:
    """Night `night`'s history rows: per config the mean over its restarts and their 95%
    interval (`objective.Interval`, as `sweeper compare` draws it), with the night's commit."""
    rows = []
    for config, group in restarts[restarts["night"] == night].groupby("config", sort=True):
        spread = Interval.of(list(group["output_tok_s"]))
        budget, topk = CONFIGS[str(config)]
        rows.append(
            {
                "point_id": f"n{night:02d}-{config}",
                "host": "local",
                "server_config_id": f"s-{config}",
                "server_label": f"b{budget}-k{topk}-bs8",
                "request_config_id": "t0-c1",
                "runtime_commit": commit(night),
                "run_time": f"2026-10-{1 + night // 24:02d}T{night % 24:02d}:00:00Z",
                "status": "ok",
                "determinism": "exact",
                "host_busy": False,
                "output_tok_s": spread.mean,
                "output_tok_s_low": spread.low,
                "output_tok_s_high": spread.high,
                "noise_source": "restarts",
                "restarts": len(group),
            }
        )
    return rows


def write_history(url: str, restarts: pd.DataFrame) -> pd.DataFrame:
    """Every night written to the history database at `url` as a nightly writes its run
    (`history.write_run`), then read back whole (`history_frame`)."""
    for night in range(int(restarts["night"].max()) + 1):
        write_run(url, SWEEP, f"night-{night:02d}", night_rows(restarts, night))
    return history_frame(url)


def nightly_alarms(frame: pd.DataFrame, first: int = 6) -> Iterator[tuple[int, ChangePoint]]:
    """(night, alarm) as each night's nightly raises it."""
    before: list[ChangePoint] = []
    runs = list(dict.fromkeys(frame["run_id"]))  # history_frame: in run time order
    for night in range(first, len(runs) + 1):
        now = change_points(frame[frame["run_id"].isin(runs[:night])])
        for alarm in new_regressions(before, now, runs):
            yield night - 1, alarm
        before = now


def _points(restarts: pd.DataFrame, night: int) -> pd.DataFrame:
    rows = restarts[restarts["night"] == night]
    return pd.DataFrame(
        {
            "point_id": [
                f"n{night}-{c}-{r}" for c, r in zip(rows["config"], rows["restart"], strict=True)
            ],
            "host": "local",
            "engine": "ddtree",
            "budget": rows["budget"].to_numpy(),
            "topk": rows["topk"].to_numpy(),
            "restart": rows["restart"].to_numpy(),
            "output_tok_s": rows["output_tok_s"].to_numpy(),
            "status": "ok",
            "determinism": "exact",
        }
    )


def pairwise_regressions(restarts: pd.DataFrame, threshold: float = 0.05) -> list[tuple[int, str]]:
    """(night, config) where `compare` at `threshold` flags night t against night t-1."""
    labels = {v: k for k, v in CONFIGS.items()}
    found = []
    for night in range(1, int(restarts["night"].max()) + 1):
        comparison = compare_runs(
            _points(restarts, night - 1), _points(restarts, night), threshold=threshold
        )
        for row in comparison.regressions:
            found.append((night, labels[(int(row.key[2]), int(row.key[3]))]))
    return found


@dataclass
class Judged:
    """One history's figures."""

    #: The step config's regressions in the final analysis, and the nights they start.
    steps: list[ChangePoint]
    step_nights: list[int]
    #: The first nightly alarm on the drift config at or after the drift's start.
    drift_alarm: int | None
    #: Nightly alarms where nothing had changed: the flat config's, and the others' before
    #: their change began.
    false_alarms: list[tuple[int, str]]
    #: Change points of the flat config in the final analysis.
    flat_final: list[ChangePoint]
    #: (night, config) flagged by compare at 5%, night against the night before.
    pairwise: list[tuple[int, str]]


def _config(change: ChangePoint) -> str:
    return next(name for name, label in LABELS.items() if change.config.endswith(label))


def judge(plan: Plan, seed: int, url: str) -> Judged:
    """One history, written, read back and judged."""
    restarts = restart_rows(plan, seed)
    frame = write_history(url, restarts)
    final = change_points(frame)
    steps = [c for c in final if _config(c) == "step" and c.kind == "step" and c.regression]
    alarms = [(night, _config(a)) for night, a in nightly_alarms(frame)]
    began = {"step": plan.step_night, "drift": plan.drift_night, "flat": plan.nights}
    drift = [n for n, c in alarms if c == "drift" and n >= plan.drift_night]
    return Judged(
        steps=steps,
        step_nights=[int(c.after_run.split("-")[1]) for c in steps],
        drift_alarm=min(drift) if drift else None,
        false_alarms=[(n, c) for n, c in alarms if n < began[c]],
        flat_final=[c for c in final if _config(c) == "flat"],
        pairwise=pairwise_regressions(restarts),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--scratch", default=None, help="Where the histories go (tmpfs: faster).")
    args = parser.parse_args()
    plan = Plan(nights=args.nights, restarts=args.restarts)
    noise = RESTART_CV / np.sqrt(plan.restarts)
    print(f"restart CV {RESTART_CV:.1%}, {plan.restarts} restarts: a night's noise {noise:.1%}")
    scratch = tempfile.mkdtemp(prefix="history-synthetic-", dir=args.scratch)
    began = {"step": plan.step_night, "drift": plan.drift_night, "flat": plan.nights}
    hit = within = false = flat_final = pair_step = pair_drift = pair_false = 0
    delays = []
    for seed in range(args.seeds):
        got = judge(plan, seed, f"{scratch}/seed-{seed}.sqlite3")
        if seed == 0:
            for change in got.steps:
                print(f"  seed 0 step: {change.describe()}")
        print(
            f"  seed {seed}: step at {got.step_nights}, drift flagged {got.drift_alarm}, "
            f"false alarms {got.false_alarms}, compare at 5% {got.pairwise}",
            flush=True,
        )
        hit += any(abs(n - plan.step_night) <= 1 for n in got.step_nights)
        if got.drift_alarm is not None:
            delays.append(got.drift_alarm - plan.drift_night)
            within += delays[-1] <= 15
        false += len(got.false_alarms)
        flat_final += len(got.flat_final)
        pair_step += (plan.step_night, "step") in got.pairwise
        pair_drift += any(c == "drift" and n >= plan.drift_night for n, c in got.pairwise)
        pair_false += sum(n < began[c] for n, c in got.pairwise)
    n = args.seeds
    median = statistics.median(delays) if delays else None
    nights = 3 * plan.nights * n
    print(f"over {n} seeds:")
    print(f"  step found at night {plan.step_night} +/- 1: {hit}/{n}")
    print(f"  drift flagged within 15 nights of its start: {within}/{n} (median {median} nights)")
    each = f"{false / n:.2f} per {plan.nights} nights"
    print(f"  false nightly alarms: {false} in {n} histories ({each})")
    print(f"  flat config's change points in the final analyses: {flat_final} in {n}")
    print(
        f"  compare at 5%: the step on its night {pair_step}/{n}, the drift ever {pair_drift}/{n}"
    )
    print(f"  compare at 5% false flags: {pair_false} in {nights} config-nights")


if __name__ == "__main__":
    main()
