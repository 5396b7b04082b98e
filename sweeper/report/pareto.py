"""Pareto fronts over a run's points: per-user speed against total throughput (the
"interactivity vs throughput" trade-off across concurrency and rate), and the best speedup at
each load.

Pure: a points table in, tables out. Restarts of one server config are averaged first (one
point per config and load). Only feasible points can be on a front: a speculative config not
proven right at every point (a violation, unproven, a damaged verdict: `proof.verdicts.proven`)
is infeasible at every load (`sweeper.analysis.objective`), as are failed and client-bound
points. A speedup that is no result (busy, either side of the ratio, or impossible:
above the point's tau, `objective.withheld_speedup`) is never the best at its load.
"""

from __future__ import annotations

import pandas as pd

from sweeper.analysis.objective import withheld_speedup
from sweeper.config.labels import load_label, point_label
from sweeper.proof.verdicts import proven

#: Per-user speed: one request's tokens per second after its first (1 / its mean ITL).
USER_TOK_S = "user_tok_s"


def feasible_points(points: pd.DataFrame) -> pd.DataFrame:
    """One row per (server config, load), restarts averaged, with `label`, `load`,
    `user_tok_s`, `feasible` (False for every load of a config not proven right) and
    `speedup_withheld` (a restart's speedup there is no result: busy or impossible) and `best`
    (the answer's winner there: `build_view` marks the summary table's stars)."""
    if points.empty:
        return points.assign(
            label=[], load=[], feasible=[], speedup_withheld=[], best=[], **{USER_TOK_S: []}
        )
    frame = points.copy()
    frame["label"] = [point_label(r) for r in frame.to_dict("records")]
    frame["load"] = [load_label(r) for r in frame.to_dict("records")]
    itl = frame["request_itl_p50"] if "request_itl_p50" in frame else pd.Series(float("nan"))
    frame[USER_TOK_S] = 1.0 / itl.where(itl > 0)
    checked = (frame["mode"] != "ar") & (frame["status"] == "ok")
    unproven = checked & ~pd.Series([proven(v) for v in frame["determinism"]], index=frame.index)
    wrong = unproven.groupby(frame["label"]).transform("any")
    bound = frame["client_bound"].fillna(False).astype(bool) if "client_bound" in frame else False
    frame["feasible"] = ~wrong & (frame["status"] == "ok") & ~bound
    frame["speedup_withheld"] = [bool(withheld_speedup(r)) for r in frame.to_dict("records")]
    numeric = ["output_tok_s", USER_TOK_S, "speedup", "e2e_speedup"]
    numeric = [c for c in numeric if c in frame]
    keys = ["label", "load", "mode", "temperature"]
    order = ["concurrency", "rate"]
    sort = [c for c in order if c in frame]
    grouped = frame.groupby(keys, sort=False, dropna=False)
    out = grouped[numeric].mean()
    out["feasible"] = grouped["feasible"].all()
    out["speedup_withheld"] = grouped["speedup_withheld"].any()
    out["best"] = grouped["best"].any() if "best" in frame else False
    for column in sort:
        out[column] = grouped[column].first()
    return out.reset_index()


def pareto_front(frame: pd.DataFrame, x: str, y: str) -> pd.Series:
    """Whether each row is on the front maximizing both `x` and `y` among feasible rows."""
    on = pd.Series(False, index=frame.index)
    ok = frame[frame["feasible"] & frame[x].notna() & frame[y].notna()]
    for index, row in ok.iterrows():
        dominated = (ok[x] >= row[x]) & (ok[y] >= row[y]) & ((ok[x] > row[x]) | (ok[y] > row[y]))
        on[index] = not dominated.any()
    return on
