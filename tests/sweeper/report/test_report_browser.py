"""The report opened in real headless Chromium: no console errors, figures visibly drawn.

A screenshot is judged by its pixels: matplotlib figures are the only large colourful areas of
the page, so a blank page, a page whose images failed to decode, or one with no figures fails.
Each check is first shown to fail on a planted bad page, so the test cannot pass vacuously.
Chromium comes from `.ci/setup-system.sh`; without it these tests skip and say so.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from sweeper.analysis.impossible import impossible_speedups
from sweeper.report.assemble import build_view
from sweeper.report.render import write_report
from sweeper.results.reader import read_run
from tests.sweeper.conftest import free_port
from tests.sweeper.results_factory import RunShape, make_run
from tests.sweeper.sweep_fixtures import write_spec

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: Slow: each page is a Chromium started headless (seconds).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: run .ci/setup-system.sh"),
]
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--hide-scrollbars",
]


def screenshot(page: Path, png: Path, height: int = 5000) -> list[str]:
    """Render `page` to `png`; return the console messages Chromium logged."""
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                CHROMIUM,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size=1280,{height}",
                f"--screenshot={png}",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert png.exists(), done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]


def colourful_fraction(png: Path) -> float:
    """Share of pixels that are clearly coloured (not white, grey or black text)."""
    rgb = np.asarray(Image.open(png).convert("RGB")).astype(int)
    return float(((rgb.max(axis=2) - rgb.min(axis=2)) > 60).mean())


def open_in_chromium(report: Path, tmp_path: Path) -> tuple[list[str], float, float]:
    """Console messages, and the colourful share of the page with and without its figures."""
    console = screenshot(report, tmp_path / "report.png")
    stripped = tmp_path / "no-figures.html"
    stripped.write_text(re.sub(r'src="data:image/png;base64,[^"]+"', 'src=""', report.read_text()))
    screenshot(stripped, tmp_path / "no-figures.png")
    without = colourful_fraction(tmp_path / "no-figures.png")
    return console, colourful_fraction(tmp_path / "report.png"), without


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    shape = RunShape(
        diverge={(8, 4, 0.0, False): "diverged"},
        fail={(16, 4, 0.0, True): "server exited"},
        texts={0: "<script>console.error('injected')</script></pre>&amp;"},
    )
    run = make_run(root, shape)
    return write_report(build_view(read_run(run)), run / "report.html")


def test_report_in_chromium_has_no_console_errors_and_visible_figures(
    report: Path, tmp_path: Path
) -> None:
    console, with_figures, without = open_in_chromium(report, tmp_path)
    assert console == []  # the injected model output did not run
    assert with_figures > 0.02, with_figures
    assert with_figures > 4 * without, (with_figures, without)


def test_checks_fail_on_a_blank_page_and_a_page_with_errors(tmp_path: Path) -> None:
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    assert screenshot(blank, tmp_path / "blank.png", 800) == []
    assert colourful_fraction(tmp_path / "blank.png") == 0.0
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('planted'); nope();</script></body></html>")
    console = screenshot(bad, tmp_path / "bad.png", 800)
    assert any("planted" in line for line in console)
    assert any("nope is not defined" in line for line in console)


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("ddtree_runtime") is None, reason="the bundled runtime is absent"
)
def test_report_of_a_real_local_run_in_chromium(tmp_path: Path) -> None:
    """`sweeper run` serving the tiny-random model for real, `sweeper report`, then Chromium."""
    # A real runtime imports torch and loads its model before /health: seconds when quiet, over
    # 30 s on a loaded 2-core machine (seen), as in test_e2e_local.
    spec = write_spec(
        tmp_path, free_port(), fake_env=None, topk=(4,), max_tokens=8, ready_timeout_s=240
    )
    results = tmp_path / "results"
    cli = [sys.executable, "-m", "sweeper.cli"]
    run = subprocess.run(
        [*cli, "run", str(spec), "--results", str(results), "--plain"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    run_dir = Path(run.stdout.strip().splitlines()[-1])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    made = subprocess.run(
        [*cli, "report", "--latest", "--results", str(results)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    report = Path(made.stdout.strip().splitlines()[-1])
    assert report == run_dir / "report.html"
    html = report.read_text()
    assert "b8 k4 bs4" in html and "What is missing" not in html
    console, with_figures, without = open_in_chromium(report, tmp_path)
    assert console == []
    points = pd.read_parquet(run_dir / "points.parquet")

    def any_true(column: str) -> bool:
        return bool(points.get(column, pd.Series(dtype=object)).fillna(False).astype(bool).any())

    # Beside other load, or above tau (the tiny-random model's tau is 1.0, so a quiet machine's
    # real speedup reads impossible): its speedups are no result, so the heatmap is hatched grey.
    impossible = impossible_speedups(points.to_dict("records"))
    withheld = any_true("host_busy") or any_true("baseline_busy") or bool(impossible)
    if withheld:
        assert "Hatched cells hold a speedup that is no result" in html
        assert with_figures > 1.5 * without, (with_figures, without)
    else:
        assert with_figures > 0.005 and with_figures > 4 * without, (with_figures, without)
