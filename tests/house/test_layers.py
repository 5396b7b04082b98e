"""The layer rule (`tests.house.layers`) on the real tree, and on planted trees that break it."""

from __future__ import annotations

from pathlib import Path

from tests.house.imports import plant_tree
from tests.house.layers import layer_violations

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_points_down_the_layers() -> None:
    assert layer_violations(ROOT) == []


def test_a_planted_upward_import_fails_with_its_edge(tmp_path: Path) -> None:
    root = plant_tree(
        tmp_path,
        {
            "sweeper/__init__.py": "",
            "sweeper/results/__init__.py": "",
            # Lazy and TYPE_CHECKING imports count as much as top-level ones.
            "sweeper/results/store.py": "def f():\n    from sweeper.plan import build\n",
            "sweeper/plan/__init__.py": "",
            "sweeper/plan/build.py": "import sweeper.results.store\n",
            "sweeper/measure/__init__.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from sweeper.analysis import summary\n"
            ),
            "sweeper/analysis/__init__.py": "",
            "sweeper/analysis/summary.py": "",
            "sweeper/garage.py": "",
        },
    )
    assert layer_violations(root) == [
        "sweeper.garage: room 'garage' has no layer (add it to LAYERS)",
        "sweeper.measure imports sweeper.analysis.summary: measure and analysis share a layer",
        "sweeper.measure imports sweeper.analysis: measure and analysis share a layer",
        "sweeper.results.store imports sweeper.plan.build: results may not import plan (above it)",
        "sweeper.results.store imports sweeper.plan: results may not import plan (above it)",
    ]


def test_imports_down_the_layers_pass(tmp_path: Path) -> None:
    root = plant_tree(
        tmp_path,
        {
            "sweeper/__init__.py": "",
            "sweeper/cli.py": "from sweeper.commands import run\n",
            "sweeper/commands/__init__.py": "",
            "sweeper/commands/run.py": "from sweeper import runner\nimport sweeper.results\n",
            "sweeper/runner.py": "from sweeper.results import store\n",
            "sweeper/results/__init__.py": "",
            "sweeper/results/store.py": "",
        },
    )
    assert layer_violations(root) == []
