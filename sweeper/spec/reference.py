"""The spec's `reference:`: published figures a run's acceptance is held against.

A reference table is plain data, one row per (temperature, dataset, method): the speedup and the
mean acceptance length (tau) someone published. `reference: NAME` takes a built-in table
(`sweeper.catalog.reference_sets`: the DDTree paper's, per target model); `reference: {file:
PATH}` reads a user's file of the same shape (relative to the spec); either can set `tolerance`.
Loading (`sweeper.spec.load`) puts the table itself into the resolved spec, so the run's manifest
carries the figures it was judged by.

Tau is a property of the target, the drafter, the tree budget and the data, not of the hardware:
a measured tau more than `tolerance` below the published one is a build problem (a wrong drafter,
a wrong block size, a tree that never branches). Speedups depend on the hardware and are shown
beside the reference, never judged (`sweeper.report.paper_layout`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from sweeper.catalog.reference_sets import REFERENCE_SETS
from sweeper.spec.base import NonEmptyStr, Number, Slug, StrictModel
from sweeper.spec.errors import SpecError, SpecIssue, error_loc, error_message, problem, suggest
from sweeper.spec.yaml_lines import YamlLines
from sweeper.statefile import INPUT, read_state

#: How a speculative config decodes, as the papers' columns name it: one drafted path per step
#: (`chain`: DFlash's own decoding, a top-1 tree) or a tree of several (`tree`: DDTree).
#: `sweeper.report.paper_layout.method_of` derives a config's method from its columns.
Method = Literal["chain", "tree"]
#: A tau more than this share below the reference's is flagged (default).
DEFAULT_TOLERANCE = 0.2


class ReferenceRow(StrictModel):
    """One published cell: speedup over AR and tau, at a temperature, on a dataset."""

    temperature: Annotated[Number, Field(ge=0)]
    #: The dataset's name in the run's records (a recipe's name: gsm8k, math500, mt-bench...).
    dataset: Slug
    method: Method
    speedup: Annotated[Number, Field(gt=0)] | None = None
    #: Mean accepted tokens per verify round, the bonus token included (AR: 1).
    tau: Annotated[Number, Field(ge=1)] | None = None


class ReferenceTable(StrictModel):
    """A published table: where it comes from, for which model and drafter, and its rows."""

    name: Slug
    #: Where the figures come from (paper, table, file and commit), shown beside them.
    source: NonEmptyStr
    model: NonEmptyStr | None = None
    drafter: NonEmptyStr | None = None
    #: The setup the figures were measured under (hardware, dtype, budgets, sample counts).
    setup: str = ""
    #: How the source names each method (`tree: DFlash + DDTree`); the table's column heads.
    methods: dict[Method, NonEmptyStr] = Field(default_factory=dict)
    rows: list[ReferenceRow] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_row_per_cell(self) -> ReferenceTable:
        seen: set[tuple[float, str, str]] = set()
        for index, row in enumerate(self.rows):
            key = (float(row.temperature), row.dataset, row.method)
            if key in seen:
                message = (
                    f"a second row for {row.dataset} {row.method} at temperature "
                    f"{row.temperature:g}"
                )
                raise problem(message, at=("rows", index))
            seen.add(key)
        return self

    def row(self, temperature: float, dataset: str, method: str) -> ReferenceRow | None:
        """The published cell, or None."""
        for row in self.rows:
            if (float(row.temperature), row.dataset, row.method) == (temperature, dataset, method):
                return row
        return None

    @property
    def datasets(self) -> list[str]:
        """Its datasets, in its order."""
        return list(dict.fromkeys(row.dataset for row in self.rows))


class ReferenceSpec(StrictModel):
    """`reference:`: a built-in table by name, or a file; loading fills `table`."""

    builtin: Slug | None = None
    #: A reference table file (YAML, the shape of `ReferenceTable`), relative to the spec.
    file: NonEmptyStr | None = None
    #: The table itself: written inline, or filled in from `builtin` / `file` when loaded.
    table: ReferenceTable | None = None
    #: A measured tau below the reference's by more than this share is flagged.
    tolerance: Annotated[Number, Field(gt=0, lt=1)] = DEFAULT_TOLERANCE

    @model_validator(mode="before")
    @classmethod
    def _name_is_builtin(cls, value: Any) -> Any:
        return {"builtin": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_source(self) -> ReferenceSpec:
        if self.builtin is not None and self.file is not None:
            raise problem("a reference is a built-in table or a file, not both", at=("file",))
        if self.builtin is None and self.file is None and self.table is None:
            raise problem("a reference needs a built-in name, a 'file' or a 'table'")
        return self


def resolve_reference(
    reference: ReferenceSpec, lines: YamlLines, base_dir: Path, datasets: list[str]
) -> ReferenceSpec:
    """`reference` with its table read (a built-in's or the file's, every problem as file:line),
    refused when it names none of `datasets`, those the run's records will name (none: inline
    prompts only, whose rows nothing can be compared with)."""
    at = ("reference", "file" if reference.file is not None else "builtin")
    line, field = lines.locate(at)
    table = reference.table
    if reference.builtin is not None:
        path = REFERENCE_SETS.get(reference.builtin)
        if path is None:
            hint = suggest(reference.builtin, list(REFERENCE_SETS)).removeprefix("unknown key ")
            message = f"unknown reference table {hint}; built in: {', '.join(REFERENCE_SETS)}"
            raise SpecError([SpecIssue(lines.source, line, field, message)])
        table = _read_table(path, lines, line, field)
    elif reference.file is not None:
        table = _read_table(Path(os.path.realpath(base_dir / reference.file)), lines, line, field)
    assert table is not None
    if not set(datasets) & set(table.datasets):
        held = (
            f"({', '.join(datasets)})"
            if datasets
            else "(its prompts name none: inline prompts without 'dataset:')"
        )
        message = (
            f"reference {table.name!r} has none of this workload's datasets {held}, so none of "
            f"its rows can be compared; it has {', '.join(table.datasets)}"
        )
        raise SpecError([SpecIssue(lines.source, line, field, message)])
    return reference.model_copy(update={"table": table})


def _read_table(path: Path, spec: YamlLines, line: int | None, field: str) -> ReferenceTable:
    try:
        text = read_state(path, INPUT).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        message = f"cannot read reference table {str(path)!r}: {reason}"
        raise SpecError([SpecIssue(spec.source, line, field, message)]) from None
    lines = YamlLines.parse(text, str(path))
    try:
        return ReferenceTable.model_validate(lines.data)
    except ValidationError as exc:
        issues = []
        for error in exc.errors():
            where, name = lines.locate(error_loc(error))
            issues.append(SpecIssue(str(path), where, name, error_message(error, ReferenceTable)))
        raise SpecError(issues) from None
