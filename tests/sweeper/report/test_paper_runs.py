"""The reference flag on real runs: smollm2-135m served by the real runtime with the n-gram
drafter, once as built and once with the planted fault `blind_drafts` (a drafter that proposes
nothing the target accepts: every output still exact, at one token per round). Held against a
reference tau, the normal run is silent and the planted one is flagged: in `sweeper report
--table paper` and in the HTML report as headless Chromium renders it (the flagged cells' colour
on the screenshot, the table's text in the rendered DOM).

The reference's tau: this spec's normal run measured 2.83 for the tree on these prompts here (at
temperature 0 a pure function of the model, drafter, budget and prompts); the reference says
2.8 with tolerance 0.2, so a tau under 2.24 is flagged: the blind drafter's 1.00 is, 2.83 is
not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from tests.sweeper.conftest import free_port
from tests.sweeper.planted import plant_fault
from tests.sweeper.report.test_report_browser import CHROMIUM, FLAGS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed: run .ci/setup-system.sh"),
]
ROOT = Path(__file__).resolve().parents[3]
CLI = [sys.executable, "-m", "sweeper.cli"]
#: The flagged cells' background (`td.tau-low`, and the flag's `div.bad`) in the report's CSS.
FLAG_RGB = (0xFD, 0xEC, 0xEA)
#: The answer section's background (`#answer`).
ANSWER_RGB = (0xF4, 0xF8, 0xFB)
REFERENCE_TAU = 2.8


def _spec(tmp: Path, name: str, package: Path | None) -> Path:
    rows = [json.loads(line) for line in (ROOT / "sweeps/data/local-paper.jsonl").open()]
    (tmp / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[::2]))
    (tmp / "reference.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "smollm2-ngram",
                "source": "measured by this test's normal run",
                "rows": [
                    {
                        "temperature": 0,
                        "dataset": "handwritten",
                        "method": "tree",
                        "tau": REFERENCE_TAU,
                    }
                ],
            }
        )
    )
    spec = {
        "name": name,
        "hosts": ["local"],
        "runtime": {
            "model": "smollm2-135m",
            "draft": "ngram",
            "port": free_port(),
            "ready_timeout_s": 240,
            **({"package": str(package)} if package else {}),
        },
        "grid": {"budget": [8], "topk": [4], "block_size": [8], "cuda_graph": [False]},
        "baseline": True,
        "workload": {
            "api": "chat",
            "datasets": [{"file": "prompts.jsonl", "name": "handwritten"}],
            "max_tokens": 24,
            "warmup": 1,
            "seed": 3,
        },
        "reference": {"file": "reference.yaml", "tolerance": 0.2},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _run(tmp: Path, name: str, package: Path | None) -> Path:
    spec = _spec(tmp, name, package)
    done = subprocess.run(
        [*CLI, "run", str(spec), "--results", str(tmp / "results"), "--plain"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("paper-runs")
    planted = plant_fault(tmp / "planted", "blind_drafts")
    return {"normal": _run(tmp, "normal", None), "planted": _run(tmp, "blind", planted)}


def _table(run: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*CLI, "report", str(run), "--table", "paper", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done


def _tree_row(run: Path) -> dict[str, str]:
    rows = _table(run, "--format", "csv").stdout.splitlines()
    header = rows[0].split(",")
    found = [dict(zip(header, r.split(","), strict=True)) for r in rows[1:]]
    return next(r for r in found if r["method"] == "tree")


def test_a_normal_run_meets_its_reference(runs: dict[str, Path]) -> None:
    tree = _tree_row(runs["normal"])
    assert float(tree["tau"]) >= REFERENCE_TAU * 0.8, tree
    assert tree["tau_flagged"] == "0" and tree["reference_tau"] == "2.8"
    markdown = _table(runs["normal"]).stdout
    assert "| handwritten | 1.00x / 1.00 | " in markdown
    assert "(tau low)" not in markdown and "**flag**" not in markdown


def test_a_drafter_that_proposes_nothing_is_flagged(runs: dict[str, Path]) -> None:
    tree = _tree_row(runs["planted"])
    assert float(tree["tau"]) == 1.0 and tree["tau_flagged"] == "1", tree
    done = _table(runs["planted"])
    assert "- **flag**: handwritten T=0 tree (b8 k4 bs8): tau 1.00 is 64% below" in done.stdout
    # Exactness sees nothing: the blind drafter's outputs are the target's, token for token.
    points = [json.loads(line) for line in (runs["planted"] / "points.jsonl").open()]
    assert [(p["mode"], p["determinism"]) for p in points] == [
        ("ar", "n/a"),
        ("speculative", "exact"),
    ]


def _render(report: Path, png: Path) -> str:
    """Chromium's screenshot of the whole report into `png`, and its rendered DOM."""
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        common = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--window-size=1280,6000"]
        shot = subprocess.run(
            [*common, f"--screenshot={png}", report.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert png.exists(), shot.stderr[-2000:]
    with tempfile.TemporaryDirectory() as profile:
        common = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}"]
        dom = subprocess.run(
            [*common, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120
        )
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout


def _pixels(png: Path, colour: tuple[int, int, int] = FLAG_RGB) -> int:
    rgb = np.asarray(Image.open(png).convert("RGB"))
    return int((rgb == np.array(colour, dtype=rgb.dtype)).all(axis=2).sum())


def test_the_html_report_shows_the_table_and_the_flag_in_chromium(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    pixels, doms = {}, {}
    for name, run in runs.items():
        made = subprocess.run(
            [*CLI, "report", str(run)], capture_output=True, text=True, timeout=300
        )
        assert made.returncode == 0, made.stderr
        png = tmp_path / f"{name}.png"
        doms[name] = _render(Path(made.stdout.strip().splitlines()[-1]), png)
        pixels[name] = _pixels(png)
    assert '<h2 id="paper-table">Paper table</h2>' in doms["normal"]
    assert '<td class="l">handwritten</td>' in doms["normal"]
    assert "Acceptance below the reference" not in doms["normal"]
    assert "Acceptance below the reference: handwritten T=0 tree" in doms["planted"]
    assert '<td class="tau-low">' in doms["planted"]
    # The flag is drawn: its colour covers a cell and a banner on the planted run's page only.
    assert pixels["normal"] == 0, pixels
    assert pixels["planted"] > 5000, pixels


def test_the_report_opens_with_the_answer_on_the_first_screen(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    report = tmp_path / "normal.html"
    made = subprocess.run(
        [*CLI, "report", str(runs["normal"]), "-o", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    png = tmp_path / "first-screen.png"
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        common = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--window-size=1280,900"]
        subprocess.run(
            [*common, f"--screenshot={png}", report.as_uri()], capture_output=True, timeout=120
        )
    with tempfile.TemporaryDirectory() as profile:
        common = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}"]
        dom = subprocess.run(
            [*common, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120
        ).stdout
    # The first section is the answer: the one speculative config, proven exact, with its tau.
    first = dom.index("<section")
    assert dom[first:].startswith('<section id="answer">') and first < dom.index("<h2")
    answer = dom[first : dom.index("</section>", first)]
    row = answer[answer.index('<td class="deploy">') :]
    assert row.startswith('<td class="deploy">b8 k4 bs8') and ">exact</span>" in row
    assert "Provenance" not in dom[: dom.index('id="summary"')]
    # ... and it is drawn on the first screen: its background covers a band of a 1280 x 900
    # window above the fold (how tall depends on what the run found: a busy host's notes make
    # it taller; pushed below the fold it would cover nothing).
    assert _pixels(png, ANSWER_RGB) > 1280 * 900 // 8, _pixels(png, ANSWER_RGB)
