"""A comparison's newly broken config carries run B's diagnosis; a newly failed one, with no
verdicts, carries none."""

from __future__ import annotations

from pathlib import Path

from sweeper.analysis.compare import compare_loaded
from sweeper.diagnosis.compare import with_diagnosis
from sweeper.results.reader import read_run
from tests.sweeper.analysis.test_compare import _pair


def test_a_newly_broken_config_carries_run_bs_diagnosis(tmp_path: Path) -> None:
    a, b = _pair(
        tmp_path,
        fail={(8, 1, 0.0, False): "server exited"},
        diverge={(16, 4, 0.0, False): "garbled"},
    )
    run_a, run_b = read_run(a), read_run(b)
    comparison = with_diagnosis(compare_loaded(run_a, run_b, 0.05), run_b)
    diagnosed = {r.label: r.diagnosis for r in comparison.regressions}
    assert diagnosed["b8 k1 bs8 T=0 c=1"] == ""
    line = diagnosed["b16 k4 bs8 T=0 c=1"]
    assert line.startswith("diagnosis: ") and "; this config: " in line and " broken" in line


def test_nothing_newly_broken_leaves_every_row_without_a_diagnosis(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, fail={(8, 1, 0.0, False): "server exited"})
    run_a, run_b = read_run(a), read_run(b)
    comparison = with_diagnosis(compare_loaded(run_a, run_b, 0.05), run_b)
    assert comparison.regressions and all(r.diagnosis == "" for r in comparison.rows)
