"""What the diagnosis reasons over: judged requests, their factors, and conditions on factors.

A *judged* request is one whose verdict says something: a violation (`VIOLATIONS`: diverged,
nondeterministic, garbled) is *broken*; a proven one (`proven`: exact, near-tie) is *clean* (a
near-tie is numerics, not a bug), unless its config's near-tie rate exceeds the AR-vs-AR
control's (`near_tie_excess`, `proof/calibration.py`): then it is broken too. An AR request at
temperature 0 is the reference the others are judged against, so it counts as clean (its repeats
agreeing is all that can be checked; if they disagree it is `nondeterministic`, a violation); any
other `n/a` (failed, unseeded, no baseline) says nothing and is left out.

A *factor* is a column the record models mark as one (`factor_kinds`): a `level` (config
values, the prompt), an `exposure` count (the path ran when > 0) or an `extent` (a largest size,
ordered). A *condition* is a test on one factor, `cuda_graph = on`, `padded_rounds > 0`,
`max_tree_width >= 2`, held as a bit mask over the judged requests (bit i: request i passes),
so rules are set operations. A request whose factor value is unknown (None) passes no
condition on that factor; but a request feature's None means "not sent" (`config.usage`), a
level of its own (`NOT_SENT`), so `repetition_penalty = 1.3` stands against the requests that
sent none. A processor family of two or more features (`config.features.FAMILIES`: the
penalties) is a factor of its own, derived: `on` where any of its features acts (sent at a value
other than its neutral one: a repetition penalty of 1 or a frequency penalty of 0 changes
nothing), else `off`, so a fault in the stage they share, which breaks wherever any of them
acts, is one condition (`penalties = on`), not a disjunction over their columns. It is left out
where it is on for exactly the requests one of its features acts in (that feature alone acted:
nothing to add). Requests are put in a canonical order first (by their values and
outcome, never by column names), so masks and ties do not depend on how columns are named or
ordered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.config import temperature_of
from sweeper.config.features import BY_NAME, FAMILIES
from sweeper.config.usage import FEATURE_COLUMNS
from sweeper.proof.verdicts import VIOLATIONS, proven
from sweeper.results.rows import is_failed, is_missing, rows_of


@dataclass(frozen=True)
class Population:
    """The judged requests, in canonical order, with their outcomes as masks."""

    rows: tuple[Mapping[str, Any], ...]
    broken: int
    clean: int
    #: Which factors: column -> kind.
    kinds: Mapping[str, str]

    @property
    def everyone(self) -> int:
        return self.broken | self.clean

    def values(self, column: str) -> list[Any]:
        """The column's value per request, normalised (None when unknown)."""
        return [factor_value(r, column) for r in self.rows]


@dataclass(frozen=True)
class Condition:
    """A test on one factor, with the requests that pass it."""

    column: str
    op: str  # "=", ">", ">=", "<="
    value: Any
    mask: int

    @property
    def text(self) -> str:
        return f"{self.column} {self.op} {show(self.value)}"

    def holds(self, row: Mapping[str, Any]) -> bool:
        """Whether a request row passes (an unknown value passes nothing)."""
        value = factor_value(row, self.column)
        if value is None:
            return False
        if self.op == "=":
            return bool(value == self.value and type(value) is type(self.value))
        ops = {">": value > self.value, ">=": value >= self.value, "<=": value <= self.value}
        return bool(ops[self.op])

    def key(self) -> tuple[str, str, str]:
        """Identity without the mask (for tests and de-duplication)."""
        return (self.column, self.op, show(self.value))


#: The level of a request feature a request did not send.
NOT_SENT = "not sent"


def factor_value(row: Mapping[str, Any], column: str) -> Any:
    """A row's value of a factor as compared (`normal`); a request feature not sent is
    `NOT_SENT`; a family is True (on) where any of its features acts."""
    if column in FAMILIES:
        return any(_acts(row, member) for member in FAMILIES[column])
    value = normal(row.get(column))
    return NOT_SENT if value is None and column in FEATURE_COLUMNS else value


def _acts(row: Mapping[str, Any], feature: str) -> bool:
    return BY_NAME[feature].acts(normal(row.get(feature)))


def covers(rows: Sequence[Mapping[str, Any]], family: str) -> str:
    """What a family's `on` stands for among `rows`: its features' acting values, in words."""
    acting = [
        f"{member}={show(value)}"
        for member in FAMILIES[family]
        for value in levels([normal(r.get(member)) for r in rows])
        if BY_NAME[member].acts(value)
    ]
    listed = " or ".join([", ".join(acting[:-1]), acting[-1]] if len(acting) > 1 else acting)
    return f"on: {listed}"


def _families(rows: Sequence[Mapping[str, Any]], kinds: Mapping[str, str]) -> dict[str, str]:
    """The family factors `rows` call for (see the module): a family with a feature among the
    factors, on for other requests than any one of its features acts in."""
    out = {}
    for family, members in FAMILIES.items():
        present = [m for m in members if m in kinds]
        on = [factor_value(r, family) for r in rows]
        if present and all(on != [_acts(r, m) for r in rows] for m in present):
            out[family] = "level"
    return out


def normal(value: Any) -> Any:
    """A factor value as compared: None for missing/NaN, plain bool/int/float/str otherwise."""
    if is_missing(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def show(value: Any) -> str:
    """How a value reads: on/off for bools, compact numbers."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


def outcome(row: Mapping[str, Any]) -> str | None:
    """`broken`, `clean`, or None when the request's verdict says nothing (see the module)."""
    verdict = row.get("verdict")
    verdict = None if is_missing(verdict) else str(verdict)
    if verdict in VIOLATIONS or (verdict == "near-tie" and row.get("near_tie_excess") is True):
        return "broken"  # near-ties past the AR-vs-AR control are a bug's (calibration.py)
    if proven(verdict):
        return "clean"
    reference = str(row.get("mode")) == "ar" and temperature_of(row) == 0
    return "clean" if reference and verdict == "n/a" and not is_failed(row) else None


def population(records: Any, kinds: Mapping[str, str]) -> Population:
    """The judged requests of `records` (rows or a DataFrame) with the factors `kinds` and the
    family factors they call for."""
    judged = []
    for row in rows_of(records):
        result = outcome(row)
        if result is not None:
            judged.append((result, row))
    kinds = {**kinds, **_families([row for _, row in judged], kinds)}

    def order(item: tuple[str, Mapping[str, Any]]) -> tuple[str, ...]:
        result, row = item
        values = sorted(f"{kinds[c]}:{show(factor_value(row, c))}" for c in kinds)
        return (result, *values)

    judged.sort(key=order)
    broken = clean = 0
    for index, (result, _) in enumerate(judged):
        if result == "broken":
            broken |= 1 << index
        else:
            clean |= 1 << index
    return Population(tuple(r for _, r in judged), broken, clean, dict(kinds))


def levels(values: Sequence[Any]) -> list[Any]:
    """The distinct known values, ordered (numbers ascending, then the rest as text)."""
    known = {v for v in values if v is not None}
    numbers = sorted(v for v in known if isinstance(v, (int, float)) and not isinstance(v, bool))
    rest = sorted((v for v in known if v not in numbers), key=lambda v: (type(v).__name__, str(v)))
    return [*numbers, *rest]


def _mask(values: Sequence[Any], test: Any) -> int:
    mask = 0
    for index, value in enumerate(values):
        if value is not None and test(value):
            mask |= 1 << index
    return mask


def conditions(pop: Population, column: str) -> list[Condition]:
    """Every condition the diagnosis considers on one factor (none when it takes one value)."""
    values = pop.values(column)
    found = levels(values)
    if len(found) < 2:
        return []
    kind = pop.kinds[column]
    ordered = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in found)
    out: list[Condition] = []
    if kind == "exposure" and ordered:
        out.append(Condition(column, ">", 0, _mask(values, lambda v: v > 0)))
        out.append(Condition(column, "=", 0, _mask(values, lambda v: v == 0)))
        return [c for c in out if c.mask]
    if kind != "extent" or not ordered:
        out += [Condition(column, "=", v, _mask(values, lambda x, v=v: x == v)) for v in found]
    if ordered and (kind == "extent" or len(found) > 2):
        out += [Condition(column, ">=", t, _mask(values, lambda x, t=t: x >= t)) for t in found[1:]]
        out += [
            Condition(column, "<=", t, _mask(values, lambda x, t=t: x <= t)) for t in found[:-1]
        ]
    return out


def count(mask: int) -> int:
    return mask.bit_count()
