"""Which tests need root without the host fixtures, read from their source (ast), and whether they
carry the `root` marker.

Tests using the host-booting fixtures are marked by tests/root_marker.py at collection. The rest
need root when they (or a fixture of their own module, however deep) call one of `ROOT_CALLS`:
boot hosts themselves, ask why hosts cannot be built, or check for root. Such a test must carry
`pytest.mark.root`: on itself, its class, its parameters, or the module's `pytestmark`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

#: Calls that only a root-only test makes (tests/testhosts.py, tests/testhost_cluster.py,
#: tests/slurm_cluster.py, tests/sweeper/measure/cpu_limit.py, os.geteuid).
ROOT_CALLS = frozenset(
    {
        "accounting_cluster",
        "accounting_skip_reason",
        "boot",
        "boot_cluster",
        "boot_free",
        "boot_slurm_cluster",
        "geteuid",
        "skip_reason",
        "why_no_cpu_limit",
    }
)

#: Tests that make a root call yet run anywhere, each with why.
NOT_ROOT = {
    # Reads the reason text under a monkeypatched geteuid; boots nothing.
    "tests/test_testhosts.py::test_skip_reason_names_what_is_missing",
}


def _calls_root(nodes: list[ast.AST]) -> bool:
    for node in nodes:
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in ROOT_CALLS:
                return True
    return False


def _marks_root(nodes: list[ast.expr]) -> bool:
    """True when any of the expressions (decorators, a pytestmark value) names pytest.mark.root."""
    return any(
        isinstance(n, ast.Attribute) and n.attr == "root" and ast.unparse(n.value).endswith("mark")
        for node in nodes
        for n in ast.walk(node)
    )


def _functions(tree: ast.Module) -> Iterator[tuple[ast.FunctionDef, list[ast.expr]]]:
    """Module-level functions and methods of classes, each with its class's decorators."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node, []
        elif isinstance(node, ast.ClassDef):
            for inner in node.body:
                if isinstance(inner, ast.FunctionDef):
                    yield inner, node.decorator_list


def _is_fixture(fn: ast.FunctionDef) -> bool:
    return any("fixture" in ast.unparse(d) for d in fn.decorator_list)


def unmarked_in_module(path: Path, name: str) -> list[str]:
    """`name::test` for each test of the module that needs root by its source and is unmarked."""
    tree = ast.parse(path.read_text(), str(path))
    pytestmark: list[ast.expr] = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
    ]
    module_marked = _marks_root(pytestmark)
    module_needs = _calls_root(list(pytestmark))
    fixtures = {fn.name: fn for fn, _ in _functions(tree) if _is_fixture(fn)}

    def needs(fn: ast.FunctionDef, seen: frozenset[str]) -> bool:
        if _calls_root([*fn.decorator_list, *fn.body]):
            return True
        params = [a.arg for a in fn.args.args]
        return any(
            needs(fixtures[p], seen | {p}) for p in params if p in fixtures and p not in seen
        )

    found = []
    for fn, class_decorators in _functions(tree):
        if not fn.name.startswith("test") or f"{name}::{fn.name}" in NOT_ROOT:
            continue
        if not (module_needs or needs(fn, frozenset())):
            continue
        if not (module_marked or _marks_root([*class_decorators, *fn.decorator_list])):
            found.append(f"{name}::{fn.name}")
    return found


def unmarked_root_tests(root: Path) -> list[str]:
    """Every test under root/tests that needs root by its source and lacks the marker."""
    found = []
    for path in sorted((root / "tests").rglob("test_*.py")):
        found += unmarked_in_module(path, path.relative_to(root).as_posix())
    return found
