"""How configs and points are named: a short hash of plain data, the compact rendering of a
value inside an id, and a point's id. Resume and every record rely on these being stable."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

#: What an extra flag's name and value keep in a label (readable, lossy: a hash follows).
ID_SAFE = re.compile(r"[^A-Za-z0-9.]+")


def short_hash(data: Any, length: int = 10) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def fmt(value: Any) -> str:
    """Compact, readable rendering of a parameter value for ids: 0.0 -> 0, True -> 1."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        # "g" keeps 6 digits, so 0.1234561 and 0.1234562 would share an id (and one point
        # would silently replace the other); the shortest exact form when "g" loses digits.
        short = format(value, "g")
        return short if float(short) == value else repr(value)
    return str(value)


def point_id(host: str, server_label: str, request_config_id: str) -> str:
    """`<host>-<server config label>-<request config id>`, e.g. `local-b16-k4-bs8-cg1-t0-c1`."""
    return f"{host}-{server_label}-{request_config_id}"
