"""The papers' layout: rows are datasets, columns are methods, each cell `speedup / tau`.

Speculative-decoding papers print one table per target model: a row per dataset (per temperature
block), a column per method (DFlash, DFlash + DDTree), each cell the speedup over AR and the mean
acceptance length tau. `paper_table` lays a run's dataset points (`sweeper.analysis.datasets`)
out the same way:

- columns `by="method"`: AR, `chain` (one drafted path per step: DFlash's decoding, a top-1 tree,
  n-gram) and `tree` (several children per node: DDTree); each cell is the method's config with
  the best speedup on that dataset, as the DDTree paper's entry is its best node budget, and
  names it. `by="config"`: AR and one column per speculative config.
- restarts (`repeats.restarts`): each cell is the mean over the config's restarts with its 95%
  interval (`objective.Interval`); a restart's speedup divides by the AR restarts' mean rate.
- a speedup that is no result (`objective.withheld_speedup`: measured on a busy host, or
  impossible, above its own tau: `sweeper.analysis.impossible`, per dataset point) is never a
  method's best while another config has one; a cell showing one says so (`withheld`).
- a reference (`spec.reference`) puts the published speedup and tau beside each cell of its
  method, and flags a tau more than the tolerance below the published one: even the top of the
  interval, where there are restarts. Speedups are never flagged: they depend on the hardware.

Pure: frames and spec values in, a `PaperTable` out; the report and `sweeper report --table
paper` render it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd
from pydantic import ValidationError

from sweeper.analysis.impossible import mark_impossible
from sweeper.analysis.objective import Interval, withheld_speedup
from sweeper.config.columns import is_missing
from sweeper.config.labels import first_restart_label, load_label, point_label
from sweeper.spec.recipes import RECIPES
from sweeper.spec.reference import ReferenceRow, ReferenceSpec

#: The methods, in column order, and how a column reads without a reference naming them.
METHOD_TITLES = {"ar": "AR", "chain": "chain", "tree": "tree"}
By = Literal["method", "config"]


def method_of(row: Mapping[str, Any]) -> str:
    """`ar`, `tree` (a config drafting more than one child per node) or `chain` (one drafted path
    per step: top-1 trees, DFlash's own decoding, engines without a topk)."""
    if row.get("mode") == "ar":
        return "ar"
    topk: Any = row.get("topk")
    return "tree" if not is_missing(topk) and int(topk) > 1 else "chain"


@dataclass(frozen=True)
class PaperCell:
    """One method (or config) on one dataset: what it measured, beside what was published."""

    #: The config shown (spoken: `b16 k4 bs8`), the best of its method with `by="method"`.
    config: str
    method: str
    speedup: Interval | None
    tau: Interval | None
    reference: ReferenceRow | None = None
    #: The measured tau lies more than the tolerance below the reference's.
    tau_low: bool = False
    #: Why its speedup is no result ("" when it is one): busy, or impossible (above its tau).
    withheld: str = ""


@dataclass(frozen=True)
class PaperRow:
    """One dataset at one temperature (and host / load, when the run has several)."""

    temperature: float
    dataset: str
    group: tuple[str, ...]
    cells: dict[str, PaperCell]

    @property
    def title(self) -> str:
        """The dataset as the papers print it (a recipe's title: GSM8K, MT-Bench), else its
        name."""
        recipe = RECIPES.get(self.dataset)
        return recipe.title if recipe is not None else self.dataset


@dataclass(frozen=True)
class PaperTable:
    """The table: its columns (methods or config labels) with their heads, rows, and flags."""

    by: By
    columns: list[str]
    titles: dict[str, str]
    #: Heads of the row groups beyond temperature and dataset (`host`, `load`), when several.
    group_heads: list[str]
    rows: list[PaperRow]
    reference: ReferenceSpec | None = None
    #: One line per flagged cell.
    flags: list[str] = field(default_factory=list)
    #: Said when the reference's figures are for another model than the run served.
    model_note: str = ""

    @property
    def reference_columns(self) -> list[str]:
        """The columns a reference has figures for (its methods' columns)."""
        if self.reference is None or self.reference.table is None:
            return []
        return [
            c for c in self.columns if any(c in r.cells and r.cells[c].reference for r in self.rows)
        ]


def paper_table(
    dpoints: pd.DataFrame,
    by: By = "method",
    reference: ReferenceSpec | None = None,
    served_model: str | None = None,
) -> PaperTable:
    """The run's dataset points in the papers' layout (see the module docstring);
    `served_model`: the run's `runtime.model`, checked against the reference's."""
    cells = _config_cells(dpoints)
    note = _model_note(reference, served_model)
    if cells.empty:
        return PaperTable(by, [], {}, [], [], reference, model_note=note)
    group_heads = [h for h in ("host", "load") if cells[h].nunique() > 1]
    titles = dict(METHOD_TITLES)
    table = reference.table if reference is not None else None
    if table is not None:
        titles.update({str(k): v for k, v in table.methods.items()})
    if by == "method":
        present = set(cells["method"])
        columns = [m for m in METHOD_TITLES if m in present]
    else:
        columns = list(dict.fromkeys(cells.sort_values("order")["column"]))
        titles = {c: ("AR" if c == "ar" else c) for c in columns}
    rows: list[PaperRow] = []
    flags: list[str] = []
    keys = ["temperature", "dataset", *group_heads]
    for key, group in cells.groupby(keys, sort=False):
        temperature, dataset, *rest = key
        chosen: dict[str, PaperCell] = {}
        for column, candidates in group.groupby("method" if by == "method" else "column"):
            best = candidates.sort_values("rank", ascending=False).iloc[0]
            cell = _cell(best, float(temperature), str(dataset), reference)
            chosen[str(column)] = cell
            if cell.tau_low:
                flags.append(_flag(cell, float(temperature), str(dataset), titles, reference))
        rows.append(PaperRow(float(temperature), str(dataset), tuple(map(str, rest)), chosen))
    rows.sort(key=lambda r: r.temperature)  # stable: datasets keep the run's order
    return PaperTable(by, columns, titles, group_heads, rows, reference, flags, note)


def _model_note(reference: ReferenceSpec | None, served: str | None) -> str:
    """A reference for another model than the one served (compared by their last path part,
    so `/data/hf/Qwen3-8B` is `Qwen/Qwen3-8B`): its taus say little about this build."""
    table = reference.table if reference is not None else None
    if table is None or not table.model or not served:
        return ""
    if (
        table.model.rstrip("/").rsplit("/", 1)[-1].lower()
        == served.rstrip("/").rsplit("/", 1)[-1].lower()
    ):
        return ""
    return (
        f"{table.name}'s figures are for {table.model}; this run served {served}: its taus "
        "are another model's"
    )


def _config_cells(dpoints: pd.DataFrame) -> pd.DataFrame:
    """One row per (host, load, temperature, dataset, config): its restarts' intervals."""
    if dpoints.empty or "mode" not in dpoints:
        return pd.DataFrame()
    ok = dpoints[dpoints["status"] == "ok"] if "status" in dpoints else dpoints
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    # Per dataset point: its AR's drift is not marked (a baseline's datasets are not its
    # re-measurements), so an impossible one's cause is a busy host or the unseen one.
    for order, record in enumerate(mark_impossible(ok.to_dict("records"))):
        label = record.get("server_label")
        config = first_restart_label(str(label)) if not is_missing(label) else point_label(record)
        method = method_of(record)
        entry = {
            "host": str(record.get("host", "")),
            "load": load_label(record),
            "temperature": float(record["temperature"]),
            "dataset": str(record["dataset"]),
            "method": method,
            "config": point_label(record),
            "column": "ar" if method == "ar" else point_label(record),
        }
        key = (*(str(v) for v in entry.values()), config)
        slot = rows.setdefault(
            key, {**entry, "order": order, "speedups": [], "taus": [], "withheld": ""}
        )
        if method == "ar":  # AR is the unit: one token per step, its own speed, no spread
            slot["speedups"], slot["taus"] = [1.0], [1.0]
            continue
        slot["withheld"] = slot["withheld"] or withheld_speedup(record)
        for name, column in (("speedups", "speedup"), ("taus", "tau")):
            value: Any = record.get(column)
            if not is_missing(value) and math.isfinite(float(value)):
                slot[name].append(float(value))
    frame = pd.DataFrame(list(rows.values()))
    frame["speedup"] = [Interval.of(v) if v else None for v in frame["speedups"]]
    frame["tau"] = [Interval.of(v) if v else None for v in frame["taus"]]
    # The best of a method: the highest mean speedup, else (no AR to divide by) the highest tau;
    # one whose speedup is no result only where every config of the method's is withheld.
    frame["rank"] = [
        (not w, s.mean if s else -1.0, t.mean if t else -1.0)
        for w, s, t in zip(frame["withheld"], frame["speedup"], frame["tau"], strict=True)
    ]
    return frame


def _cell(
    best: pd.Series, temperature: float, dataset: str, reference: ReferenceSpec | None
) -> PaperCell:
    method = str(best["method"])
    published = None
    table = reference.table if reference is not None else None
    if table is not None and method != "ar":
        published = table.row(temperature, dataset, method)
    tau: Interval | None = best["tau"]
    low = False
    if reference is not None and published is not None and published.tau is not None and tau:
        top = tau.high if tau.high is not None else tau.mean
        low = top < published.tau * (1 - reference.tolerance)
    withheld = str(best["withheld"])
    return PaperCell(str(best["config"]), method, best["speedup"], tau, published, low, withheld)


def _flag(
    cell: PaperCell,
    temperature: float,
    dataset: str,
    titles: dict[str, str],
    reference: ReferenceSpec | None,
) -> str:
    assert reference is not None and reference.table is not None
    assert cell.tau is not None and cell.reference is not None and cell.reference.tau is not None
    below = 1 - cell.tau.mean / cell.reference.tau
    return (
        f"{dataset} T={temperature:g} {titles.get(cell.method, cell.method)} ({cell.config}): "
        f"tau {cell.tau.mean:.2f} is {below:.0%} below {reference.table.name}'s "
        f"{cell.reference.tau:.2f} (tolerance {reference.tolerance:.0%}): a build problem? "
        "(wrong drafter or block size, a tree that never branches, a smaller budget than "
        "the reference's)"
    )


class StoredReferenceError(ValueError):
    """A run's stored reference that does not validate today (its manifest edited, or written
    by another version): the field and why, in one line."""


def reference_of(spec: Mapping[str, Any] | None) -> ReferenceSpec | None:
    """The reference a run was judged by, from its manifest's resolved spec (None: none, or a
    run written before references); StoredReferenceError when it is no reference."""
    raw = (spec or {}).get("reference")
    if not raw:
        return None
    try:
        return ReferenceSpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in ("reference", *first["loc"]))
        raise StoredReferenceError(f"{where}: {first['msg']}") from None
