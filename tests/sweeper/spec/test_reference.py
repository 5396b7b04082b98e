"""`reference:`: the built-in tables carry the DDTree paper's figures as published, a user's file
of the same shape is read with file:line errors, and loading puts the table into the resolved
spec (so the manifest carries what a run was judged by)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper.catalog.reference_sets import REFERENCE_SETS
from sweeper.spec import SpecError, parse_spec
from sweeper.spec.reference import ReferenceSpec

#: The issue's table (Qwen3-8B, temperature 0): DFlash -> DFlash + DDTree, speedup / tau, as
#: liranringel/ddtree's src/data/results.tex prints them.
PAPER_QWEN3_8B_T0 = {
    "math500": ((5.56, 7.79), (7.52, 10.73)),
    "gsm8k": ((4.78, 6.57), (6.75, 9.54)),
    "humaneval": ((4.84, 6.61), (6.90, 9.67)),
    "mbpp": ((4.33, 5.99), (6.39, 9.07)),
    "mt-bench": ((2.56, 4.28), (4.10, 6.58)),
    "alpaca": ((2.07, 3.12), (3.36, 5.09)),
}


def _spec(reference: object, suite: str = "mt-bench") -> str:
    body = {
        "name": "r",
        "workload": {"datasets": [{"suite": suite, "sample": 2}]},
        "reference": reference,
    }
    return json.dumps(body)


def test_builtin_tables_hold_the_papers_figures() -> None:
    assert set(REFERENCE_SETS) == {
        "ddtree-paper-qwen3-4b",
        "ddtree-paper-qwen3-8b",
        "ddtree-paper-qwen3-coder-30b-a3b",
    }
    spec = parse_spec(_spec("ddtree-paper-qwen3-8b"))
    assert spec.reference is not None and spec.reference.table is not None
    table = spec.reference.table
    assert table.model == "Qwen/Qwen3-8B" and table.drafter == "z-lab/Qwen3-8B-DFlash-b16"
    assert table.methods == {"chain": "DFlash", "tree": "DFlash + DDTree"}
    assert "results.tex" in table.source
    for dataset, (chain, tree) in PAPER_QWEN3_8B_T0.items():
        for method, (speedup, tau) in (("chain", chain), ("tree", tree)):
            row = table.row(0.0, dataset, method)
            assert row is not None and (row.speedup, row.tau) == (speedup, tau), dataset
    # Both temperatures, ten datasets, two methods.
    assert len(table.rows) == 40 and table.row(1.0, "gsm8k", "tree") is not None
    assert spec.reference.tolerance == 0.2


def test_every_builtin_table_loads() -> None:
    for name in REFERENCE_SETS:
        spec = parse_spec(_spec({"builtin": name, "tolerance": 0.1}))
        assert spec.reference is not None and spec.reference.table is not None
        assert spec.reference.table.name == name and spec.reference.tolerance == 0.1


def test_a_users_file_is_read_relative_to_the_spec(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(
        "name: mine\nsource: measured on our H100s\nmethods: {tree: DDTree b64}\nrows:\n"
        "  - {temperature: 0, dataset: mt-bench, method: tree, tau: 4.1}\n"
    )
    spec = parse_spec(_spec({"file": "mine.yaml"}), base_dir=tmp_path)
    assert spec.reference is not None and spec.reference.table is not None
    assert spec.reference.table.row(0.0, "mt-bench", "tree").tau == 4.1  # type: ignore[union-attr]
    # What the manifest stores validates again as the same reference.
    stored = json.loads(json.dumps(spec.model_dump(mode="json")))["reference"]
    assert ReferenceSpec.model_validate(stored) == spec.reference


def test_a_bad_users_file_is_named_by_its_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: mine\nsource: x\nrows:\n"
        "  - {temperature: 0, dataset: mt-bench, method: tree, tau: 4.1}\n"
        "  - {temperature: 0, dataset: mt-bench, method: tree, tau: 0.5}\n"
    )
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec({"file": "bad.yaml"}), base_dir=tmp_path)
    (issue,) = caught.value.issues
    assert (issue.file, issue.line, issue.field) == (str(bad), 5, "rows[1].tau")
    bad.write_text(bad.read_text().replace("tau: 0.5", "tau: 4.2"))
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec({"file": "bad.yaml"}), base_dir=tmp_path)
    (issue,) = caught.value.issues
    assert issue.line == 5 and "a second row for mt-bench tree at temperature 0" in issue.message


def test_builtin_and_file_together_are_refused() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec({"builtin": "ddtree-paper-qwen3-8b", "file": "x.yaml"}))
    assert "a built-in table or a file, not both" in str(caught.value)


def test_a_table_naming_none_of_the_runs_datasets_is_refused() -> None:
    """Issue 40 #14: with inline prompts only, the check was skipped (no dataset to hold the
    table against) and the reference compared nothing; now it is refused at its line, as with
    datasets, and an inline prompt's own `dataset:` counts."""
    inline = {"name": "r", "workload": {"prompts": [{"id": "a", "text": "hi"}]}}
    for workload, held in (
        (inline["workload"], "(its prompts name none: inline prompts without 'dataset:')"),
        ({"prompts": [{"id": "a", "text": "hi", "dataset": "mine"}]}, "(mine)"),
    ):
        text = json.dumps({**inline, "workload": workload, "reference": "ddtree-paper-qwen3-8b"})
        with pytest.raises(SpecError) as caught:
            parse_spec(text, source="s.yaml")
        (issue,) = caught.value.issues
        assert (issue.line, issue.field) == (1, "reference.builtin")
        assert f"has none of this workload's datasets {held}, so none of its rows" in issue.message
    named = {"prompts": [{"id": "a", "text": "hi", "dataset": "gsm8k"}]}
    spec = parse_spec(
        json.dumps({**inline, "workload": named, "reference": "ddtree-paper-qwen3-8b"})
    )
    assert spec.reference is not None and spec.reference.table is not None
