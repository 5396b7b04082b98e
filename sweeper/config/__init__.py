"""Configs: what a server config and a request config are, in one place.

Below every room that handles them (plan builds them, engines render them, records store their
ids and labels, analysis and diagnosis read them back from the records): the typed values and
their ids (`server`, `request`, `ids`), the one label recipe (`labels`), each knob's range and
the rule that budget 0 is AR (`knobs`), and the record columns a config maps to (`columns`).
"""

from sweeper.config.columns import (
    LABEL_PREFIXES,
    SERVER_KEYS,
    SPECULATIVE_KEYS,
    SPEED_BASELINE,
    is_missing,
)
from sweeper.config.ids import point_id, short_hash
from sweeper.config.knobs import Mode, mode_of
from sweeper.config.labels import (
    first_restart_label,
    label_parts,
    load_label,
    point_label,
    point_label_long,
)
from sweeper.config.request import (
    DEFAULT_TEMPERATURE,
    REQUEST_KEYS,
    RequestConfig,
    temperature_of,
)
from sweeper.config.server import ServerConfig

__all__ = [
    "DEFAULT_TEMPERATURE",
    "LABEL_PREFIXES",
    "REQUEST_KEYS",
    "SERVER_KEYS",
    "SPECULATIVE_KEYS",
    "SPEED_BASELINE",
    "Mode",
    "RequestConfig",
    "ServerConfig",
    "first_restart_label",
    "is_missing",
    "label_parts",
    "load_label",
    "mode_of",
    "point_id",
    "point_label",
    "point_label_long",
    "short_hash",
    "temperature_of",
]
