"""The house rules, checked on the real tree: no import cycles (lazy and TYPE_CHECKING imports
count), the controller never imports torch, transformers or the runtime, the runtime never
imports the controller, and no source file over MAX_LINES lines. Planted fixtures show each
check can fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.house.imports import cycles, import_graph, module_names, plant_tree

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sweeper", "ddtree_runtime")
#: A guard against monsters, not a place to cut code (as ../shared's house check has it): at 400
#: five files sat just under it and code was being cut by line count, not by concept.
MAX_LINES = 600
#: What each package must never import (directly, lazily or for type checking).
FORBIDDEN = {
    "sweeper": {"torch", "transformers", "ddtree_runtime"},
    "ddtree_runtime": {"sweeper"},
}


def forbidden_imports(root: Path) -> list[str]:
    graph = import_graph(root, PACKAGES)
    bad = []
    for module in sorted(graph.edges):
        top = module.split(".")[0]
        reached = graph.external[module] | {t.split(".")[0] for t in graph.edges[module]}
        for name in sorted(reached & FORBIDDEN.get(top, set())):
            bad.append(f"{module} imports {name}")
    return bad


def test_no_import_cycles() -> None:
    assert cycles(import_graph(ROOT, PACKAGES).edges) == []


def test_controller_and_runtime_stay_apart() -> None:
    assert forbidden_imports(ROOT) == []


def test_no_source_file_over_the_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in module_names(ROOT, PACKAGES).values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


PLANTED = {
    "sweeper/__init__.py": "",
    "sweeper/a.py": "def f():\n    from sweeper.b import g  # lazy\n    return g\n",
    "sweeper/b.py": (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sweeper import a\n"
        "def g():\n    import torch\n"
    ),
    "sweeper/pkg/__init__.py": "from .mod import x\n",
    "sweeper/pkg/mod.py": "from ..pkg import other\nx = 1\n",
    "sweeper/pkg/other.py": "from . import mod\n",
    "ddtree_runtime/__init__.py": "",
    "ddtree_runtime/engine.py": "import sweeper.a\n",
}


def test_planted_cycles_are_found(tmp_path: Path) -> None:
    graph = import_graph(plant_tree(tmp_path, PLANTED), PACKAGES)
    found = cycles(graph.edges)
    # A lazy import one way and a TYPE_CHECKING import back.
    assert ["sweeper.a", "sweeper.b"] in found
    # Relative imports; `from ..pkg import other` runs pkg/__init__, which imports mod.
    assert ["sweeper.pkg", "sweeper.pkg.mod", "sweeper.pkg.other"] in found
    assert len(found) == 2


def test_planted_forbidden_imports_are_found(tmp_path: Path) -> None:
    assert forbidden_imports(plant_tree(tmp_path, PLANTED)) == [
        "ddtree_runtime.engine imports sweeper",
        "sweeper.b imports torch",
    ]


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"a"}}, [["a"]]),
    ],
)
def test_cycle_finder(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(edges) == expected


def engine_name_branches(root: Path) -> list[str]:
    """`x == "vllm"`-style comparisons with an engine's name outside sweeper/engines/."""
    import ast

    from sweeper.catalog.records import RECORDS

    found = []
    for name, path in module_names(root, ("sweeper",)).items():
        if name.startswith("sweeper.engines"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                names = {s.value for s in sides if isinstance(s, ast.Constant)}
                if names & set(RECORDS):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_nothing_outside_the_engines_branches_on_an_engine_name() -> None:
    assert engine_name_branches(ROOT) == []


def test_a_planted_engine_branch_is_found(tmp_path: Path) -> None:
    planted = {
        "sweeper/__init__.py": "",
        "sweeper/runner.py": "def f(e):\n    return e == 'vllm'\n",
    }
    assert engine_name_branches(plant_tree(tmp_path, planted)) == ["sweeper/runner.py:2"]


def test_every_engine_is_one_record_and_one_class() -> None:
    """The catalog's records are the engines: the names a spec may give, and one registered
    class per record, launched as its record says."""
    from typing import get_args

    from sweeper.catalog.records import RECORDS
    from sweeper.engines.registry import ENGINES
    from sweeper.spec.runtime import EngineName, RuntimeSpec

    assert get_args(EngineName) == tuple(RECORDS)
    assert set(ENGINES) == set(RECORDS)
    for name, record in RECORDS.items():
        runtime = RuntimeSpec.model_validate({"engine": name, **MINIMAL_RUNTIME.get(name, {})})
        engine = ENGINES[name](runtime, None)
        assert (engine.name, engine.launched) == (name, record.launched)


MINIMAL_RUNTIME = {"sglang": {"preset": "sglang-dflash"}, "openai": {"base_url": "http://x:1"}}
