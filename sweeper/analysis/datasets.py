"""Per-dataset numbers: each point split by the `dataset` of its requests, and the papers' table.

Speculative-decoding papers report per dataset, because acceptance (and so speedup) depends on
the text far more than on any knob. A *dataset point* is one (point, dataset): the point's config
columns, `dataset`, and numbers over that dataset's requests only:

- `output_tok_s`: output tokens over the requests' summed end-to-end time (a per-request decode
  rate: a point's throughput is over its whole window, which the datasets share);
- `tau`: output tokens per verify round (requests' `verify_rounds`), else their mean `tau`;
- `speedup`: its `output_tok_s` over the AR dataset point's at the same host, temperature, load
  and dataset (the same prompts, one server config apart);
- `accepted_hist`: the requests' accepted-length histograms added up;
- `determinism`: the worst verdict of its requests; `status`: failed when any request failed.

`dataset_table` lays them out as the papers do: one row per (config, dataset), per temperature
the speedup, tau and acceptance histogram, and where some speedup is no result (measured on a busy
host, or impossible: above its own tau, `sweeper.analysis.impossible`) which (`withheld`). Pure:
frames in, frames out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sweeper.analysis.impossible import mark_impossible
from sweeper.analysis.objective import withheld_kind, withheld_speedup
from sweeper.config.labels import point_label
from sweeper.config.request import REQUEST_COLUMNS
from sweeper.proof.verdicts import worst_by_group
from sweeper.results.records import CONFIG_COLUMNS, extra_config_columns

#: The request columns the split reads.
DATASET_REQUEST_COLUMNS = [
    "point_id",
    "prompt_id",
    "dataset",
    "output_tokens",
    "e2e",
    "ttft",
    "tau",
    "verify_rounds",
    "verdict",
    "error",
    "accepted_hist",
]
#: What a dataset point is matched on besides its point's config (compare, the AR reference).
LOAD_KEYS = ("host", *REQUEST_COLUMNS)
#: Which restart of which server config a dataset point is (its restarts share the label).
RESTART_KEYS = ("server_label", "restart")
#: The host's load while its point ran: a speedup measured on a busy host (either side) is no
#: result per dataset either (`objective.withheld_speedup`).
HOST_LOAD_KEYS = ("host_busy", "host_busy_reason", "baseline_busy")


def has_datasets(requests: pd.DataFrame | None) -> bool:
    """Whether the requests carry a `dataset` (a run whose workload named datasets)."""
    return requests is not None and "dataset" in requests and requests["dataset"].notna().any()


def dataset_requests(requests: pd.DataFrame) -> pd.DataFrame:
    """The requests with `point_id` naming their dataset point (`<point id>/<dataset>`)."""
    out = requests.copy()
    dataset = out["dataset"].astype(object).where(out["dataset"].notna(), "-")
    out["point_id"] = out["point_id"].astype(str) + "/" + dataset.astype(str)
    return out


def dataset_points(points: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """One row per (point, dataset) (see the module docstring)."""
    if points.empty or not has_datasets(requests):
        return pd.DataFrame(columns=[*points.columns, "dataset"])
    req = requests.copy()
    req["dataset"] = req["dataset"].astype(object).where(req["dataset"].notna(), "-")
    req["point_id"] = req["point_id"].astype(str)
    kept = (*CONFIG_COLUMNS, *LOAD_KEYS, *RESTART_KEYS, *HOST_LOAD_KEYS)
    config = [c for c in points.columns if c in kept]
    config += [c for c in extra_config_columns(points.columns) if c not in config]
    by_point = points.assign(point_id=points["point_id"].astype(str)).set_index("point_id")
    worst = worst_by_group(req["verdict"].astype(object), [req["point_id"], req["dataset"]])
    rows = []
    for (pid, dataset), group in req.groupby(["point_id", "dataset"], sort=False):
        if pid not in by_point.index:
            continue
        point = by_point.loc[pid]
        row: dict[str, Any] = {c: point.get(c) for c in config}
        row.update(
            point_id=f"{pid}/{dataset}",
            dataset=dataset,
            **_numbers(group),
            determinism=str(worst.get((pid, dataset), "n/a")),
        )
        failed = group["error"].notna().any() if "error" in group else False
        row["status"] = "failed" if failed or point.get("status") == "failed" else "ok"
        rows.append(row)
    frame = pd.DataFrame(rows)
    frame["speedup"] = _speedups(frame)
    return frame


def _numbers(group: pd.DataFrame) -> dict[str, Any]:
    tokens = float(group["output_tokens"].sum())
    e2e = float(group["e2e"].sum()) if "e2e" in group else 0.0
    rounds = group["verify_rounds"] if "verify_rounds" in group else pd.Series(dtype=float)
    tau = None
    if rounds.notna().any() and float(rounds.sum()) > 0:
        known = rounds.notna()
        tau = float(group.loc[known, "output_tokens"].sum() / rounds[known].sum())
    elif "tau" in group and group["tau"].notna().any():
        tau = float(group["tau"].mean())
    hist: list[int] = []
    for value in group.get("accepted_hist", []):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        counts = [int(v) for v in value]
        width = max(len(hist), len(counts))
        hist = [a + b for a, b in zip(_pad(hist, width), _pad(counts, width), strict=True)]
    ttft = group["ttft"].dropna() if "ttft" in group else pd.Series(dtype=float)
    return {
        "n_requests": len(group),
        "output_tokens": int(tokens),
        "output_tok_s": tokens / e2e if e2e > 0 else None,
        "tau": tau,
        "ttft_p50": float(ttft.median()) if len(ttft) else None,
        "accepted_hist": hist or None,
    }


def _pad(values: list[int], n: int) -> list[int]:
    return values + [0] * (n - len(values))


def _speedups(frame: pd.DataFrame) -> list[float | None]:
    """Each speculative dataset point's rate over the AR's on the same prompts and load: the
    mean of the AR restarts' rates where the baseline was restarted too."""
    keys = [k for k in (*LOAD_KEYS, "dataset") if k in frame]
    rates: dict[tuple[str, ...], list[float]] = {}
    if "mode" in frame:
        for _, row in frame[frame["mode"] == "ar"].iterrows():
            if row["output_tok_s"] and row["status"] == "ok":
                rates.setdefault(_key(row, keys), []).append(float(row["output_tok_s"]))
    reference = {key: sum(values) / len(values) for key, values in rates.items()}
    out: list[float | None] = []
    for _, row in frame.iterrows():
        ar = reference.get(_key(row, keys))
        rate = row["output_tok_s"]
        ok = bool(rate) and row.get("mode") != "ar" and row["status"] == "ok"
        out.append(float(rate) / ar if ar and ok else None)
    return out


def _key(row: pd.Series, keys: list[str]) -> tuple[str, ...]:
    return tuple("-" if pd.isna(row[k]) else f"{row[k]}" for k in keys)


def histogram_text(hist: Any) -> str:
    """`0:31% 1:22% ...`: the share of verify rounds that accepted that many drafted tokens."""
    if hist is None or (isinstance(hist, float) and np.isnan(hist)):
        return ""
    counts = [int(v) for v in hist]
    total = sum(counts)
    if not total:
        return ""
    return " ".join(f"{a}:{c / total:.0%}" for a, c in enumerate(counts) if c)


def dataset_table(dpoints: pd.DataFrame) -> pd.DataFrame:
    """The papers' table: rows (host, config, load, dataset) of the speculative dataset points,
    per temperature `speedup`, `tau` and `acceptance` (histogram text), and `withheld`
    (`impossible`, `busy` or "") when some speedup is no result."""
    if dpoints.empty or "mode" not in dpoints:
        return pd.DataFrame()
    spec = dpoints[dpoints["mode"] != "ar"].copy()
    if spec.empty:
        return pd.DataFrame()
    spec["config"] = [point_label(r) for r in spec.to_dict("records")]
    spec["load"] = [
        f"c={int(c)}" if pd.notna(c) else f"rate={r:g}"
        for c, r in zip(
            spec.get("concurrency", pd.Series(None, index=spec.index)),
            spec.get("rate", pd.Series(None, index=spec.index)),
            strict=True,
        )
    ]
    spec["acceptance"] = [histogram_text(h) for h in spec["accepted_hist"]]
    marked = mark_impossible(spec.to_dict("records"))  # per dataset point, over its restarts
    spec["withheld"] = [withheld_kind(withheld_speedup(r)) for r in marked]
    order = [
        "speedup",
        "tau",
        "acceptance",
        *(["withheld"] if (spec["withheld"] != "").any() else []),
    ]
    rows = [k for k in ("host", "config", "load", "dataset") if k in spec]
    if "host" in rows and spec["host"].nunique() == 1:
        rows.remove("host")
    if spec["load"].nunique() == 1:
        rows.remove("load")
    table = spec.pivot_table(
        index=rows,
        columns="temperature",
        values=order,
        aggfunc="first",
        dropna=False,
        sort=False,
    )
    table = table.swaplevel(0, 1, axis=1).sort_index(axis=1, level=0, sort_remaining=False)
    temperatures = sorted({t for t, _ in table.columns})
    return table.reindex(columns=[(t, m) for t in temperatures for m in order])
