"""One embedded figure (`Chart`) and its encoding as a PNG data URI, so the report is one
self-contained file."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

#: Rendered at twice a screen's 80 dpi, shown at the page's full width: crisp and legible at
#: 1280 px and beyond.
DPI = 160


@dataclass
class Chart:
    """One embedded figure."""

    title: str
    uri: str
    caption: str = ""


def to_data_uri(fig: Figure) -> str:
    """Encode a figure as a base64 PNG data URI and free it."""
    buf = io.BytesIO()
    # Layout is decided when the figure is made (constrained); bbox_inches="tight" would draw
    # every figure twice.
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
