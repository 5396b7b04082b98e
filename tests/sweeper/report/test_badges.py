"""The report's verdict badges take their colours from `proof.verdicts.COLOURS` (the matrix's
and the diagnosis plot's), each with the text colour that reads best on it."""

from __future__ import annotations

import re
from pathlib import Path

from sweeper.proof.verdicts import COLOURS
from sweeper.report.assemble import build_view
from sweeper.report.badges import INK, WHITE, badges, contrast
from sweeper.report.render import render_html
from sweeper.results.reader import read_run
from tests.sweeper.results_factory import RunShape, make_run

RULE = re.compile(r"\.v-(\S+) \{ background: (#[0-9a-fA-F]+); color: (#[0-9a-fA-F]+); \}")


def test_the_rendered_badge_colours_are_the_verdict_colours(tmp_path: Path) -> None:
    run = make_run(tmp_path, RunShape(status="running", write_points=False, write_requests=False))
    html = render_html(build_view(read_run(run)))
    styles = html[html.index("<style>") : html.index("</style>")]
    found = {name.replace("\\/", "/"): (bg, ink) for name, bg, ink in RULE.findall(styles)}
    assert {name: bg for name, (bg, _) in found.items()} == COLOURS
    # No other rule for a verdict's class, earlier or later, that could override it.
    for state in COLOURS:
        css = state.replace("/", "\\/")
        assert len(re.findall(rf"\.v-{re.escape(css)}\b", styles)) == 1, state


def test_each_badge_gets_the_text_colour_that_reads_on_it() -> None:
    inks = {b.state: b.ink for b in badges()}
    assert inks["exact"] == inks["diverged"] == inks["garbled"] == inks["failed"] == WHITE
    assert inks["near-tie"] == inks["n/a"] == inks["nondeterministic"] == inks["missing"] == INK
    for b in badges():
        other = INK if b.ink == WHITE else WHITE
        assert contrast(b.background, b.ink) >= max(3.0, contrast(b.background, other))
    assert round(contrast("#000", "#fff"), 6) == 21.0 and contrast("#abc", "#abc") == 1.0
