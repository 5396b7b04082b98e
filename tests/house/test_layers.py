"""The layer table (`tests.house.layers`) on the real tree, on planted trees that break it, and
in the drawing of docs/development.md."""

from __future__ import annotations

from pathlib import Path

from tests.house.imports import plant_tree
from tests.house.layers import MAY_IMPORT, drawing, layer_order, layer_violations

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_is_one_the_table_allows() -> None:
    assert layer_violations(ROOT) == []


def test_the_table_has_no_loop_so_rooms_stand_in_layers() -> None:
    order = layer_order()
    assert sorted(order) == sorted(MAY_IMPORT)
    for room, (allowed, _what) in MAY_IMPORT.items():
        assert all(order.index(other) < order.index(room) for other in allowed), room


def test_the_docs_draw_the_table() -> None:
    page = (ROOT / "docs" / "development.md").read_text()
    start = page.index("<!-- layers: generated from tests/house/layers.py (drawing) -->\n")
    end = page.index("<!-- /layers -->", start)
    assert page[start:end].split("\n", 1)[1].rstrip() == drawing()


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    rooms = {"analysis", "engines", "measure", "results", "plan", "config"}
    base = {"sweeper/__init__.py": "", **{f"sweeper/{r}/__init__.py": "" for r in rooms}}
    return plant_tree(tmp_path, {**base, **files})


def test_an_import_an_order_would_allow_fails_with_its_edge(tmp_path: Path) -> None:
    # The layer list before the table put engines below analysis, so that order allowed this
    # import; the table does not: analysis judges records and reads only config, results, spec.
    root = _tree(
        tmp_path,
        {
            "sweeper/analysis/best.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from sweeper.engines.base import Engine\n"
            ),
            "sweeper/engines/base.py": "",
            "sweeper/config/labels.py": "",
        },
    )
    assert layer_violations(root) == [
        "sweeper.analysis.best imports sweeper.engines.base: analysis may not import engines "
        "(analysis may import config, proof, results, spec)",
    ]


def test_upward_imports_faces_and_unknown_rooms_fail(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            # Lazy imports count as much as top-level ones.
            "sweeper/results/store.py": "def f():\n    from sweeper.plan import build\n",
            "sweeper/plan/build.py": "import sweeper.config\n",
            "sweeper/measure/point.py": "from sweeper.engines.common import openai_body\n",
            "sweeper/engines/common.py": "openai_body = None\n",
            "sweeper/garage.py": "",
        },
    )
    assert layer_violations(root) == [
        "sweeper.garage: room 'garage' is not in the table (add it to MAY_IMPORT)",
        "sweeper.measure.point imports sweeper.engines.common: behind the engines room's face "
        "(sweeper.engines, sweeper.engines.base, sweeper.engines.capabilities, "
        "sweeper.engines.launch, sweeper.engines.registry, sweeper.engines.stream)",
        "sweeper.results.store imports sweeper.plan.build: results may not import plan "
        "(results may import config, statefile)",
        "sweeper.results.store imports sweeper.plan: results may not import plan "
        "(results may import config, statefile)",
    ]


def test_imports_the_table_allows_pass(tmp_path: Path) -> None:
    root = plant_tree(
        tmp_path,
        {
            "sweeper/__init__.py": "",
            "sweeper/cli.py": "from sweeper.commands import run\n",
            "sweeper/commands/__init__.py": "",
            "sweeper/commands/run.py": "from sweeper import runner\nimport sweeper.results\n",
            "sweeper/runner.py": "from sweeper.results import store\n",
            "sweeper/results/__init__.py": "",
            "sweeper/results/store.py": "from sweeper.config import labels\n",
            "sweeper/config/__init__.py": "",
            "sweeper/config/labels.py": "",
        },
    )
    assert layer_violations(root) == []


def test_the_statistics_room_imports_only_numpy_and_the_stdlib(tmp_path: Path) -> None:
    root = plant_tree(
        tmp_path,
        {
            "sweeper/__init__.py": "",
            "sweeper/config/__init__.py": "",
            "sweeper/stats/__init__.py": "",
            "sweeper/stats/fine.py": (
                "from __future__ import annotations\nimport math\nfrom statistics import "
                "NormalDist\nimport numpy as np\n"
            ),
            # A lazy import counts; pandas is no statistics dependency, a room none at all.
            "sweeper/stats/frame.py": "def f():\n    import pandas\n    import sweeper.config\n",
        },
    )
    assert layer_violations(root) == [
        "sweeper.stats.frame imports pandas: stats may import only numpy and the standard "
        "library from outside sweeper",
        "sweeper.stats.frame imports sweeper.config: stats may not import config "
        "(stats may import nothing)",
    ]
