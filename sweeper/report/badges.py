"""The report's verdict badges: one per matrix state, in `proof.verdicts.COLOURS`, the colours
the matrix and the diagnosis plot use, so a verdict looks the same in a badge and a figure.

Some of those colours are light (near-tie, n/a, nondeterministic, missing), so each badge gets
the text colour that reads best on it: white or the page's ink, by WCAG contrast.
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.colors import to_rgb

from sweeper.proof.verdicts import COLOURS

#: The page's text colour (template.html.j2's body), for badges too light for white.
INK = "#222"
WHITE = "#fff"


@dataclass(frozen=True)
class Badge:
    """A state's badge: its CSS class name (escaped: `n/a` -> `n\\/a`) and colours."""

    state: str
    background: str
    ink: str

    @property
    def css_class(self) -> str:
        return self.state.replace("/", "\\/")


def _luminance(colour: str) -> float:
    """WCAG 2 relative luminance."""
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two colours (1 to 21)."""
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def badges() -> list[Badge]:
    """Every state's badge, in `COLOURS` order."""
    return [
        Badge(state, colour, max((WHITE, INK), key=lambda ink: contrast(colour, ink)))
        for state, colour in COLOURS.items()
    ]
