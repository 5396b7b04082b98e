"""The papers' named recipes: sources, titles and labels; the paper's `shuffle(seed=0)` selection
(datasets' own for hub data, numpy's identical permutation for suite and file items, held equal
here); templates applied; `limit` overriding the count; Spec-Bench from a file."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from sweeper.spec import SpecError, parse_spec
from sweeper.spec.dataset_load import paper_order
from sweeper.spec.recipes import RECIPES
from sweeper.spec.suites import suite_items
from tests.sweeper.spec.test_hub import gsm_clone, offline  # noqa: F401 (a fixture)

TITLES = {
    "gsm8k": "GSM8K",
    "math500": "MATH-500",
    "mbpp": "MBPP",
    "alpaca": "Alpaca",
    "humaneval": "HumanEval",
    "mt-bench": "MT-Bench",
    "spec-bench": "Spec-Bench",
}


def _spec(entries: list[dict], **workload: object) -> str:
    return json.dumps({"name": "r", "workload": {"api": "chat", **workload, "datasets": entries}})


def test_recipes_are_the_papers_sets_with_their_titles_and_counts() -> None:
    assert {name: r.title for name, r in RECIPES.items()} == TITLES
    counts = {name: r.count for name, r in RECIPES.items()}
    assert counts == {
        "gsm8k": 128,
        "math500": 128,
        "mbpp": 128,
        "alpaca": 128,
        "humaneval": 164,
        "mt-bench": 80,
        "spec-bench": 480,
    }
    assert RECIPES["gsm8k"].hf == "openai/gsm8k" and RECIPES["gsm8k"].config == "main"
    assert RECIPES["mbpp"].config == "sanitized" and RECIPES["alpaca"].split == "train"
    assert all(r.licence and r.origin for r in RECIPES.values())
    assert [bool(r.hf) + bool(r.suite) for r in RECIPES.values()] == [1] * 6 + [0]


@pytest.mark.parametrize("n", [1, 7, 80, 164, 500])
def test_the_numpy_permutation_is_datasets_own_shuffle(n: int) -> None:
    rows = datasets.Dataset.from_dict({"i": list(range(n))})
    assert rows.shuffle(seed=0)["i"] == paper_order(n)


def test_a_hub_recipe_selects_as_the_paper_and_applies_its_template(
    tmp_path: Path,
    offline: Path,  # noqa: F811
) -> None:
    gsm_clone(tmp_path / "gsm8k", n=300)
    spec = parse_spec(_spec([{"recipe": "gsm8k", "hf": "gsm8k"}]), base_dir=tmp_path)
    paper = datasets.load_dataset(str(tmp_path / "gsm8k"), "main", split="test")
    paper = paper.shuffle(seed=0).select(range(128))
    template = RECIPES["gsm8k"].template[0]
    expected = [template.format(**row) for row in paper]
    prompts = spec.workload.prompts
    assert [p.text for p in prompts] == expected and len(prompts) == 128
    assert expected[0].endswith(
        "\nPlease reason step by step, and put your final answer within \\boxed{}."
    )
    assert {p.dataset for p in prompts} == {"gsm8k"}
    (dataset,) = spec.workload.datasets
    assert (dataset.config, dataset.split, dataset.limit, dataset.recipe) == (
        "main",
        "test",
        128,
        "gsm8k",
    )
    # limit overrides the count: the same selection's first 5 (and the same prompt ids).
    five = parse_spec(_spec([{"recipe": "gsm8k", "hf": "gsm8k", "limit": 5}]), base_dir=tmp_path)
    assert [p.id for p in five.workload.prompts] == [p.id for p in prompts[:5]]


def test_suite_recipes_apply_the_template_and_the_papers_selection() -> None:
    humaneval = parse_spec(_spec([{"recipe": "humaneval"}])).workload.prompts
    stubs = suite_items("humaneval")
    assert len(humaneval) == 164  # the whole set: the paper's 164, no shuffle
    assert humaneval[0].text == (
        "Write a solution to the following problem and make sure that it passes the tests:\n"
        f"```python\n{stubs[0].turns[0]}\n```"
    )
    ten = parse_spec(_spec([{"recipe": "humaneval", "limit": 10}])).workload.prompts
    order = datasets.Dataset.from_dict({"i": list(range(164))}).shuffle(seed=0)["i"][:10]
    assert [p.id for p in ten] == [f"humaneval-{stubs[i].id}" for i in order]
    mt_bench = parse_spec(_spec([{"recipe": "mt-bench"}])).workload.prompts
    assert len(mt_bench) == 160 and {p.turn for p in mt_bench} == {1, 2}


def test_alpaca_template_takes_the_input_block_only_when_there_is_an_input(
    tmp_path: Path,
    offline: Path,  # noqa: F811
) -> None:
    root = tmp_path / "alpaca"
    root.mkdir()
    rows = [
        {"instruction": "Sort these.", "input": "3 1 2", "output": ""},
        {"instruction": "Say hi.", "input": "", "output": ""},
    ]
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    prompts = parse_spec(_spec([{"recipe": "alpaca", "hf": "alpaca"}]), base_dir=tmp_path)
    texts = [p.text for p in prompts.workload.prompts]
    assert texts == ["Sort these.\n\nInput:\n3 1 2", "Say hi."]


def test_spec_bench_needs_its_file_and_reads_mt_bench_layout(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="Spec-Bench is not on the Hugging Face hub"):
        parse_spec(_spec([{"recipe": "spec-bench"}]))
    categories = ["mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"]
    rows = [
        {"question_id": i, "category": categories[i % 6], "turns": [f"question {i}"]}
        for i in range(12)
    ]
    (tmp_path / "question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    entry = {"recipe": "spec-bench", "file": "question.jsonl", "sample": 6}
    prompts = parse_spec(_spec([entry]), base_dir=tmp_path).workload.prompts
    assert len(prompts) == 6 and {p.dataset for p in prompts} == {"spec-bench"}
    assert len({p.category for p in prompts}) == 6  # stratified: one per category


def test_an_unknown_recipe_and_a_template_that_is_not_plain_are_refused() -> None:
    with pytest.raises(SpecError, match="unknown recipe 'gsm8l' .did you mean 'gsm8k'.."):
        parse_spec(_spec([{"recipe": "gsm8l"}]))
    for bad in ("{a.b}", "{a[0]}", "{}", "{0}", "{a!r}"):
        with pytest.raises(SpecError, match="is not a plain column name"):
            parse_spec(_spec([{"hf": "openai/gsm8k", "template": bad}]))
