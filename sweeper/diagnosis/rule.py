"""Which factors separate a run's broken requests from its exact ones: attribution, not detection.

Pure: request records (rows or a DataFrame) in, a `Diagnosis` out. The factors are the columns
the record models mark (`sweeper.results.records.factor_kinds`): every config column, the prompt
and the runtime's exposure counts, so a new grid axis joins without a change here; and, derived,
each processor family of features (`penalties`: sent where any penalty is; `factors.py`). The
outcome of a request is its verdict (`factors.outcome`: near-ties are clean, nondeterministic is
broken).

**The rule** is the smallest conjunction of conditions that the violations live in, found
greedily: at each step the condition (on a factor not yet used) with the lowest balanced error,
missed violations / all violations + clean requests inside / all clean ones, is added when it
lowers that error and is significant within the requests the rule has so far (Fisher's exact
test, one-sided, p < ALPHA), up to MAX_TERMS conditions. The balanced error lets a rule hold a
path where only some of the exposed requests break (a leak that flips the argmax on some prompts)
and leave out a stray violation; `explained` and `outside` count both. Conditions on other
factors that pass exactly the same requests as a rule term are listed with it: they always moved
together in this grid and cannot be separated.

**Each factor** gets counts per value (broken / judged), overall and within the rule, and a status:
`implicated` (in the rule), `confounded` (in the rule, but a condition on another factor passed
exactly the same requests: the grid cannot tell them apart, and both are named), `acts only through`
(its values differ in violations overall, p < ALPHA, but not within the rule: it only changes how
often the rule holds), `modulates` (its values differ within the rule too: it changes how often
the exposed path breaks), `cleared` (violations at every value, no significant difference),
`inconclusive` (a value without violations but too few requests to tell), `not varied` (one value
in this run) or `unknown` (the engine did not report it). Everything is deterministic and
independent of column names and order: requests are in a canonical order of their values
(`factors.population`), and ties between conditions are broken by their masks, not their names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sweeper.config.features import FAMILIES
from sweeper.diagnosis.association import fisher_exact
from sweeper.diagnosis.factors import (
    Condition,
    Population,
    conditions,
    count,
    covers,
    levels,
    population,
)
from sweeper.diagnosis.factors import show as show_value
from sweeper.proof.verdicts import OK_VERDICTS
from sweeper.results.records import factor_kinds
from sweeper.results.rows import rows_of

#: Significance of a condition (Fisher's exact test); small, since repeats of one request count
#: as several and many conditions are tried.
ALPHA = 1e-3
MAX_TERMS = 3
STATUS_ORDER = (
    "implicated",
    "confounded",
    "modulates",
    "acts only through",
    "inconclusive",
    "cleared",
    "not varied",
    "unknown",
)


@dataclass(frozen=True)
class Term:
    """One condition of the rule, with the conditions that passed exactly the same requests."""

    condition: Condition
    together: tuple[Condition, ...] = ()

    @property
    def text(self) -> str:
        if not self.together:
            return self.condition.text
        others = ", ".join(c.text for c in self.together)
        return f"{self.condition.text} (moved together with {others}: cannot separate)"


@dataclass(frozen=True)
class LevelCount:
    """A factor's value and how its judged requests came out."""

    value: str
    broken: int
    judged: int

    @property
    def text(self) -> str:
        return f"{self.value}: {self.broken}/{self.judged}"


@dataclass(frozen=True)
class Finding:
    """One factor: its counts (overall and within the rule), status and why."""

    column: str
    kind: str
    status: str
    overall: tuple[LevelCount, ...]
    within: tuple[LevelCount, ...]
    #: The rule's factors it acts through or moved together with.
    related: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True)
class Diagnosis:
    """A run's attribution: the rule the violations live in and every factor's standing."""

    judged: int
    broken: int
    verdicts: Mapping[str, int]
    rule: tuple[Term, ...]
    #: Violations inside the rule / outside it; clean requests inside it.
    explained: int
    outside: int
    clean_inside: int
    findings: tuple[Finding, ...]
    rule_mask: int = 0
    #: Judged requests whose verdict is near-tie (clean: numerics, not a bug).
    near_ties: int = 0
    population: Population | None = field(default=None, repr=False, compare=False)
    #: The near-ties against the AR-vs-AR control, in words (`runs.diagnose_requests`).
    calibration: str = ""

    @property
    def implicated(self) -> list[str]:
        """The rule's factors, with those that moved together with them."""
        return [c.column for t in self.rule for c in (t.condition, *t.together)]

    def status_of(self, column: str) -> str | None:
        return next((f.status for f in self.findings if f.column == column), None)


def diagnose(records: Any, kinds: Mapping[str, str] | None = None) -> Diagnosis:
    """Attribute a run's violations to its factors (see the module docstring)."""
    rows = rows_of(records)
    if kinds is None:
        columns = list(records.columns) if hasattr(records, "columns") else _keys(rows)
        kinds = factor_kinds(columns)
    pop = population(rows, kinds)
    candidates = {column: conditions(pop, column) for column in pop.kinds}
    rule_conditions = _rule(pop, candidates)
    region = pop.everyone
    for cond in rule_conditions:
        region &= cond.mask
    terms = tuple(_term(cond, candidates, pop) for cond in rule_conditions)
    verdicts = Counter(str(r.get("verdict")) for r in pop.rows)
    broken_verdicts = {v: n for v, n in sorted(verdicts.items()) if v not in OK_VERDICTS}
    return Diagnosis(
        judged=count(pop.everyone),
        broken=count(pop.broken),
        verdicts=broken_verdicts,
        rule=terms,
        explained=count(region & pop.broken) if terms else 0,
        outside=count(pop.broken & ~region) if terms else count(pop.broken),
        clean_inside=count(region & pop.clean) if terms else 0,
        findings=_findings(pop, candidates, terms, region),
        rule_mask=region if terms else 0,
        near_ties=verdicts.get("near-tie", 0),
        population=pop,
    )


def _keys(rows: list[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(k for row in rows for k in row))


def _balanced_error(pop: Population, region: int) -> float:
    broken, clean = count(pop.broken), count(pop.clean)
    missed = count(pop.broken & ~region) / broken if broken else 0.0
    false = count(pop.clean & region) / clean if clean else 0.0
    return missed + false


def _rule(pop: Population, candidates: Mapping[str, list[Condition]]) -> list[Condition]:
    """Greedy forward selection of conditions (see the module docstring)."""
    if not pop.broken:
        return []
    region, chosen = pop.everyone, list[Condition]()
    error = _balanced_error(pop, region)
    used: set[str] = set()
    while len(chosen) < MAX_TERMS:
        best: tuple[float, int, Condition] | None = None
        for column, conds in candidates.items():
            if column in used:
                continue
            for cond in conds:
                inside = region & cond.mask
                if inside == region or not inside & pop.broken:
                    continue
                score = (_balanced_error(pop, inside), -inside, cond)
                if best is None or score[:2] < best[:2]:
                    best = score
        if best is None or best[0] >= error - 1e-12:
            break
        cond = best[2]
        used |= {c for c, conds in candidates.items() if any(x.mask == cond.mask for x in conds)}
        inside, outside = region & cond.mask, region & ~cond.mask
        p = fisher_exact(
            count(inside & pop.broken),
            count(inside & pop.clean),
            count(outside & pop.broken),
            count(outside & pop.clean),
            alternative="greater",
        )
        if p >= ALPHA:
            break
        chosen.append(cond)
        region, error = inside, best[0]
    return chosen


#: Which condition of a group that passed the same requests is shown first (never the order of
#: columns): an exposure is closest to the code path, then a size, then a config value.
_KIND_RANK = {"exposure": 0, "extent": 1, "level": 2}
_OP_RANK = {">": 0, "=": 1, ">=": 2, "<=": 3}


def _rank(pop: Population, cond: Condition) -> tuple[int, int, str]:
    return (_KIND_RANK.get(pop.kinds[cond.column], 3), _OP_RANK.get(cond.op, 4), cond.column)


def _term(cond: Condition, candidates: Mapping[str, list[Condition]], pop: Population) -> Term:
    """The chosen condition with every other factor's condition passing the same requests;
    the group's first by `_rank` stands for it."""
    group = []
    for conds in candidates.values():
        same = sorted((c for c in conds if c.mask == cond.mask), key=lambda c: _rank(pop, c))
        group += same[:1]
    group.sort(key=lambda c: _rank(pop, c))
    return Term(group[0], tuple(group[1:]))


def _counts(pop: Population, column: str, region: int) -> tuple[LevelCount, ...]:
    """Broken / judged per value in `region`; an exposure count reads as `0` and `> 0`."""
    values = pop.values(column)
    buckets: list[tuple[str, Callable[[Any], bool]]]
    if pop.kinds[column] == "exposure" and all(isinstance(v, (int, type(None))) for v in values):
        buckets = [("0", lambda v: v == 0), ("> 0", lambda v: v > 0)]
    else:
        buckets = [(show_value(level), _equal_to(level)) for level in levels(values)]
    out = []
    for name, test in buckets:
        mask = 0
        for index, v in enumerate(values):
            if v is not None and test(v):
                mask |= 1 << index
        mask &= region
        if mask:
            out.append(LevelCount(name, count(mask & pop.broken), count(mask)))
    return tuple(out)


def _equal_to(level: Any) -> Callable[[Any], bool]:
    return lambda v: bool(v == level and type(v) is type(level))


def _association(pop: Population, conds: list[Condition], region: int) -> float:
    """The smallest Bonferroni-corrected two-sided p of the factor's conditions in `region`."""
    known = 0
    for cond in conds:
        known |= cond.mask
    known &= region
    best = 1.0
    for cond in conds:
        inside, outside = known & cond.mask, known & ~cond.mask
        if not inside or not outside:
            continue
        p = fisher_exact(
            count(inside & pop.broken),
            count(inside & pop.clean),
            count(outside & pop.broken),
            count(outside & pop.clean),
        )
        best = min(best, p * len(conds))
    return min(best, 1.0)


def _findings(
    pop: Population,
    candidates: Mapping[str, list[Condition]],
    terms: tuple[Term, ...],
    region: int,
) -> tuple[Finding, ...]:
    out = []
    for column, kind in pop.kinds.items():
        overall = _counts(pop, column, pop.everyone)
        within = _counts(pop, column, region) if terms else ()
        status, related, detail = _status(pop, column, candidates[column], terms, region, overall)
        if column in FAMILIES:
            detail = f"{covers(pop.rows, column)}; {detail}"
        twins = _twins(column, candidates)
        if twins and status not in ("implicated", "confounded"):
            detail += f"; moved together with {', '.join(twins)}"
        out.append(Finding(column, kind, status, overall, within, related, detail))
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    out.sort(key=lambda f: (rank[f.status], f.column))
    return tuple(out)


def _twins(column: str, candidates: Mapping[str, list[Condition]]) -> list[str]:
    """Other factors with a condition passing exactly the requests one of this factor's does."""
    masks = {c.mask for c in candidates[column]}
    return sorted(
        other
        for other, conds in candidates.items()
        if other != column and any(c.mask in masks for c in conds)
    )


def _status(
    pop: Population,
    column: str,
    conds: list[Condition],
    terms: tuple[Term, ...],
    region: int,
    overall: tuple[LevelCount, ...],
) -> tuple[str, tuple[str, ...], str]:
    if not overall and pop.kinds[column] != "level":
        return "unknown", (), "not reported by the engine"
    if len(overall) < 2:
        shown = overall[0].value if overall else "none"
        return "not varied", (), f"one value in this run ({shown})"
    for term in terms:
        members = [term.condition, *term.together]
        if not any(c.column == column for c in members):
            continue
        if not term.together:
            return "implicated", (), "in the rule"
        others = tuple(c.column for c in members if c.column != column)
        detail = "in the rule, but " + " and ".join(c.text for c in members)
        return "confounded", others, detail + " passed exactly the same requests"
    if not pop.broken:
        return "cleared", (), "no violations"
    rule_columns = tuple(c.column for t in terms for c in (t.condition, *t.together))
    marginal = _association(pop, conds, pop.everyone)
    conditional = _association(pop, conds, region) if terms else marginal
    if terms and conditional < ALPHA:
        within = _counts(pop, column, region)
        detail = f"breaks more often at {_most(within)} within the rule too (p={conditional:.1g})"
        return "modulates", rule_columns, detail
    if marginal < ALPHA and terms:
        detail = f"differs overall (p={marginal:.1g}), not within the rule"
        return "acts only through", rule_columns, detail
    if marginal < ALPHA:
        return "modulates", (), f"breaks more often at {_most(overall)} (p={marginal:.1g})"
    spared = [lc for lc in overall if lc.broken == 0]
    if spared:
        names = ", ".join(f"{lc.value} ({lc.judged} judged)" for lc in spared)
        return "inconclusive", (), f"no violation at {names}, too few requests to tell"
    return "cleared", (), "violations at every value"


def _most(counts: tuple[LevelCount, ...]) -> str:
    """The value with the highest violation rate, as `value (broken/judged)`."""
    top = max(counts, key=lambda lc: (lc.broken / lc.judged, lc.judged))
    return f"{top.value} ({top.broken}/{top.judged})"
