"""The report's request features x server configs table: a feature proven where every point
that used it is clean, violated with its first evidence, unproven with the point's why, not
swept where no point of the config used it; rendered as text, a hostile prompt id included."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from sweeper.report.assemble import RunView, build_view
from sweeper.report.features import Cell, feature_table
from sweeper.report.render import render_html
from sweeper.results.reader import read_run
from tests.sweeper.feature_run import AR, CHAIN, TREE, Point, write_run

HOSTILE = "<script>alert('p')</script>"
PROMPTS = ("p0", HOSTILE)
WHY = "no scorer rebuilds top-k <40> here"


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> RunView:
    penalty = {"repetition_penalty": 1.3}
    harmless = {"frequency_penalty": 0.5}
    top_k = {"top_k": 40}
    points = [
        *(Point(AR, t) for t in (0.0, 0.7)),
        *(Point(AR, features=f) for f in (penalty, harmless)),
        Point(AR, 0.7, top_k),
        *(Point(server, t) for server in (TREE, CHAIN) for t in (0.0, 0.7)),
        Point(TREE, features=penalty, verdicts={HOSTILE: "diverged"}),
        Point(TREE, features=harmless),
        Point(TREE, 0.7, top_k, determinism="unproven", unproven_reason=WHY),
    ]
    run = write_run(tmp_path_factory.mktemp("results"), points, PROMPTS)
    return build_view(read_run(run))


def test_each_feature_stands_per_config_with_its_evidence_or_why(view: RunView) -> None:
    table = view.features
    assert table is not None
    cells = {
        (row.feature, config): (cell.standing, cell.detail)
        for row in table.rows
        for config, cell in zip(table.configs, row.cells, strict=True)
    }
    assert sorted(table.configs) == ["b4 k1 bs4", "b8 k4 bs4"]  # AR is the reference
    assert [row.feature for row in table.rows] == [
        "temperature > 0",
        "top_k",
        "repetition_penalty",
        "frequency_penalty",
    ]
    assert cells == {
        ("temperature > 0", "b8 k4 bs4"): ("unproven", f"t0.7-tk40-c1: {WHY}"),
        ("temperature > 0", "b4 k1 bs4"): ("proven", ""),
        ("top_k", "b8 k4 bs4"): ("unproven", f"t0.7-tk40-c1: {WHY}"),
        ("top_k", "b4 k1 bs4"): ("not swept", ""),
        ("repetition_penalty", "b8 k4 bs4"): (
            "violated",
            f"t0-rp1.3-c1, prompt {HOSTILE}, token 3: diverged",
        ),
        ("repetition_penalty", "b4 k1 bs4"): ("not swept", ""),
        ("frequency_penalty", "b8 k4 bs4"): ("proven", ""),
        ("frequency_penalty", "b4 k1 bs4"): ("not swept", ""),
    }


def test_the_table_renders_its_words_and_evidence_as_text(view: RunView) -> None:
    html = render_html(view)
    section = re.search(r'<h2 id="features">.*?(?=<h2 )', html, re.S)
    assert section is not None
    text = section.group(0)
    for word in ("proven", "violated", "unproven", "not swept"):
        assert f">{word}<" in text
    assert "prompt &lt;script&gt;alert(&#39;p&#39;)&lt;/script&gt;, token 3: diverged" in text
    assert "no scorer rebuilds top-k &lt;40&gt; here" in text
    assert "<script>" not in html and "<40>" not in html


def test_a_test_s_violation_and_a_failed_point_say_why_without_requests() -> None:
    # A distribution test judges samples, not requests: its evidence is the point's own words;
    # a failed point proves nothing about what it sent.
    detail = "permutation max-T: p = 0.0001, N = 48 a side <= alpha 0.01"
    base = {"mode": "speculative", "temperature": 0.7, "determinism": "exact", "status": "ok"}
    points = pd.DataFrame(
        [
            {**base, "point_id": "a", "request_config_id": "t0.7-c1", "determinism": "shifted",
             "sampled_detail": detail},
            {**base, "point_id": "b", "request_config_id": "t0.7-mp0.1-c1", "min_p": 0.1,
             "status": "failed", "reason": "server exited", "determinism": "n/a"},
            {**base, "mode": "ar", "point_id": "c", "request_config_id": "t0.7-c1",
             "determinism": "n/a"},
        ]
    )  # fmt: skip
    requests = pd.DataFrame({"point_id": ["a"], "prompt_id": ["p0"], "verdict": ["exact"]})
    table = feature_table(points, requests, pd.Series(["b8", "b8", "AR"]))
    assert table.configs == ("b8",)
    assert [(r.feature, r.cells) for r in table.rows] == [
        ("temperature > 0", (Cell("violated", f"t0.7-c1: shifted ({detail})"),)),
        ("min_p", (Cell("unproven", "t0.7-mp0.1-c1: the point failed: server exited"),)),
    ]
