"""Issue 40 item 16: one exit-code table. Every code is distinct (the bisect's "ends not as
claimed" is not 1, a regression), the docs' table (docs/exit-codes.md) is drawn from it, and the
sweeper names its exit codes from it, never as numbers."""

from __future__ import annotations

import ast
from pathlib import Path

import sweeper.exit_codes as exit_codes
from sweeper.exit_codes import EXIT_CODES, EXIT_ENDS_NOT_AS_CLAIMED, EXIT_REGRESSION, readme_table

ROOT = Path(__file__).resolve().parents[2]


def test_item16_each_named_code_is_one_row_of_its_own() -> None:
    named = {
        k: v for k, v in vars(exit_codes).items() if k.startswith("EXIT_") and isinstance(v, int)
    }
    assert len(set(named.values())) == len(named), named  # no two names share a code
    assert set(named.values()) == set(EXIT_CODES)
    assert EXIT_ENDS_NOT_AS_CLAIMED != EXIT_REGRESSION


def test_item16_the_docs_table_is_drawn_from_the_one_table() -> None:
    page = (ROOT / "docs" / "exit-codes.md").read_text()
    assert readme_table() in page


def _literal_codes(tree: ast.AST) -> list[str]:
    """Exit codes written as numbers: `Exit(3)`, `sys.exit(1)`, `EXIT_X = 3`, `... else 0`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in ("Exit", "SystemExit", "exit") and node.args:
                values = [n for n in ast.walk(node.args[0]) if isinstance(n, ast.Constant)]
                found += [
                    f"line {node.lineno}: {name}({v.value})" for v in values if type(v.value) is int
                ]
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = [t.id for t in targets if isinstance(t, ast.Name) and t.id.startswith("EXIT_")]
            if named and isinstance(node.value, ast.Constant) and type(node.value.value) is int:
                found.append(f"line {node.lineno}: {named[0]} = {node.value.value}")
    return found


def test_item16_exit_codes_are_named_from_the_table_never_numbers() -> None:
    offences = {
        str(path.relative_to(ROOT)): found
        for path in sorted((ROOT / "sweeper").rglob("*.py"))
        if path.name != "exit_codes.py" and (found := _literal_codes(ast.parse(path.read_text())))
    }
    assert offences == {}


def test_a_point_left_pending_by_a_dead_scorer_is_a_failure_not_nothing_proven() -> None:
    """Issue 46 item 6: a scorer that died leaves its point pending, and the run says a server
    failed (3), not that nothing was proven (6)."""
    proven = {"determinism": "exact", "status": "ok"}
    pending = {"determinism": "unproven", "status": "ok", "scored_pending": True}
    assert exit_codes.exit_code_for({"a": pending}) == exit_codes.EXIT_FAILED
    assert exit_codes.exit_code_for({"a": proven, "b": pending}) == exit_codes.EXIT_FAILED
    settled = {**pending, "scored_pending": False}
    assert exit_codes.exit_code_for({"a": settled}) == exit_codes.EXIT_UNPROVEN
