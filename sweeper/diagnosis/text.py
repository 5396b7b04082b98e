"""A `Diagnosis` in words: the verdict sentence and the factor table, for the CLI, the report,
`compare` and nightly alike (one wording everywhere)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sweeper.config.features import FAMILIES
from sweeper.config.usage import FEATURE_COLUMNS
from sweeper.diagnosis.factors import NOT_SENT, covers

if TYPE_CHECKING:
    from sweeper.diagnosis.rule import Diagnosis, Finding

#: Table columns, in order.
TABLE_COLUMNS = ("factor", "status", "broken/judged per value", "within the rule", "why")


def _verdicts(d: Diagnosis) -> str:
    return ", ".join(f"{v} {n}" for v, n in d.verdicts.items())


def _names(findings: list[Finding]) -> str:
    return ", ".join(f.column for f in findings)


def sentence(d: Diagnosis) -> str:
    """One paragraph: what broke, the rule it lives in, and every factor's standing."""
    if d.judged == 0:
        return "No judged requests: nothing to diagnose."
    calibration = f" {d.calibration}" if d.calibration else ""
    if d.broken == 0:
        return (
            f"No violations among {d.judged} judged requests ({d.near_ties} near-ties: "
            f"numerics, not violations): nothing to explain, no factor implicated.{calibration}"
        )
    head = f"{d.broken} of {d.judged} judged requests are violations ({_verdicts(d)})"
    if d.rule:
        where = " and ".join(t.text for t in d.rule)
        rows = d.population.rows if d.population is not None else ()
        families = [c.column for t in d.rule for c in (t.condition, *t.together)]
        for family in (c for c in families if c in FAMILIES):
            where += f" ({family} {covers(rows, family)})"
        text = f"{head}; they live where {where}: {d.explained} there"
        text += f" (with {d.clean_inside} clean requests)"
        if d.outside:
            text += f", {d.outside} outside the rule"
        text += "."
    elif d.broken == d.judged:
        text = (
            f"{head}: every judged request broke, so no factor separates them; the fault is on "
            "a path every one of them took."
        )
    else:
        text = f"{head}, spread so that no factor separates them from the clean ones."
    if set(d.verdicts) == {"nondeterministic"}:
        text += (
            " All are nondeterministic (repeats of one request disagree): a race or "
            "batch-dependent numerics rather than a wrong code path."
        )
    groups: dict[str, list[Finding]] = {}
    for finding in d.findings:
        groups.setdefault(finding.status, []).append(finding)
    for status, label in (
        ("implicated", "Implicated"),
        (
            "confounded",
            "In the rule but confounded (always moved together in this grid, cannot separate)",
        ),
        ("acts only through", "Acts only through {}"),
        ("modulates", "Modulates how often it breaks"),
        ("cleared", "Cleared (violations at every value)"),
        ("inconclusive", "Inconclusive (too few requests)"),
    ):
        found = groups.get(status, [])
        if not found:
            continue
        related = sorted({r for f in found for r in f.related})
        text += f" {label.format(', '.join(related) or 'the rule')}: {_names(found)}."
    if sent := _sent_everywhere(d):
        text += (
            f" Sent with every request, so this run cannot separate them: {_names(sent)} "
            "(`sweeper diagnose` runs the failing prompts without each)."
        )
    return text + calibration


def _sent_everywhere(d: Diagnosis) -> list[Finding]:
    """The request features every judged request sent with one value (a workload's logit bias,
    stop strings, response format): a fault in one breaks requests no grid value separates, so
    when something broke they are suspects the rule cannot name."""
    if d.broken == 0:
        return []
    return [
        f
        for f in d.findings
        if f.status == "not varied"
        and f.column in FEATURE_COLUMNS
        and [c.value for c in f.overall] != [NOT_SENT]
    ]


def table(d: Diagnosis) -> list[dict[str, str]]:
    """One row per factor (TABLE_COLUMNS), in the diagnosis's order."""
    rows = []
    for f in d.findings:
        status = f.status
        if f.related and status == "acts only through":
            status = f"{status} {', '.join(f.related)}"
        rows.append(
            {
                "factor": f.column,
                "status": status,
                "broken/judged per value": "; ".join(lc.text for lc in f.overall),
                "within the rule": "; ".join(lc.text for lc in f.within),
                "why": f.detail,
            }
        )
    return rows


def summary(d: Diagnosis) -> dict[str, Any]:
    """Plain data for JSON output and a manifest."""
    return {
        "sentence": sentence(d),
        "rule": [t.text for t in d.rule],
        "judged": d.judged,
        "broken": d.broken,
        "verdicts": dict(d.verdicts),
        "explained": d.explained,
        "outside": d.outside,
        "clean_inside": d.clean_inside,
        "factors": table(d),
    }


def point_line(d: Diagnosis, point_id: str = "") -> str:
    """A short line for one newly broken config (compare, nightly): the run's rule, and how many
    of this point's judged requests are inside it and broke."""
    if not d.broken:
        return "diagnosis: no violations"
    mine = ""
    if point_id and d.population is not None:
        rows = [i for i, r in enumerate(d.population.rows) if str(r.get("point_id")) == point_id]
        inside = [i for i in rows if d.rule_mask >> i & 1]
        broken = [i for i in rows if d.population.broken >> i & 1]
        if rows:
            mine = f"; this config: {len(broken)}/{len(rows)} broken"
            mine += f", {len(inside)} inside the rule" if d.rule else ""
    if not d.rule:
        return f"diagnosis: {d.broken}/{d.judged} violations, no factor separates them{mine}"
    where = " and ".join(t.condition.text for t in d.rule)
    return f"diagnosis: violations only where {where} ({d.explained}/{d.broken}){mine}"
