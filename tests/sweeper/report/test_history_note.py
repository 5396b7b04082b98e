"""A run's report says, per config, whether tonight is inside its history's band (the nights
before it since the last step, mean +/- two nights' noise), linked to the trends page."""

from __future__ import annotations

from pathlib import Path

from sweeper.analysis.changepoints import bands
from sweeper.report.assemble import build_view
from sweeper.report.history_note import HistoryNote, anchor
from sweeper.report.render import render_html
from sweeper.results.reader import read_run
from tests.sweeper.analysis.test_changepoints import night_row, write_nights
from tests.sweeper.results_factory import RunShape, make_run


def test_tonight_against_the_band_of_the_nights_before_it(tmp_path: Path) -> None:
    # A step at night 4 (its nights before it are no longer the band), a busy wild night 7.
    level = [12.0, 12.1, 11.9, 12.0, 10.0, 10.1, 9.9, 30.0, 10.0, 10.1, 9.9, 10.0]
    rows = [night_row(i, v, tau=2.0) for i, v in enumerate(level)]
    rows[7] = night_row(7, 30.0, host_busy=True)
    slow = [*rows, night_row(12, 9.0, tau=2.0)]
    (tok_s, tau) = bands(write_nights(tmp_path / "a", slow), "nightly", "run-12")
    assert (tok_s.metric, tok_s.where, tok_s.nights) == ("output_tok_s", "below", 7)
    assert tok_s.low is not None and tok_s.high is not None
    assert tok_s.low < 10.0 < tok_s.high  # the band is the nights since the step, not before
    assert (tau.metric, tau.where) == ("tau", "inside")
    steady = bands(write_nights(tmp_path / "b", [*rows, night_row(12, 10.05)]), "nightly", "run-12")
    assert [b.where for b in steady] == ["inside"]
    assert bands(write_nights(tmp_path / "c", rows[:2]), "nightly", "run-01")[0].where == (
        "no history"
    )
    busy = [*rows[:2], night_row(2, 10.0, host_busy=True)]
    assert bands(write_nights(tmp_path / "d", busy), "nightly", "run-02")[0].where == "busy"
    baseline = [night_row(i, 10.0 + i % 2 / 10, determinism="n/a") for i in range(8)]
    (ar,) = bands(write_nights(tmp_path / "e", baseline), "nightly", "run-07")
    assert (ar.where, ar.nights) == ("inside", 7)  # the AR baseline's n/a is counted

    run = make_run(tmp_path, RunShape(write_points=False, write_requests=False))
    note = HistoryNote([tok_s, tau], "h.sqlite3", "../../history.html")
    html = render_html(build_view(read_run(run)), history=note)
    section = html[html.index('<h2 id="history">') : html.index('<h2 id="summary">')]
    link = f'<a href="../../history.html#{anchor(tok_s.config)}">{tok_s.config}</a>'
    assert section.count(link) == 2 and '<td class="l">below</td>' in section
    assert '<a href="../../history.html">trends</a>' in section
    assert 'id="history"' not in render_html(build_view(read_run(run)))  # no history: no section
