"""The report opens with the answer: per host, temperature and load the config `sweeper best`
names (ranked by speedup, proven right at every point), its interval and tau; beside it a line
per kind of finding that stops a config from counting, linked to its section; the header counts
what it counts; provenance last, collapsed."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis.best import rank
from sweeper.report.answer import answers
from sweeper.report.assemble import build_view
from sweeper.report.render import render_html
from sweeper.results.reader import read_run
from sweeper.spec.search import ObjectiveSpec
from tests.sweeper.analysis.test_best import _row
from tests.sweeper.report.test_report import HOSTILE
from tests.sweeper.results_factory import RunShape, make_run


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shape = RunShape(
        diverge={(8, 4, 0.0, False): "diverged", (16, 1, 0.0, True): "garbled"},
        fail={(16, 4, 0.0, True): "server exited before ready: CUDA OOM"},
        texts={0: HOSTILE},
        repeats=1,
        n_prompts=2,
    )
    return make_run(tmp_path_factory.mktemp("answer"), shape)


def test_the_answer_is_best_s_winner_per_level_and_the_star(planted: Path) -> None:
    view = build_view(read_run(planted))
    points = view.points
    levels = rank(pd.read_parquet(planted / "points.parquet").to_dict("records"), SPEEDUP)
    winners = {r.at: r.winner.label for r in levels if r.winner is not None}
    assert {a.at: a.config for a in view.answers} == winners and len(winners) == 2
    for answer in view.answers:
        assert answer.verdict == "exact" and answer.speedup.endswith("x") and answer.tau
        assert answer.interval == "1 restart: no interval" and not answer.withheld
    # the broken configs never win, at either temperature (the same server)
    assert not {"b8 k4 bs8", "b16 k1 bs8 cg", "b16 k4 bs8 cg"} & set(winners.values())
    starred = points[points["best"]]
    assert sorted(starred["config"]) == sorted(winners.values())
    assert (starred["mode"] != "ar").all()


SPEEDUP = ObjectiveSpec(column="speedup")


def test_the_page_opens_with_the_answer_and_what_stops_the_rest(planted: Path) -> None:
    html = render_html(build_view(read_run(planted)))
    headings = re.findall(r"<h2[^>]*>([^<]*)", html)
    assert headings[0] == "The answer" and headings[1] == "Summary"
    assert headings[-1] == "Provenance" and headings.index("Figures") < headings.index("Diagnosis")
    header = re.search(r'<p class="counts">([^.]*)\.', html)
    assert header is not None  # every verdict named, the failed point counted apart
    assert header.group(1) == "18 points: 15 exact, 1 diverged, 1 garbled, 1 failed"
    start = html.index('<ul class="stops">')
    stops = html[start : html.index("</ul>", start)]
    lines = re.findall(r'<li class="([^"]+)"><a href="#([^"]+)">', stops)
    assert lines == [("violations", "outputs"), ("failed", "failed")]
    assert 'id="outputs"' in html and 'id="failed"' in html
    # the first divergent text, escaped like every model output
    assert "first divergence, b16 k1 bs8 cg T=0 c=1, prompt prompt-0, token 5" in stops
    assert "&lt;script&gt;alert(&#39;x&#39;)" in stops and "<script>" not in html
    # provenance and the resolved spec last, collapsed
    tail = html[html.index('<h2 id="provenance">') :]
    assert tail.index("<details>") < tail.index("run_id") < tail.index("Resolved spec")


def test_a_sweep_without_a_baseline_reads_unproven_never_failed() -> None:
    """`baseline: false`: no AR point, so no speedup. Its configs are unproven (nothing to compare
    their output with) and unmeasured (nothing to divide by), never "failed"; proven by an
    earlier run's AR (`runtime.baseline_run`), its fastest is named, the speedup withheld."""
    unproven = _row(
        8, 30.0, determinism="unproven", unproven_reason="no baseline output to compare"
    )
    (alone,) = answers([{**unproven, "host": "local", "speedup": None}])
    assert alone.note == (
        "no config proven right here: 1 unproven (unproven at t0-c1: no baseline output to compare)"
    )
    (ranking,) = rank([{**unproven, "speedup": None}], SPEEDUP)
    assert [(e.score.state, e.score.reason) for e in ranking.excluded] == [
        ("unproven", "unproven at t0-c1: no baseline output to compare")
    ]
    (proven,) = answers([{**_row(8, 30.0), "host": "local", "speedup": None}])
    assert proven.config == "b8 k2 bs4" and proven.withheld == "no AR baseline"
    assert proven.withheld_why == "no speedup measured: no AR baseline measured to compare with"
