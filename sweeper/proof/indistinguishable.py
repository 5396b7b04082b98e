"""Configs a run could not tell apart: speculative server configs whose outputs and per-request
acceptance were identical on every request they share (same request config, prompt, repeat).

Labels that the engine's rules make one behaviour are measured once by the plan; this catches
what no rule foresaw (a fork's override, a cap above the rule's width): two labels that ran as
one server. Acceptance must be known (`verify_rounds`) on every request, else equal outputs
alone say nothing (greedy decoding is exact under any config). Pure: rows in, label groups out.
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from sweeper.config.labels import point_label
from sweeper.results.reader import Run
from sweeper.results.records import RequestConfigColumns
from sweeper.results.rows import is_missing

#: Request columns the signature needs.
COLUMNS = ["point_id", "prompt_id", "repeat", "sha256", "tau", "verify_rounds"]


def indistinguishable(points: pd.DataFrame, requests: pd.DataFrame) -> list[list[str]]:
    """Groups (two or more) of speculative config labels with identical signatures, each
    sorted; a config whose acceptance is unknown on any request is never grouped."""
    if points.empty or requests.empty or "server_config_id" not in points:
        return []
    ok = points[(points["mode"] == "speculative") & (points["status"] == "ok")]
    request_keys = [k for k in RequestConfigColumns.model_fields if k in ok]
    rc_of = {
        str(row["point_id"]): (
            str(row["server_config_id"]),
            tuple(None if is_missing(row[k]) else row[k] for k in request_keys),
        )
        for row in ok.to_dict("records")
    }
    labels = {str(r["server_config_id"]): point_label(r) for r in ok.to_dict("records")}
    signature: dict[str, set[tuple[object, ...]]] = defaultdict(set)
    unknown: set[str] = set()
    for row in requests.to_dict("records"):
        found = rc_of.get(str(row["point_id"]))
        if found is None:
            continue
        config, request_config = found
        if is_missing(row.get("verify_rounds")):
            unknown.add(config)
            continue
        tau = None if is_missing(row.get("tau")) else round(float(row["tau"]), 9)
        signature[config].add(
            (request_config, row["prompt_id"], row["repeat"], row["sha256"], tau,
             int(row["verify_rounds"]))
        )  # fmt: skip
    groups: dict[frozenset[tuple[object, ...]], list[str]] = defaultdict(list)
    for config, sig in signature.items():
        if config not in unknown and sig:
            groups[frozenset(sig)].append(config)
    return sorted(
        sorted({labels[c] for c in members}) for members in groups.values() if len(members) > 1
    )


def indistinguishable_in(run: Run) -> list[list[str]]:
    """`indistinguishable` over a run's points and requests."""
    points = run.points
    if points is None:
        return []
    requests = run.requests(COLUMNS, categorical=False)
    return indistinguishable(points, requests)


def describe(groups: list[list[str]]) -> list[str]:
    """One sentence per group, for the report and compare."""
    return [
        f"indistinguishable: {' = '.join(group)} gave identical outputs and per-request "
        "acceptance on every request (one behaviour under several labels)"
        for group in groups
    ]
