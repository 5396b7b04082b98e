"""Which request features a config or record row uses: the one answer the report's features
table and the diagnosis's levels read. A feature is used when the request sent it: sampling
when the temperature is above 0, every other feature when its column is not None (None, or NaN
as a DataFrame writes it, means nothing was sent: the engine's default applies)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweeper.config.columns import is_missing
from sweeper.config.features import FEATURES, used
from sweeper.config.request import temperature_of

#: How sampling (temperature > 0) is named among the features.
SAMPLING = "temperature > 0"
#: The request config's cut-offs: None is no cut-off.
CUT_OFFS: tuple[str, ...] = ("top_p", "top_k")
#: The request columns whose None means "not sent": the cut-offs, then every request feature
#: (`config.features.FEATURES`).
FEATURE_COLUMNS: tuple[str, ...] = (*CUT_OFFS, *(f.column for f in FEATURES))
#: Every feature, in the order the report lists them.
FEATURE_NAMES: tuple[str, ...] = (SAMPLING, *FEATURE_COLUMNS)


def features_used(row: Mapping[str, Any]) -> list[str]:
    """The features a point or request row uses (`FEATURE_NAMES` order)."""
    sampled = [SAMPLING] if temperature_of(row) > 0 else []
    cut = [c for c in CUT_OFFS if not is_missing(row.get(c))]
    return [*sampled, *cut, *(f.column for f, _ in used(row))]
