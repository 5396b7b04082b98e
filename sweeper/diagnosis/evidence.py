"""The evidence of a follow-up: per experiment arm, how its requests came out and what they went
through, and what each experiment shows (pure: the follow-up's plan and request rows in).

An arm's requests are the follow-up run's speculative requests with the arm's server params and
batch. An experiment *separates* when one arm breaks and the other does not. When both break, the
thing it varies is cleared for this focus, unless every violation of both arms lies inside the
rule (of the run and its follow-up together) while requests outside it stayed clean: then the
arm meant to avoid the rule's condition did not always (an n-gram chain drafts less than its
budget at times), and the evidence still points at the rule. An ablation (`without logit_bias`)
whose arm without the feature is exact while the arm with it breaks *locates* the feature: the
same prompts, each judged against AR under its own request, break only with it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.diagnosis.factors import Condition, normal, outcome
from sweeper.diagnosis.followup import Arm, Experiment
from sweeper.diagnosis.rule import Diagnosis
from sweeper.diagnosis.text import sentence
from sweeper.results.rows import rows_of

EVIDENCE_COLUMNS = (
    "experiment",
    "arm",
    "broken/judged",
    "verdicts",
    "padded",
    "batched",
    "widest verify",
    "in the rule",
    "outside it",
    "shows",
)


@dataclass(frozen=True)
class ArmResult:
    """How one arm's requests came out."""

    arm: Arm
    judged: int
    broken: int
    verdicts: Mapping[str, int]
    #: Requests with padded / batched rounds (None: the engine did not say).
    padded: int | None
    batched: int | None
    widest: int | None
    #: (broken, judged) inside the rule and outside it (all outside when there is no rule).
    inside: tuple[int, int] = (0, 0)
    outside: tuple[int, int] = (0, 0)


def _matches(row: Mapping[str, Any], arm: Arm) -> bool:
    if str(row.get("mode")) != "speculative" or normal(row.get("concurrency")) != arm.concurrency:
        return False
    return all(normal(row.get(k)) == normal(v) for k, v in (*arm.items, *arm.features))


def _count_positive(rows: list[Mapping[str, Any]], column: str) -> int | None:
    values = [normal(r.get(column)) for r in rows]
    if not values or any(v is None for v in values):
        return None
    return sum(1 for v in values if v > 0)


def arm_result(
    requests: list[Mapping[str, Any]], arm: Arm, rule: Sequence[Condition] = ()
) -> ArmResult:
    rows = [r for r in requests if _matches(r, arm) and outcome(r) is not None]
    widths = [normal(r.get("max_verify_width")) for r in rows]
    inside = [r for r in rows if rule and all(c.holds(r) for c in rule)]
    outside = [r for r in rows if not (rule and all(c.holds(r) for c in rule))]
    return ArmResult(
        arm=arm,
        judged=len(rows),
        broken=sum(1 for r in rows if outcome(r) == "broken"),
        verdicts=dict(sorted(Counter(str(r.get("verdict")) for r in rows).items())),
        padded=_count_positive(rows, "padded_rounds"),
        batched=_count_positive(rows, "batched_rounds"),
        widest=max(widths) if widths and None not in widths else None,
        inside=(_broken(inside), len(inside)),
        outside=(_broken(outside), len(outside)),
    )


def _broken(rows: list[Mapping[str, Any]]) -> int:
    return sum(1 for r in rows if outcome(r) == "broken")


def shows(
    experiment: Experiment, results: tuple[ArmResult, ...], rule: Sequence[Condition] = ()
) -> str:
    """What an experiment shows, in words."""
    if any(r.judged == 0 for r in results):
        return "not measured"
    if len(results) == 1:
        (only,) = results
        if not only.broken:
            return "does not reproduce on these prompts"
        kind = "nondeterministic" if "nondeterministic" in only.verdicts else "deterministic"
        return f"reproduces, {kind}"
    broke = [r.broken > 0 for r in results]
    labels = [r.arm.label for r in results]
    if all(broke):
        spared = sum(r.outside[1] for r in results)
        if rule and spared and not any(r.outside[0] for r in results):
            where = " and ".join(c.text for c in rule)
            return (
                f"both arms break, but only where {where}: {spared} of their requests "
                "outside it stayed clean"
            )
        return f"both arms break: {experiment.name} cleared"
    if not any(broke):
        return "neither arm breaks (the fault did not show on these prompts)"
    if experiment.ablates is not None and not broke[0]:
        without, full = results
        return (
            f"located: {experiment.ablates} (exact without it, broken with it: "
            f"{without.broken}/{without.judged} vs {full.broken}/{full.judged})"
        )
    bad = labels[broke.index(True)]
    return f"separates: breaks only at {bad}"


def located(experiments: tuple[Experiment, ...], requests: Any) -> tuple[str, ...]:
    """The workload features whose ablation restored exactness (`shows`: located)."""
    rows = rows_of(requests)
    return tuple(
        e.ablates
        for e in experiments
        if e.ablates is not None
        and shows(e, tuple(arm_result(rows, arm) for arm in e.arms)).startswith("located: ")
    )


def verdict(combined: Diagnosis, experiments: tuple[Experiment, ...], requests: Any) -> str:
    """The verdict over a run and its follow-up: the diagnosis of both together, and the
    features an ablation located (`requests`: the follow-up's)."""
    text = sentence(combined)
    if found := located(experiments, requests):
        text += (
            f" Located by ablation: {', '.join(found)} (exactness restored without it, on the "
            "same prompts)."
        )
    return text


def evidence(
    experiments: tuple[Experiment, ...], requests: Any, rule: Sequence[Condition] = ()
) -> list[dict[str, str]]:
    """The evidence table: one row per arm (EVIDENCE_COLUMNS); `rule` is the diagnosis's rule
    over the run and its follow-up together."""
    rows = rows_of(requests)
    table = []
    for experiment in experiments:
        results = tuple(arm_result(rows, arm, rule) for arm in experiment.arms)
        shown = shows(experiment, results, rule)
        for result in results:
            table.append(
                {
                    "experiment": experiment.name,
                    "arm": result.arm.label,
                    "broken/judged": f"{result.broken}/{result.judged}",
                    "verdicts": ", ".join(f"{v} {n}" for v, n in result.verdicts.items()),
                    "padded": _of(result.padded, result.judged),
                    "batched": _of(result.batched, result.judged),
                    "widest verify": "?" if result.widest is None else str(result.widest),
                    "in the rule": "{}/{}".format(*result.inside),
                    "outside it": "{}/{}".format(*result.outside),
                    "shows": shown,
                }
            )
    return table


def _of(count: int | None, total: int) -> str:
    return "?" if count is None else f"{count}/{total}"
