"""The one YAML reader (`sweeper.spec.yaml_lines`) on hostile text (issue 40 #15): an alias bomb
in a spec or in a reference file is refused in one line, in well under a second, before it is
constructed (`validate` was killed at 100 s); anchors a person reuses still load; nesting too
deep for the parser is one line, never a RecursionError."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.spec import SpecError, parse_spec
from sweeper.spec.yaml_lines import MAX_ALIAS_NODES, YamlLines


def bomb(levels: int = 9, key: str = "x") -> str:
    """`levels` anchors, each a list of ten aliases of the one before: 10^levels leaves."""
    lines = [f"{key}0: &{key}0 [a, a, a, a, a, a, a, a, a, a]"]
    for level in range(1, levels):
        lines.append(
            f"{key}{level}: &{key}{level} [" + ", ".join([f"*{key}{level - 1}"] * 10) + "]"
        )
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_in_a_spec_is_one_line_at_once(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: t\n" + bomb() + "workload:\n  prompts: [{id: a, text: hi}]\n")
    started = time.monotonic()
    done = CliRunner().invoke(app, ["validate", str(spec)])
    assert time.monotonic() - started < 5
    assert done.exit_code == 2, done.output
    assert done.output.strip() == (
        f"{spec}:10: aliases expand this file by 1,234,567,880 nodes, more than the 100,000 "
        "allowed (an alias bomb?): write the values out, or reuse fewer"
    )


def test_an_alias_bomb_in_a_reference_file_names_that_file(tmp_path: Path) -> None:
    (tmp_path / "ref.yaml").write_text("name: r\nsource: s\nrows: []\n" + bomb(key="r"))
    text = (
        "name: t\nworkload:\n  datasets: [{suite: mt-bench, sample: 2}]\n"
        "reference: {file: ref.yaml}\n"
    )
    started = time.monotonic()
    with pytest.raises(SpecError) as refused:
        parse_spec(text, source="s.yaml", base_dir=tmp_path)
    assert time.monotonic() - started < 5
    (issue,) = refused.value.issues
    assert issue.file.endswith("ref.yaml") and "an alias bomb?" in issue.message


def test_anchors_within_the_limit_load_and_one_more_node_is_refused() -> None:
    reused = "env: &env {A: '1', B: '2'}\nhosts: [*env, *env, *env]\n"
    assert YamlLines.parse(reused, "s").data["hosts"][2] == {"A": "1", "B": "2"}
    # Each alias of a list of 999 leaves adds its 1,000 nodes: 100 aliases add 100,000.
    at_limit = f"a: &a [{', '.join(['x'] * 999)}]\nb: [{', '.join(['*a'] * 100)}]\n"
    assert len(YamlLines.parse(at_limit, "s").data["b"]) == 100
    over = at_limit.replace("*a]", "*a, *a]")
    with pytest.raises(SpecError, match=f"more than the {MAX_ALIAS_NODES:,} allowed"):
        YamlLines.parse(over, "s")


def test_nesting_too_deep_is_one_line() -> None:
    with pytest.raises(SpecError, match="nested too deeply"):
        YamlLines.parse("x: " + "[" * 600 + "]" * 600 + "\n", "s")
