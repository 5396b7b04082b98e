"""How a config reads, for ids and for people: one recipe (`label_parts`), two spellings.

`label_parts` says what a server config is, part by part: `ar` (`ar speed` for the speed
baseline) or the tree's shape for the speculative keys it has (`b16 k4 bs8`; a key its engine's
mapping does not use is absent, so a vLLM n-gram config is `b4`), then `cg1`/`cg0` when it sets
cuda_graph, then every extra server flag of the grid (`dtype=bfloat16`): configs that differ
only in such a flag never share a label. Ids join the parts with "-", kept to letters, digits
and dots, with a hash of the extra flags' exact values and the restart (`server_label`:
`b16-k4-bs8-cg1`, `b16-k4-bs8-cg1-dtypebfloat16-1a2b3c`); people read them spoken
(`spoken_label`: `b16 k4 bs8 cg dtype=bfloat16`, `AR`). Both read the same values, from a plan's
config or from a record's columns (whose extra flags are the ones its recorded id names).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

from sweeper.config.columns import LABEL_PREFIXES, SERVER_KEYS, SPEED_BASELINE, is_missing
from sweeper.config.features import feature_labels
from sweeper.config.ids import ID_SAFE, fmt, short_hash
from sweeper.config.request import temperature_of

#: How a part reads for people (others read as they are; an empty one is left out).
_SPOKEN = {"ar": "AR", "cg1": "cg", "cg0": ""}


def label_parts(mode: str, values: Mapping[str, Any], extra: Mapping[str, Any]) -> list[str]:
    """The one label recipe (see the module docstring): `["b16", "k4", "bs8", "cg1"]`, then
    `extra`, the config's extra flags, as `name=value`."""
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
    return parts + [f"{k}={fmt(v)}" for k, v in extra.items()]


def server_label(mode: str, params: Mapping[str, Any], restart: int = 0) -> str:
    """A server config's id part: `b16-k4-bs8-cg1`, `ar-cg1`; extra flags kept to `ID_SAFE`
    characters and followed by a hash of their exact values (the readable part is lossy), then
    `rs<n>` for a restart."""
    extra = extra_params(params)
    parts = [ID_SAFE.sub("", part) for part in label_parts(mode, params, extra)]
    if extra:
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


def recorded_extra(row: Mapping[str, Any]) -> dict[str, Any]:
    """The extra flags of a record row's server config: the columns its recorded `server_label`
    names after the named keys' parts (a column is found by its id spelling, name and value,
    else by its name: a value read back as another type still counts); none in a row without
    that label (runs written before labels were recorded)."""
    label = row.get("server_label")
    if not isinstance(label, str):
        return {}
    named = [ID_SAFE.sub("", part) for part in label_parts(str(row.get("mode", "")), row, {})]
    parts = first_restart_label(label).split("-")
    if parts[: len(named)] != named or len(parts) < len(named) + 2:
        return {}
    columns = [k for k in row if k not in (*SERVER_KEYS, SPEED_BASELINE) and _spelled(k)]
    extra: dict[str, Any] = {}
    for part in parts[len(named) : -1]:  # the last is the hash of their values
        named_here = [k for k in columns if part.startswith(_spelled(k))]
        whole = [k for k in named_here if _spelled(k) + ID_SAFE.sub("", fmt(row[k])) == part]
        found = whole or sorted(named_here, key=lambda k: len(_spelled(k)))[-1:]
        if found:
            extra[found[0]] = row[found[0]]
    return extra


@functools.lru_cache(maxsize=1024)
def _spelled(name: str) -> str:
    """A column's name as an id spells it (`ID_SAFE`)."""
    return ID_SAFE.sub("", name)


def point_label(row: Mapping[str, Any]) -> str:
    """The server config of a point or request row, spoken, extra flags included."""
    return spoken_label(label_parts(str(row.get("mode", "")), row, recorded_extra(row)))


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
    """The server config and the request config of a point row: the temperature, the request
    features it uses (`feature_labels`), the load."""
    features = "".join(f" {label}" for label in feature_labels(row))
    return f"{point_label(row)} T={temperature_of(row):g}{features} {load_label(row)}"
