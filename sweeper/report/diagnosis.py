"""The report's "Diagnosis" section: the rule the violations live in, the factor table, and a
plot of violations against the implicated factors (`diagnosis.html.j2`).

The diagnosis reads its own request columns of the run (`diagnosis.runs`: the verdicts and
every factor the record models mark), so the rest of the report's view model is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import matplotlib.pyplot as plt

from sweeper.diagnosis.rule import Diagnosis, Finding
from sweeper.diagnosis.runs import diagnose_run
from sweeper.diagnosis.text import TABLE_COLUMNS, sentence, table
from sweeper.proof.verdicts import COLOURS
from sweeper.report.figures import Chart, to_data_uri
from sweeper.results.reader import Run

#: Panels in the figure: the rule's factors first, then those acting through them.
MAX_PANELS = 4


@dataclass
class DiagnosisView:
    """What the template shows."""

    sentence: str
    rule: list[str]
    columns: tuple[str, ...] = TABLE_COLUMNS
    rows: list[dict[str, str]] = field(default_factory=list)
    chart: Chart | None = None
    follow_up: str = ""


def load_diagnosis(run: Run, follows: str | None = None) -> DiagnosisView | None:
    """The diagnosis of a run (None when it has no request records)."""
    result = diagnose_run(run)
    if result is None:
        return None
    note = f"This run follows up run {follows} (`sweeper diagnose`)." if follows else ""
    return DiagnosisView(
        sentence=sentence(result),
        rule=[t.text for t in result.rule],
        rows=table(result),
        chart=violations_chart(result),
        follow_up=note,
    )


def _panels(result: Diagnosis) -> list[Finding]:
    """The rule's factors, then those acting through it or modulating it, config knobs first."""
    kind = {"level": 0, "exposure": 1, "extent": 2}
    order = ("implicated", "confounded", "acts only through", "modulates")
    ranked = sorted(
        (f for f in result.findings if f.status in order),
        key=lambda f: (order.index(f.status), kind.get(f.kind, 3), f.column),
    )
    return ranked[:MAX_PANELS]


def violations_chart(result: Diagnosis) -> Chart | None:
    """Per value of each implicated factor (and those acting through it): violations, clean
    requests inside the rule, clean requests outside it. Where the violations are, at a glance,
    and why a factor that acts through the rule looks guilty on its own."""
    panels = _panels(result)
    if not result.broken or not panels:
        return None
    fig, axes = plt.subplots(
        1, len(panels), figsize=(3.4 * len(panels), 3.4), squeeze=False, layout="constrained"
    )
    for ax, finding in zip(axes[0], panels, strict=True):
        inside = {lc.value: lc for lc in finding.within}
        names = [lc.value for lc in finding.overall]
        broken = [lc.broken for lc in finding.overall]
        clean_in = [inside[n].judged - inside[n].broken if n in inside else 0 for n in names]
        clean_out = [
            lc.judged - lc.broken - c for lc, c in zip(finding.overall, clean_in, strict=True)
        ]
        ax.bar(names, broken, color=COLOURS["diverged"], label="violation")
        ax.bar(
            names, clean_in, bottom=broken, color=COLOURS["near-tie"], label="clean, in the rule"
        )
        tops = [b + c for b, c in zip(broken, clean_in, strict=True)]
        ax.bar(names, clean_out, bottom=tops, color=COLOURS["exact"], label="clean, outside it")
        ax.set_title(f"{finding.column}\n({finding.status})", fontsize=9)
        ax.set_ylabel("judged requests")
        ax.tick_params(axis="x", labelsize=8, rotation=30)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=8)
    fig.suptitle("Violations against the implicated factors")
    return Chart("Violations against the implicated factors", to_data_uri(fig))
