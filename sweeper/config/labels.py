"""How a config reads, for ids and for people: one recipe (`label_parts`), two spellings.

`label_parts` says what a server config is, part by part: `ar` (`ar speed` for the speed
baseline) or the tree's shape for the speculative keys it has (`b16 k4 bs8`; a key its engine's
mapping does not use is absent, so a vLLM n-gram config is `b4`), then `cg1`/`cg0` when it sets
cuda_graph. Ids join the parts with "-" and add extra flags and the restart (`server_label`:
`b16-k4-bs8-cg1`); people read them spoken (`spoken_label`: `b16 k4 bs8 cg`, `AR`). Both read
the same values, from a plan's config or from a record's columns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sweeper.config.columns import LABEL_PREFIXES, SERVER_KEYS, SPEED_BASELINE, is_missing
from sweeper.config.ids import ID_SAFE, fmt, short_hash
from sweeper.config.request import temperature_of

#: How a part reads for people (others read as they are; an empty one is left out).
_SPOKEN = {"ar": "AR", "cg1": "cg", "cg0": ""}


def label_parts(mode: str, values: Mapping[str, Any]) -> list[str]:
    """The one label recipe (see the module docstring): `["b16", "k4", "bs8", "cg1"]`."""
    if mode == "ar":
        speed = values.get(SPEED_BASELINE)
        parts = ["ar", "speed"] if not is_missing(speed) and bool(speed) else ["ar"]
    else:
        parts = [
            f"{prefix}{int(values[key])}"
            for key, prefix in LABEL_PREFIXES.items()
            if key in values and not is_missing(values[key])
        ] or ["spec"]
    graph = values.get("cuda_graph")
    if not is_missing(graph):
        parts.append(f"cg{fmt(bool(graph))}")
    return parts


def server_label(mode: str, params: Mapping[str, Any], restart: int = 0) -> str:
    """A server config's id part: `b16-k4-bs8-cg1`, `ar-cg1`; extra flags appended with a hash
    of their exact values (the readable part is lossy), then `rs<n>` for a restart."""
    parts = label_parts(mode, params)
    extra = extra_params(params)
    if extra:
        parts += [ID_SAFE.sub("", f"{k}{fmt(v)}") for k, v in extra.items()]
        parts.append(short_hash(extra, 6))
    if restart:
        parts.append(f"rs{restart}")
    return "-".join(parts)


def first_restart_label(label: str) -> str:
    """The label of a server config's first start: `server_label` with its trailing `rs<n>`
    (the restart, always the last part) dropped; every restart of a config answers to it."""
    head, _, last = label.rpartition("-")
    return head if head and last.startswith("rs") and last[2:].isdigit() else label


def extra_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters beyond the named server keys and the speed baseline (extra runtime flags)."""
    skip = (*SERVER_KEYS, SPEED_BASELINE)
    return {k: v for k, v in params.items() if k not in skip}


def spoken_label(parts: list[str]) -> str:
    """`label_parts` as people read them: `b16 k4 bs8 cg`, `AR`, `AR speed`."""
    return " ".join(spoken for part in parts if (spoken := _SPOKEN.get(part, part)))


def point_label(row: Mapping[str, Any]) -> str:
    """The server config of a point or request row, spoken."""
    return spoken_label(label_parts(str(row.get("mode", "")), row))


def load_label(row: Mapping[str, Any]) -> str:
    """A point's load: `c=4` (closed loop), `r=2/s`, `r=inf`, `r=2/s gamma0.5`, `r=2/s m8`."""
    rate: Any = row.get("rate")
    if is_missing(rate):
        concurrency: Any = row.get("concurrency")
        return f"c={1 if is_missing(concurrency) else int(concurrency)}"
    parts = [f"r={float(rate):g}" + ("" if math.isinf(float(rate)) else "/s")]
    arrival = row.get("arrival")
    if not is_missing(arrival) and arrival != "poisson":
        burstiness: Any = row.get("burstiness")
        shape = "" if is_missing(burstiness) else f"{float(burstiness):g}"
        parts.append(f"{arrival}{shape if arrival == 'gamma' else ''}")
    limit: Any = row.get("max_concurrency")
    if not is_missing(limit):
        parts.append(f"m{int(limit)}")
    return " ".join(parts)


def point_label_long(row: Mapping[str, Any]) -> str:
    """The server config and the request config of a point row."""
    return f"{point_label(row)} T={temperature_of(row):g} {load_label(row)}"
