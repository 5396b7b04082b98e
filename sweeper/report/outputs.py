"""Every non-exact output beside its reference text, from the first point where they differ.

The reference is the AR baseline's output for the same host, prompt and temperature (repeat 0);
without one (no baseline, or a repeat-to-repeat check) it is the point's own first repeat.
Only the rows needed are read from requests.parquet (through `sweeper.results.reader.Run`), so a
run with millions of rows is cheap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

from sweeper.proof.verdicts import QUIET_VERDICTS
from sweeper.results.reader import Run

CONTEXT_CHARS = 80  # shared text shown before the divergence
REST_CHARS = 1500  # cap on each side's text after it


@dataclass
class Divergence:
    """One non-exact output and its reference, split at the first differing character."""

    host: str
    config: str
    prompt_id: str
    repeat: int
    verdict: str
    token_index: int | None
    reference_name: str
    shared: str
    reference_rest: str
    output_rest: str


def load_divergences(run: Run, points: pd.DataFrame, cap: int) -> tuple[list[Divergence], int]:
    """Up to `cap` divergences, and how many there are in all."""
    names = set(run.request_names)
    if points.empty or not {"verdict", "text", "point_id", "prompt_id"} <= names:
        return [], 0
    extra = [c for c in ("repeat", "divergence_index") if c in names]
    bad = run.requests(
        ["point_id", "prompt_id", "verdict", "text", *extra],
        filters=[("verdict", "not in", list(QUIET_VERDICTS))],
        categorical=False,
    )
    total = len(bad)
    bad = bad.head(cap)
    if bad.empty:
        return [], total
    info = points.set_index("point_id")
    refs = _reference_texts(run, points, set(bad["point_id"]), "repeat" in names)
    out = []
    for row in bad.to_dict("records"):
        point = info.loc[row["point_id"]] if row["point_id"] in info.index else None
        host = str(point["host"]) if point is not None else "?"
        config = str(point["config_long"]) if point is not None else str(row["point_id"])
        ref_name, ref_text = _pick_reference(refs, points, row, point)
        out.append(_split(host, config, row, ref_name, ref_text))
    return out, total


def _reference_texts(
    run: Run, points: pd.DataFrame, bad_ids: set[str], has_repeat: bool
) -> dict[tuple[str, str], str]:
    ar_ids = set(points.loc[points["mode"] == "ar", "point_id"])
    wanted = sorted(ar_ids | bad_ids)
    filters = [("point_id", "in", wanted)]
    cols = ["point_id", "prompt_id", "text"] + (["repeat"] if has_repeat else [])
    rows = run.requests(cols, filters=filters, categorical=False)
    if has_repeat:
        rows = rows.sort_values("repeat", kind="stable")
    first = rows.drop_duplicates(["point_id", "prompt_id"])
    return {(p, q): t for p, q, t in zip(first.point_id, first.prompt_id, first.text, strict=True)}


def _pick_reference(
    refs: dict[tuple[str, str], str], points: pd.DataFrame, row: dict, point: pd.Series | None
) -> tuple[str, str]:
    if point is not None and point.get("mode") != "ar":
        same = (points["mode"] == "ar") & (points["host"] == point["host"])
        same &= points["temperature"] == point["temperature"]
        for ar_id in points.loc[same, "point_id"]:
            if (ar_id, row["prompt_id"]) in refs:
                return "AR baseline", refs[(ar_id, row["prompt_id"])]
    own = refs.get((row["point_id"], row["prompt_id"]), "")
    return "repeat 0 of this point", own


def _split(host: str, config: str, row: dict, ref_name: str, ref_text: str) -> Divergence:
    text = str(row.get("text") or "")
    cut = len(os.path.commonprefix([ref_text, text]))
    index = row.get("divergence_index")
    return Divergence(
        host=host,
        config=config,
        prompt_id=str(row["prompt_id"]),
        repeat=int(row.get("repeat") or 0),
        verdict=str(row["verdict"]),
        token_index=int(index) if index is not None and index == index and index >= 0 else None,
        reference_name=ref_name,
        shared=ref_text[max(0, cut - CONTEXT_CHARS) : cut],
        reference_rest=ref_text[cut : cut + REST_CHARS],
        output_rest=text[cut : cut + REST_CHARS],
    )
