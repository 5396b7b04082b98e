"""`sweeper history show` lists the history's change points, and `-o` draws the trends page:
one self-contained file, a figure per config, the change points with their commit ranges."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sweeper.cli import app
from tests.sweeper.analysis.test_changepoints import night_row, write_nights


def test_show_lists_change_points_and_draws_the_trends_page(tmp_path: Path) -> None:
    level = [10.0, 10.1, 9.9, 10.0, 10.1, 9.9, 10.0, 10.1, 9.0, 9.1, 8.9, 9.0, 9.1, 8.9]
    rows = [night_row(i, v) for i, v in enumerate(level)]
    rows[3] = night_row(3, 12.0, host_busy=True)
    write_nights(tmp_path, rows)
    url = str(tmp_path / "h.sqlite3")
    runner = CliRunner()
    listed = runner.invoke(app, ["history", "show", "--history", url])
    assert listed.exit_code == 0, listed.output
    assert "1 change point(s):" in listed.output
    assert "output_tok_s step -10.1%" in listed.output
    assert "runs run-07..run-08, runtime c070000000..c080000000" in listed.output
    page = tmp_path / "trends.html"
    drawn = runner.invoke(app, ["history", "show", "--history", url, "-o", str(page)])
    assert drawn.exit_code == 0, drawn.output
    html = page.read_text()
    assert html.count('<img src="data:image/png;base64,') == 1  # one config, one figure
    assert "<code>c070000000..c080000000</code>" in html and "run-07 .. run-08" in html
    assert "<script" not in html and "http" not in html.replace("http-equiv", "")
