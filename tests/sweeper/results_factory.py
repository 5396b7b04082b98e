"""Synthetic run directories with docs/results.md's columns, for fast tests and the benchmark.

A factory run looks like what `sweeper run` writes (manifest.json, requests.parquet,
points.parquet + points.csv, logs/<point_id>.log) and is internally consistent: point metrics
are computed from the request rows. Point ids are deliberately run-specific (shuffled per run
seed) so that anything matching points across runs must use point identity, not ids.
Everything is vectorised so a million request rows take seconds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

# Keys for planted effects: (budget, topk, temperature, cuda_graph)
Knobs = tuple[int, int, float, bool]

BASE_TEXTS = [
    "Roses bloom in quiet rows,\nthe river hums where nobody goes.",
    "def quicksort(xs):\n    if len(xs) <= 1:\n        return xs\n    p = xs[0]\n",
    "The capital of France is Paris, a city on the Seine.",
    "Photosynthesis turns light, water & carbon dioxide into sugar.",
]


@dataclass
class RunShape:
    """What to build; defaults give a small sweep like sweeps/local.yaml."""

    sweep: str = "local"
    run_id: str = "20261129T020000Z-aaaa"
    hosts: Sequence[str] = ("local",)
    budgets: Sequence[int] = (8, 16)
    topks: Sequence[int] = (1, 4)
    temperatures: Sequence[float] = (0.0, 0.7)
    cuda_graphs: Sequence[bool] = (False, True)
    concurrency: Sequence[int] = (1,)
    block_size: int = 8
    max_tokens: int = 24
    n_prompts: int = 4
    repeats: int = 2
    seed: int = 0
    noise: float = 0.02  # relative per-request spread of latency
    slow: dict[Knobs, float] = field(default_factory=dict)  # knobs -> throughput factor (<1 slower)
    diverge: dict[Knobs, str] = field(default_factory=dict)  # knobs -> verdict for prompt 0
    fail: dict[Knobs, str] = field(default_factory=dict)  # knobs -> failure reason
    texts: dict[int, str] = field(default_factory=dict)  # prompt index -> divergent output text
    status: str = "complete"
    write_requests: bool = True
    write_points: bool = True
    text_chars: int | None = None  # None: realistic texts; an int: short fixed-length texts
    #: Write the columns of runs made before the `mode` column (`engine` was ar|ddtree).
    legacy: bool = False
    #: Each request's `dataset`: prompt i's is datasets[i % len] (none: no dataset column).
    datasets: Sequence[str] = ()
    #: Spec keys added to the manifest's resolved spec (a `reference`, say).
    spec: dict[str, Any] = field(default_factory=dict)


def _point_table(shape: RunShape) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for host in shape.hosts:
        for temp in shape.temperatures:
            for conc in shape.concurrency:
                rows.append(_row(host, "ar", 0, 0, False, temp, conc, shape))
        for budget in shape.budgets:
            for topk in shape.topks:
                if topk > budget:
                    continue
                for cg in shape.cuda_graphs:
                    for temp in shape.temperatures:
                        for conc in shape.concurrency:
                            rows.append(_row(host, "ddtree", budget, topk, cg, temp, conc, shape))
    points = pd.DataFrame(rows)
    order = np.random.default_rng(shape.seed + 7).permutation(len(points))
    points["point_id"] = [f"{shape.run_id[-4:]}-p{i:04d}" for i in order]
    points["server_config_id"] = [
        f"{shape.run_id[-4:]}-s{abs(hash((h, b, k, c))) % 10**6:06d}"
        for h, b, k, c in zip(
            points.host, points.budget, points.topk, points.cuda_graph, strict=True
        )
    ]
    return points


def _row(
    host: str, engine: str, budget: int, topk: int, cg: bool, temp: float, conc: int, s: RunShape
) -> dict[str, Any]:
    knobs: Knobs = (budget, topk, temp, cg)
    if engine == "ar":
        tau = 1.0
        speed = 1.0
    else:
        tau = 1.0 + 0.9 * math.log2(budget) * (0.6 + 0.1 * topk) * (0.8 if temp > 0 else 1.0)
        speed = tau / (1.0 + 0.04 * budget) * (1.15 if cg else 1.0)
    speed *= s.slow.get(knobs, 1.0)
    return {
        "run_id": s.run_id,
        "host": host,
        "engine": engine,
        "budget": budget,
        "topk": topk,
        "block_size": s.block_size if engine == "ddtree" else 0,
        "cuda_graph": cg,
        "temperature": temp,
        "max_tokens": s.max_tokens,
        "concurrency": conc,
        "_speed": speed,
        "_tau": tau,
        "_fail": s.fail.get(knobs) if engine == "ddtree" else None,
        "_diverge": s.diverge.get(knobs) if engine == "ddtree" else None,
    }


def _requests(points: pd.DataFrame, shape: RunShape) -> tuple[pd.DataFrame, dict[str, pa.Array]]:
    rng = np.random.default_rng(shape.seed)
    live = points[points["_fail"].isna()].reset_index(drop=True)
    per_point = shape.n_prompts * shape.repeats
    n = len(live) * per_point
    pidx = np.repeat(np.arange(len(live)), per_point)
    prompt = np.tile(np.repeat(np.arange(shape.n_prompts), shape.repeats), len(live))
    repeat = np.tile(np.arange(shape.repeats), len(live) * shape.n_prompts)
    speed = live["_speed"].to_numpy()[pidx]
    base_itl = 0.025 * (1 + 0.15 * (prompt % 5)) / speed
    ttft = 0.08 * (1 + 0.1 * (prompt % 3)) * rng.lognormal(0, shape.noise, n)
    ntok = np.full(n, shape.max_tokens, dtype=np.int64)
    itl_vals = np.repeat(base_itl, ntok - 1) * rng.lognormal(0, shape.noise, int((ntok - 1).sum()))
    starts = np.concatenate([[0], np.cumsum(ntok - 1)[:-1]])
    e2e = ttft + np.add.reduceat(itl_vals, starts)
    tau = live["_tau"].to_numpy()[pidx] * rng.lognormal(0, shape.noise / 2, n)
    temps = live["temperature"].to_numpy()[pidx]
    diverge = live["_diverge"].to_numpy()[pidx]
    # The bundled runtime's sampling is coupled: sampled outputs are compared with AR at the
    # same seed, and proven exact like greedy ones.
    verdict = np.full(len(temps), "exact", dtype=object)
    planted = (prompt == 0) & pd.notna(diverge)
    verdict[planted] = diverge[planted]
    texts = _texts(shape, prompt, planted, n)
    tok_vals = rng.integers(0, 49152, int(ntok.sum()))
    tok_offsets = np.concatenate([[0], np.cumsum(ntok)]).astype(np.int32)
    itl_offsets = np.concatenate([[0], np.cumsum(ntok - 1)]).astype(np.int32)
    lists = {
        "itls": pa.ListArray.from_arrays(pa.array(itl_offsets), pa.array(itl_vals)),
        "token_ids": pa.ListArray.from_arrays(pa.array(tok_offsets), pa.array(tok_vals)),
    }
    frame = pd.DataFrame(
        {
            "run_id": shape.run_id,
            "host": live["host"].to_numpy()[pidx],
            "point_id": live["point_id"].to_numpy()[pidx],
            "prompt_id": np.char.add("prompt-", prompt.astype(str)),
            "repeat": repeat,
            # The point's server config, as every real request row carries it.
            **{c: live[c].to_numpy()[pidx] for c in ("engine", "budget", "topk", "block_size")},
            "cuda_graph": live["cuda_graph"].to_numpy()[pidx],
            "concurrency": live["concurrency"].to_numpy()[pidx],
            "temperature": temps,
            "seed": 1234,
            "ttft": ttft,
            "e2e": e2e,
            "output_tokens": ntok,
            "tau": tau,
            "verify_rounds": np.ceil(ntok / tau).astype(np.int64),
            "sha256": np.char.add("sha-", prompt.astype(str)),
            "text": texts,
            "finish_reason": "length",
            "error": None,
            "verdict": verdict,
            "divergence_index": np.where(planted, 5, -1),
            "_itl_mean": (e2e - ttft) / np.maximum(ntok - 1, 1),
        }
    )
    if shape.datasets:
        frame["dataset"] = np.array(shape.datasets, dtype=object)[prompt % len(shape.datasets)]
    return frame, lists


def _texts(shape: RunShape, prompt: np.ndarray, planted: np.ndarray, n: int) -> Any:
    if shape.text_chars is not None:
        return pa.array(np.full(n, "x" * shape.text_chars, dtype=object))
    base = np.array(BASE_TEXTS * (shape.n_prompts // len(BASE_TEXTS) + 1), dtype=object)
    texts = base[prompt].copy()
    for i in np.flatnonzero(planted):
        texts[i] = shape.texts.get(int(prompt[i]), texts[i][:20] + " ... garbled garbled zzzz")
    return texts


def _point_metrics(points: pd.DataFrame, req: pd.DataFrame) -> pd.DataFrame:
    g = req.groupby("point_id")
    agg = pd.DataFrame(
        {
            "output_tok_s": g["output_tokens"].sum() / g["e2e"].sum(),
            "request_s": g.size() / g["e2e"].sum(),
            "tau": g["tau"].mean(),
            "n_requests": g.size(),
            **{f"ttft_p{q}": g["ttft"].quantile(q / 100) for q in (50, 90, 99)},
            **{f"itl_p{q}": g["_itl_mean"].quantile(q / 100) for q in (50, 90, 99)},
            **{f"e2e_p{q}": g["e2e"].quantile(q / 100) for q in (50, 90, 99)},
        }
    )
    out = points.join(agg, on="point_id")
    ar = out[out.engine == "ar"].set_index(["host", "temperature", "concurrency"])["output_tok_s"]
    keys = pd.MultiIndex.from_frame(out[["host", "temperature", "concurrency"]])
    out["speedup"] = out["output_tok_s"].to_numpy() / ar.reindex(keys).to_numpy()
    out["status"] = np.where(out["_fail"].isna(), "ok", "failed")
    out["reason"] = out["_fail"].fillna("")
    out["determinism"] = np.full(len(out), "exact", dtype=object)
    planted = out["_diverge"].notna()
    out.loc[planted, "determinism"] = out.loc[planted, "_diverge"]
    out.loc[out.status == "failed", "determinism"] = "n/a"
    out["fingerprint"] = "f" * 64
    out["started_at"] = "2026-11-29T02:00:00Z"
    out["finished_at"] = "2026-11-29T02:01:00Z"
    out["log_path"] = "logs/" + out["point_id"] + ".log"
    out["log_tail"] = np.where(
        out.status == "failed", "Traceback (most recent call last):\n  RuntimeError: boom", ""
    )
    return out.drop(columns=[c for c in out.columns if c.startswith("_")])


def _current_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Today's columns: `engine` names the engine, `mode` says ar or speculative."""
    if "engine" not in frame:
        return frame
    return frame.assign(
        mode=np.where(frame["engine"] == "ar", "ar", "speculative"), engine="ddtree_runtime"
    )


def make_run(root: Path, shape: RunShape | None = None) -> Path:
    """Write one synthetic run under root/<sweep>/<run_id>/ and return its directory."""
    shape = shape or RunShape()
    run_dir = root / shape.sweep / shape.run_id
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    points = _point_table(shape)
    req, lists = _requests(points, shape)
    metrics = _point_metrics(points, req)
    for pid, tail in zip(metrics.point_id, metrics.log_tail, strict=True):
        (run_dir / "logs" / f"{pid}.log").write_text(f"starting {pid}\n{tail}\n")
    if not shape.legacy:
        req, metrics = _current_columns(req), _current_columns(metrics)
    if shape.write_requests:
        table = pa.Table.from_pandas(req.drop(columns=["_itl_mean"]), preserve_index=False)
        for name, column in lists.items():
            table = table.append_column(name, column)
        pq.write_table(table, run_dir / "requests.parquet")
    if shape.write_points:
        metrics.to_parquet(run_dir / "points.parquet", index=False)
        metrics.to_csv(run_dir / "points.csv", index=False)
    manifest = {
        "run_id": shape.run_id,
        "sweep": shape.sweep,
        "status": shape.status,
        "sweeper_version": "0.1.0",
        "runtime_source_hash": "ab12" * 16,
        "started_at": "2026-11-29T02:00:00Z",
        "finished_at": "2026-11-29T02:09:00Z",
        "created_at": "2026-11-29T02:00:00Z",
        "points_total": len(points),
        "points_done": len(points) if shape.write_points else 0,
        "exit_code": 0,
        "hosts": {
            h: {"name": h, "runtime_version": "0.1.0", "device": "cpu", "model": {"name": "tiny"}}
            for h in shape.hosts
        },
        "spec": {"name": shape.sweep, "grid": {"budget": list(shape.budgets)}, **shape.spec},
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return run_dir
