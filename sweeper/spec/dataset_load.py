"""Expanding the workload's `datasets:` into prompts: read, sample, and turn items into prompts.

- Sampling (`sample_items`) is deterministic: the workload's seed (0 when unset) and the
  dataset's name seed one generator; with categories, each gets its share of `sample`
  (largest remainders, ties in the generator's order) and its items are drawn within it; the
  drawn items keep their order in the dataset.
- An item of k user turns becomes k prompts, `<name>-<id>-t1` ... `-tk` (an item of one turn
  is `<name>-<id>`); turn j's messages hold the earlier turns with empty assistant messages that
  `answers_from` fills with the AR baseline's answers at run time (`sweeper.measure.inputs`).
- Synthetic prompts get their input and output lengths drawn here, from the same seed; their
  token ids come from the served tokenizer at run time.
- `limit: N` comes before `sample`: a recipe's N are the paper's `shuffle(seed=0)` then the first
  N (datasets' own `Dataset.shuffle` for `hf:` data; for suite and file items the same
  permutation, numpy's `default_rng(0).permutation`, which is what datasets' shuffle draws),
  only when there are more than N; any other dataset's are its first N. An `hf:` dataset's
  `revision` becomes the one read (`sweeper.spec.hub`), so the resolved spec pins it.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sweeper.spec.dataset_files import FileProblem, Item, ItemProblem, read_items, row_item
from sweeper.spec.datasets import DatasetSpec, LengthSpec, SyntheticSpec, template_columns
from sweeper.spec.errors import SpecIssue, error_loc, error_message, suggest
from sweeper.spec.recipes import PAPER_SEED
from sweeper.spec.suites import SUITES, SuiteMissing, suite_items
from sweeper.spec.workload import Message, PromptSpec, WorkloadSpec
from sweeper.spec.yaml_lines import YamlLines


def dataset_prompts(
    workload: WorkloadSpec,
    lines: YamlLines,
    base_dir: Path,
    max_model_len: int | None = None,
    resolved: list[DatasetSpec] | None = None,
) -> tuple[list[PromptSpec], list[SpecIssue]]:
    """Every dataset's prompts, in order, and every problem found (spec or dataset file:line).
    `resolved`, when given, receives each dataset as read (an `hf:` one with its revision)."""
    seed = workload.seed if workload.seed is not None else 0
    prompts: list[PromptSpec] = []
    issues: list[SpecIssue] = []
    if resolved is not None:
        resolved[:] = list(workload.datasets)

    def at(index: int, *rest: str | int) -> tuple[int | None, str]:
        return lines.locate(("workload", "datasets", index, *rest))

    for index, dataset in enumerate(workload.datasets):
        label = dataset.label
        if dataset.synthetic is not None:
            asked = dataset.synthetic.output_tokens
            if asked is not None and (asked.largest or 0) > workload.max_tokens:
                line, field = at(index, "synthetic", "output_tokens")
                message = (
                    f"output lengths up to {asked.largest} above workload.max_tokens "
                    f"({workload.max_tokens}), which bounds every answer: raise max_tokens or "
                    "lower the output lengths"
                )
                issues.append(SpecIssue(lines.source, line, field, message))
                continue
            prompts += synthetic_prompts(dataset.synthetic, label, seed, workload.max_tokens)
            largest = _largest(dataset.synthetic, workload.max_tokens)
            if max_model_len is not None and largest is not None and largest > max_model_len:
                line, field = at(index, "synthetic")
                message = (
                    f"up to {largest} tokens in and out, above runtime.max_model_len "
                    f"({max_model_len})"
                )
                issues.append(SpecIssue(lines.source, line, field, message))
            continue
        items: list[Item] = []
        rows_at = lines.source  # where a row's problem is said: the file, the hub rows
        if dataset.suite is not None:
            try:
                items = [
                    Item(s.id, s.category, s.turns[: dataset.turns or len(s.turns)])
                    for s in suite_items(dataset.suite)
                ]
            except KeyError:
                line, field = at(index, "suite")
                hint = suggest(dataset.suite, list(SUITES)).removeprefix("unknown key ")
                message = f"unknown suite {hint}; built in: {', '.join(SUITES)}"
                issues.append(SpecIssue(lines.source, line, field, message))
                continue
            except SuiteMissing as missing:
                line, field = at(index, "suite")
                issues.append(SpecIssue(lines.source, line, field, str(missing)))
                continue
            if dataset.template:
                try:
                    items = [_templated(item, dataset.template) for item in items]
                except ItemProblem as bad:
                    line, field = at(index, "template")
                    issues.append(SpecIssue(lines.source, line, field, bad.message))
                    continue
            items = limited(items, dataset)
        elif dataset.hf is not None:
            from sweeper.spec.hub import HubProblem, load_hub
            from sweeper.spec.hub_checks import row_problems, settings_problems

            try:
                hub = load_hub(dataset, base_dir, _hub_selection(dataset))
            except HubProblem as bad:
                line, field = at(index, bad.field if bad.field in _given(dataset) else "hf")
                issues.append(SpecIssue(lines.source, line, field, bad.message))
                continue
            absent = [
                c
                for t in dataset.template or []
                for c in template_columns(t)
                if c not in hub.columns
            ]
            if absent:
                line, field = at(index, "template")
                message = (
                    f"template column {absent[0]!r} is not a column of {hub.where} "
                    f"(columns: {', '.join(hub.columns)})"
                )
                issues.append(SpecIssue(lines.source, line, field, message))
                continue
            wrong = settings_problems(dataset, hub)
            for key, message in wrong:
                line, field = at(index, _key_as_written(lines, index, key))
                issues.append(SpecIssue(lines.source, line, field, message))
            if wrong:
                continue
            if resolved is not None:
                resolved[index] = dataset.model_copy(
                    update={"revision": hub.revision, "split": hub.split}
                )
            bad_rows = []
            for row_number, row in hub.rows:
                try:
                    items.append(row_item(row, dataset, row_number, row_number + 1))
                except ItemProblem as bad:
                    bad_rows.append(
                        SpecIssue(f"{hub.where} row", row_number + 1, bad.field, bad.message)
                    )
            issues += row_problems(bad_rows)
            if not hub.rows:
                line, field = at(index, "hf")
                issues.append(SpecIssue(lines.source, line, field, f"{hub.where} holds no rows"))
            rows_at = f"{hub.where} row"
        else:
            assert dataset.file is not None
            # realpath, not resolve: a symlink loop is then the read's ELOOP, one line below.
            path = Path(os.path.realpath(base_dir / dataset.file))
            rows_at = str(path)
            try:
                items, problems = read_items(path, dataset)
            except FileProblem as bad:
                issues.append(SpecIssue(str(path), bad.line, "", bad.message))
                continue
            except (OSError, UnicodeDecodeError, ValueError, KeyError) as exc:
                line, field = at(index, "file")
                reason = getattr(exc, "strerror", None) or str(exc)
                message = f"cannot read dataset {str(path)!r}: {reason}"
                issues.append(SpecIssue(lines.source, line, field, message))
                continue
            issues += _one_template_problem(problems)
            items = limited(items, dataset)
        if dataset.sample is not None:
            items = sample_items(items, dataset.sample, seed, label)
        for item in items:
            try:
                prompts += item_prompts(item, dataset, label, chat=workload.api == "chat")
            except ValidationError as exc:  # a row that is no prompt: its file and line
                where = rows_at
                for error in exc.errors():
                    field = ".".join(str(part) for part in error_loc(error))
                    message = error_message(error, PromptSpec)
                    issues.append(SpecIssue(where, item.line, field, message))
                break
            except ValueError as exc:
                line, field = at(index)
                issues.append(SpecIssue(lines.source, line, field, str(exc)))
                break
    return prompts, issues


def _key_as_written(lines: YamlLines, index: int, key: str) -> str:
    """`field` as the entry spells it (`field` or `prompt_field`); any other key as is."""
    if key != "field":
        return key
    try:
        entry = lines.data["workload"]["datasets"][index]
    except (KeyError, IndexError, TypeError):
        return key
    return "prompt_field" if isinstance(entry, dict) and "prompt_field" in entry else key


def _given(dataset: DatasetSpec) -> set[str]:
    """The keys of a dataset entry that a problem may point at (the rest: at `hf`)."""
    return {k for k in ("hf", "split", "config", "revision", "template") if getattr(dataset, k)}


def paper_order(n: int) -> list[int]:
    """The order of datasets' `Dataset.shuffle(seed=0)` over n rows: it selects
    `np.random.default_rng(seed).permutation(n)` (datasets/arrow_dataset.py `shuffle`; a test
    holds the two equal)."""
    import numpy as np

    return [int(i) for i in np.random.default_rng(PAPER_SEED).permutation(n)]


def limited(items: list[Item], dataset: DatasetSpec) -> list[Item]:
    """The items `limit` keeps (see the module docstring)."""
    n = dataset.limit
    if n is None or len(items) <= n:
        return items
    if dataset.recipe is None:
        return items[:n]
    return [items[i] for i in paper_order(len(items))[:n]]


def _hub_selection(dataset: DatasetSpec) -> Any:
    """`limit` on an `hf:` dataset, with datasets' own methods (see the module docstring)."""
    n = dataset.limit
    if n is None:
        return None

    def select(data: Any) -> Any:
        if len(data) <= n:
            return data
        if dataset.recipe is None:
            return data.select(range(n))
        return data.shuffle(seed=PAPER_SEED, keep_in_memory=True).select(range(n))

    return select


def _templated(item: Item, templates: list[str]) -> Item:
    """A suite item's turns through the template: each turn is the column `prompt`, with the
    item's `id` and `category`."""
    from sweeper.spec.dataset_files import render

    turns = tuple(
        render(templates, {"prompt": turn, "id": item.id, "category": item.category or ""})
        for turn in item.turns
    )
    return Item(item.id, item.category, turns, item.messages, item.system, item.line)


def _one_template_problem(problems: list[SpecIssue]) -> list[SpecIssue]:
    """A template naming a column the file lacks fails every row alike: say it once."""
    template = [p for p in problems if p.field == "template"]
    if len(template) <= 1:
        return problems
    first = template[0]
    said = first._replace(message=f"{first.message} (and {len(template) - 1} more rows)")
    return [p for p in problems if p.field != "template"] + [said]


def sample_items(items: Sequence[Item], n: int, seed: int, name: str) -> list[Item]:
    """`n` of the items, stratified by category (see the module docstring)."""
    if n >= len(items):
        return list(items)
    rng = random.Random(f"{seed}:{name}")
    groups: dict[str | None, list[int]] = {}
    for position, item in enumerate(items):
        groups.setdefault(item.category, []).append(position)
    order = list(groups)
    rng.shuffle(order)  # breaks ties between equal remainders without favouring a name
    shares = {c: n * len(groups[c]) / len(items) for c in order}
    quota = {c: int(shares[c]) for c in order}
    left = n - sum(quota.values())
    for category in sorted(order, key=lambda c: quota[c] - shares[c])[:left]:
        quota[category] += 1
    chosen = [p for c in order for p in rng.sample(groups[c], quota[c])]
    return [items[p] for p in sorted(chosen)]


def item_prompts(item: Item, dataset: DatasetSpec, label: str, *, chat: bool) -> list[PromptSpec]:
    """The prompts of one item, one per turn (see the module docstring)."""
    base = f"{label}-{_slug(item.id)}"
    common: dict[str, Any] = {
        "dataset": label,
        "category": item.category,
        "hold_output": dataset.hold_output,
    }
    if item.messages:
        if not chat:
            raise ValueError("chat messages need api: chat (completions takes text)")
        users = sum(m.role == "user" for m in item.messages)
        return [PromptSpec(id=base, messages=list(item.messages), turn=users, **common)]
    multi = len(item.turns) > 1
    if multi and not chat:
        message = f"{label} has {len(item.turns)} turns: a later turn needs api: chat (or turns: 1)"
        raise ValueError(message)
    prompts: list[PromptSpec] = []
    history: list[Message] = [Message(role="system", content=item.system)] if item.system else []
    for turn, text in enumerate(item.turns, start=1):
        prompt_id = f"{base}-t{turn}" if multi else base
        if history:
            messages = [*history, Message(role="user", content=text)]
            earlier = [p.id for p in prompts]
            prompts.append(
                PromptSpec(
                    id=prompt_id, messages=messages, answers_from=earlier, turn=turn, **common
                )
            )
        else:
            prompts.append(PromptSpec(id=prompt_id, text=text, turn=turn, **common))
        history += [Message(role="user", content=text), Message(role="assistant", content="")]
    return prompts


def synthetic_prompts(
    synthetic: SyntheticSpec, label: str, seed: int, max_tokens: int
) -> list[PromptSpec]:
    """`count` prompts of drawn input lengths, each answer held at its drawn output length
    (`max_tokens` only bounds what the spec can ask of the model)."""
    rng = random.Random(f"{seed}:{label}")
    output = synthetic.output_tokens
    return [
        PromptSpec(
            id=f"{label}-{i}",
            tokens=draw(synthetic.input_tokens, rng),
            # Without its own output lengths, the point's max_tokens, held; a normal's tail
            # is cut at max_tokens, which bounds every answer (and is what is recorded).
            max_tokens=min(draw(output, rng), max_tokens) if output is not None else None,
            hold_output=True,
            dataset=label,
            turn=1,
        )
        for i in range(synthetic.count)
    ]


def draw(length: LengthSpec, rng: random.Random) -> int:
    """One token count from the distribution."""
    if length.dist == "fixed":
        assert length.tokens is not None
        return length.tokens
    if length.dist == "uniform":
        assert length.min is not None and length.max is not None
        return rng.randint(length.min, length.max)
    assert length.mean is not None and length.std is not None
    value = round(rng.gauss(length.mean, length.std))
    return max(length.min or 1, min(value, length.max or value))


def _largest(synthetic: SyntheticSpec, max_tokens: int) -> int | None:
    out = synthetic.output_tokens.largest if synthetic.output_tokens else max_tokens
    largest_in = synthetic.input_tokens.largest
    return None if largest_in is None or out is None else largest_in + out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


def dataset_sources(workload: WorkloadSpec, base_dir: Path) -> list[dict[str, Any]]:
    """Per dataset of a loaded workload: its label, title (a recipe's), source (`hf:ID@rev`,
    `suite:NAME (package==version)`, `file:PATH`, `synthetic`), items, prompts and licence."""
    from sweeper.spec.hub import card_licence
    from sweeper.spec.recipes import RECIPES

    out = []
    for dataset in workload.datasets:
        label = dataset.label
        mine = [p for p in workload.prompts if p.dataset == label]
        recipe = RECIPES.get(dataset.recipe or "")
        licence = recipe.licence if recipe else None
        if dataset.hf is not None:
            source = f"hf:{dataset.hf}@{dataset.revision or 'unresolved'}"
            local = base_dir / dataset.hf
            if licence is None and local.is_dir():
                licence = card_licence(local)
        elif dataset.suite is not None:
            suite = SUITES.get(dataset.suite)
            source = f"suite:{dataset.suite}"
            if suite is not None:
                source += f" ({suite.package}=={suite.version})"
                licence = licence or suite.licence
        elif dataset.file is not None:
            source = f"file:{dataset.file}"
        else:
            source, licence = "synthetic", licence or "n/a (generated)"
        out.append(
            {
                "dataset": label,
                "title": recipe.title if recipe else None,
                "source": source,
                "items": sum(1 for p in mine if not p.answers_from),
                "prompts": len(mine),
                "licence": licence or "unknown: see the dataset's card",
            }
        )
    return out
