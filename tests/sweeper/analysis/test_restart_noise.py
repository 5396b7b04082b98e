"""compare across restarts: one row per config, the means over restarts; a change inside both
runs' restart intervals is "within noise", a change beyond them a regression; a run with one
restart is compared as before (request noise)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from rich.console import Console

from sweeper.analysis.compare import compare_runs
from sweeper.commands.compare import print_table


def _points(run: str, tok_s: dict[int, list[float]], **extra: Any) -> pd.DataFrame:
    """A run of one AR and one speculative config (budget b per key), one row per restart."""
    rows = []
    for budget, values in tok_s.items():
        for restart, value in enumerate(values):
            suffix = f"-rs{restart}" if restart else ""
            rows.append(
                {
                    "run_id": run,
                    "point_id": f"local-b{budget}{suffix}-t0-c1",
                    "server_config_id": f"b{budget}{suffix}",
                    "restart": restart,
                    "host": "local",
                    "engine": "ddtree_runtime",
                    "mode": "ar" if budget == 0 else "speculative",
                    "budget": budget or None,
                    "topk": 1 if budget else None,
                    "block_size": 8 if budget else None,
                    "cuda_graph": False,
                    "temperature": 0.0,
                    "max_tokens": 64,
                    "concurrency": 1,
                    "status": "ok",
                    "determinism": "exact",
                    "output_tok_s": value,
                    "tau": 2.0,
                    "ttft_p50": 0.05,
                    **extra,
                }
            )
    return pd.DataFrame(rows)


def test_a_change_inside_both_runs_restart_intervals_is_within_noise() -> None:
    a = _points("a", {0: [10.0, 10.0, 10.0], 16: [20.0, 26.0, 14.0]})
    b = _points("b", {0: [10.0, 10.0, 10.0], 16: [16.0, 22.0, 14.8]})  # -12%, noisy
    comparison = compare_runs(a, b, threshold=0.05)
    assert len(comparison.rows) == 2  # restarts matched as one config, not refused
    spec = next(r for r in comparison.rows if r.label.startswith("b16"))
    assert not spec.is_regression and spec.flags == []
    assert spec.within_noise == ["output_tok_s -12.0% within restart noise"]
    assert (spec.a["output_tok_s"], spec.b["output_tok_s"]) == pytest.approx((20.0, 17.6))  # means
    assert spec.noise["output_tok_s"] > 0.12  # the intervals' half-widths, not the requests'
    assert "1 changed within restart noise, 0 regressions" in comparison.summary
    console = Console(width=200, record=True)
    print_table(comparison, console, everything=False)
    assert "within restart noise" in console.export_text()


def test_a_change_beyond_both_runs_restart_intervals_is_a_regression() -> None:
    a = _points("a", {0: [10.0, 10.0], 16: [20.0, 20.2, 19.8]})
    b = _points("b", {0: [10.0, 10.0], 16: [17.6, 17.8, 17.4]})
    spec = next(r for r in compare_runs(a, b).rows if r.label.startswith("b16"))
    assert spec.is_regression and spec.within_noise == []
    assert spec.flags == ["output_tok_s -12.0% regression"]


def test_one_restart_that_broke_determinism_or_failed_breaks_the_config() -> None:
    a = _points("a", {16: [20.0, 20.0, 20.0]})
    b = _points("b", {16: [20.0, 20.0, 20.0]})
    b.loc[2, "determinism"] = "diverged"
    row = compare_runs(a, b).rows[0]
    assert row.is_regression and row.flags == ["determinism broken (diverged)"]
    b.loc[2, ["status", "output_tok_s"]] = ["failed", None]
    row = compare_runs(a, b).rows[0]
    assert "new failure" in row.flags and row.b["output_tok_s"] == 20.0


def test_without_intervals_on_both_sides_the_request_noise_decides_as_before() -> None:
    a = _points("a", {16: [20.0, 26.0, 14.0]})  # restarts in A only
    b = _points("b", {16: [17.6]})
    row = compare_runs(a, b).rows[0]
    assert row.is_regression and row.within_noise == []
    single_a, single_b = _points("a", {16: [20.0]}), _points("b", {16: [17.6]})
    assert compare_runs(single_a, single_b).rows[0].flags == ["output_tok_s -12.0% regression"]
