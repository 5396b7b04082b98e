"""The diagnosis a comparison's newly broken configs carry: where run B's violations live and
how each such point's requests stand (`text.point_line`).

`compare`, `report --compare` and nightly call it on what `analysis.compare.compare_loaded`
returns: the comparison sits in analysis, a layer below the diagnosis, so it cannot ask for it.
"""

from __future__ import annotations

from sweeper.analysis.compare import Comparison
from sweeper.diagnosis.runs import diagnose_run
from sweeper.diagnosis.text import point_line
from sweeper.results.reader import Run


def with_diagnosis(comparison: Comparison, run_b: Run) -> Comparison:
    """The comparison with run B's diagnosis line on each config whose determinism newly broke
    (run B is diagnosed only when there is one)."""
    broken = [r for r in comparison.rows if r.is_regression and "determinism broken" in r.flag_text]
    diagnosis = diagnose_run(run_b) if broken else None
    if diagnosis is not None:
        for row in broken:
            row.diagnosis = point_line(diagnosis, row.point_id)
    return comparison
