"""The report's "Start-up" section: where each load's time went (`sweeper.results.loads`), a
table per host and engine of each phase's own seconds, and one stacked horizontal bar per load.
A report may show other runs' loads beside its own (`sweeper report --startup RUN`): several
engines' starts side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt

from sweeper.report.charts import Chart, to_data_uri
from sweeper.report.formatting import fmt
from sweeper.results.loads import PHASES, LoadRecord, PhaseName
from sweeper.results.manifest import Manifest

#: Column heads of the phases, in their order.
PHASE_HEADS: dict[PhaseName, str] = {
    "process_up": "process up",
    "weights_loaded": "weights loaded",
    "graphs_captured": "graphs captured / compiled",
    "ready": "ready",
}
#: A phase the server did not report, and one it reported without a usable time.
ABSENT, UNKNOWN = "not reported", "unknown"


@dataclass
class StartupRow:
    """One load: which, each phase's own seconds (text), and where each was read."""

    load: int
    config: str
    cells: list[str]
    #: One line per phase reported: `weights_loaded +18.00 s (log): Loading weights took ...`.
    sources: list[str]
    ready_s: str


@dataclass
class StartupTable:
    """The loads of one host of one run."""

    host: str
    engine: str
    #: `<sweep>/<run id>`.
    run: str
    rows: list[StartupRow]
    #: The loads themselves, for the figure.
    loads: list[LoadRecord]


def startup_tables(manifests: list[Manifest]) -> list[StartupTable]:
    """A table per (run, host) that recorded loads, in the order given."""
    tables = []
    for manifest in manifests:
        hosts = dict.fromkeys(load.host for load in manifest.loads)
        for host in hosts:
            loads = [load for load in manifest.loads if load.host == host]
            run = f"{manifest.sweep}/{manifest.run_id}"
            rows = [_row(load) for load in loads]
            tables.append(StartupTable(host, manifest.engine, run, rows, loads))
    return tables


def _row(load: LoadRecord) -> StartupRow:
    said = {phase.name for phase in load.phases}
    cells = [
        fmt(seconds) if seconds is not None else (UNKNOWN if name in said else ABSENT)
        for name, seconds in load.durations().items()
    ]
    sources = [
        f"{p.name} {'+' + fmt(p.at_s) + ' s' if p.at_s is not None else UNKNOWN} "
        f"({p.source}): {p.evidence}"
        for p in load.phases
    ]
    return StartupRow(load.index, load.label, cells, sources, fmt(load.ready_s))


def startup_chart(tables: list[StartupTable]) -> Chart | None:
    """Every load as a horizontal bar stacked by its phases' own seconds (absent or unknown
    phases add nothing: their time falls in the next phase with a time), or None without
    loads."""
    bars = [(f"{t.engine} {t.host} #{load.index}", load) for t in tables for load in t.loads]
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.45 * len(bars)), layout="constrained")
    names = [name for name, _ in bars]
    for phase in PHASES:
        widths = [load.durations()[phase] or 0.0 for _, load in bars]
        lefts = [_before(load, phase) for _, load in bars]
        ax.barh(names, widths, left=lefts, label=PHASE_HEADS[phase])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the process started")
    ax.legend(fontsize=8, ncols=len(PHASES), loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return Chart(
        "Start-up phases per load",
        to_data_uri(fig),
        "each bar one start of a server, split where its own log or API says a phase ended",
    )


def _before(load: LoadRecord, phase: PhaseName) -> float:
    """Where `phase`'s bar starts: the sum of the phases before it."""
    durations = load.durations()
    return sum(durations[p] or 0.0 for p in PHASES[: PHASES.index(phase)])
