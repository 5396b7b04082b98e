"""Per-dataset numbers: points split by their requests' dataset, speedup against the AR split of
the same prompts, tau from verify rounds, histograms added; the papers' table; and compare
matching the splits, so a regression on one dataset is flagged though the point's mean is not."""

from __future__ import annotations

import pandas as pd
import pytest

from sweeper.analysis.compare import compare_runs
from sweeper.analysis.datasets import (
    dataset_points,
    dataset_requests,
    dataset_table,
    histogram_text,
)

CONFIG = {"host": "h", "engine": "ddtree_runtime", "block_size": 8, "cuda_graph": False}
LOAD = {"temperature": 0.0, "max_tokens": 8, "concurrency": 1}


def _points() -> pd.DataFrame:
    rows: list[dict[str, object]] = [
        {"point_id": "ar", "mode": "ar", "budget": None, "topk": None},
        {"point_id": "dd", "mode": "speculative", "budget": 16, "topk": 4},
    ]
    return pd.DataFrame(
        [{**CONFIG, **LOAD, **r, "status": "ok", "determinism": "exact"} for r in rows]
    )


def _requests(code_e2e: float = 1.0) -> pd.DataFrame:
    rows = []
    for pid, fast in (("ar", False), ("dd", True)):
        for dataset, n in (("humaneval", 3), ("mt-bench", 3)):
            for i in range(n):
                e2e = 2.0 if not fast else (code_e2e if dataset == "humaneval" else 1.6)
                rows.append(
                    {
                        "point_id": pid,
                        "prompt_id": f"{dataset}-{i}",
                        "dataset": dataset,
                        "output_tokens": 8,
                        "e2e": e2e + 0.01 * i,
                        "ttft": 0.1,
                        "tau": None if not fast else 2.0,
                        "verify_rounds": 8 if not fast else (2 if dataset == "humaneval" else 4),
                        "verdict": "n/a" if not fast else "exact",
                        "error": None,
                        "accepted_hist": None if not fast else [0, 1, 1],
                    }
                )
    return pd.DataFrame(rows)


def test_points_split_by_dataset_with_their_own_speedup_and_tau() -> None:
    split = dataset_points(_points(), _requests()).set_index("point_id")
    assert list(split.index) == ["ar/humaneval", "ar/mt-bench", "dd/humaneval", "dd/mt-bench"]
    code, chat = split.loc["dd/humaneval"], split.loc["dd/mt-bench"]
    assert code.tau == 4.0 and chat.tau == 2.0  # output tokens per verify round
    # Summed request time: AR 6.03 s, DDTree 3.03 s (HumanEval) and 4.83 s (MT-Bench).
    assert code.speedup == pytest.approx(6.03 / 3.03) and chat.speedup == pytest.approx(6.03 / 4.83)
    assert pd.isna(split.loc["ar/humaneval"].speedup)
    assert code.accepted_hist == [0, 3, 3] and histogram_text(code.accepted_hist) == "1:50% 2:50%"
    table = dataset_table(split.reset_index())
    assert list(table.index) == [("b16 k4 bs8", "humaneval"), ("b16 k4 bs8", "mt-bench")]
    assert list(table.columns) == [(0.0, "speedup"), (0.0, "tau"), (0.0, "acceptance")]


def test_compare_flags_the_dataset_that_regressed() -> None:
    before, after = _requests(), _requests(code_e2e=1.9)  # HumanEval slows, MT-Bench does not
    splits = [dataset_points(_points(), r) for r in (before, after)]
    result = compare_runs(
        splits[0], splits[1], dataset_requests(before), dataset_requests(after), 0.05
    )
    flagged = {r.label: r.flag_text for r in result.rows if r.flags}
    assert list(flagged) == ["b16 k4 bs8 T=0 c=1 [humaneval]"]
    assert "output_tok_s" in flagged["b16 k4 bs8 T=0 c=1 [humaneval]"]
