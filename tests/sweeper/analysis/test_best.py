"""Scores and rankings from point rows: exactness is a hard constraint, intervals over restarts,
no winner inside the noise, separate regimes flagged."""

from __future__ import annotations

from typing import Any

import pytest

from sweeper.analysis.best import best_of, rank, to_confirm
from sweeper.analysis.objective import Interval, score, separate_regimes
from sweeper.config import ServerConfig
from sweeper.spec.search import ConstraintsSpec, ObjectiveSpec


def _row(budget: int | None, tok_s: float, conc: int = 1, **extra: Any) -> dict[str, Any]:
    mode = "ar" if budget is None else "speculative"
    return {
        "mode": mode,
        "budget": budget,
        "topk": None if budget is None else 2,
        "block_size": None if budget is None else 4,
        "cuda_graph": False,
        "temperature": 0.0,
        "max_tokens": 16,
        "concurrency": conc,
        "status": "ok",
        "determinism": "n/a" if budget is None else "exact",
        "output_tok_s": tok_s,
        "restart": 0,
        **extra,
    }


def test_a_violation_anywhere_makes_a_config_infeasible_everywhere() -> None:
    rows = [
        _row(None, 10.0),
        _row(4, 12.0),
        _row(8, 30.0),  # the fastest at c1 ...
        _row(8, 31.0, conc=2, determinism="diverged"),  # ... wrong at c2: the same server
        _row(4, 20.0, conc=2),
    ]
    c1, c2 = rank(rows, ObjectiveSpec())
    assert c1.at == "t0-c1" and c1.winner is not None and c1.winner.label == "b4 k2 bs4"
    assert [e.label for e in c1.excluded] == ["b8 k2 bs4"]
    assert c1.excluded[0].score.state == "infeasible"
    assert c1.excluded[0].score.value == 30.0  # kept: how fast the wrong answer was
    assert c1.baseline is not None and c1.baseline.value == 10.0
    assert c2.winner is not None and c2.winner.label == "b4 k2 bs4"
    found = best_of(rows, ObjectiveSpec())
    assert found is not None and found[0] == "b4 k2 bs4" and found[1].value == 16.0


def test_failed_client_bound_and_slo_constraints() -> None:
    assert score([_row(4, 9.0, status="failed", reason="boom")], ObjectiveSpec()).state == "failed"
    bound = score([_row(4, 9.0, client_bound=True)], ObjectiveSpec())
    assert bound.state == "failed" and "client" in bound.reason and bound.value is None
    slo = ConstraintsSpec(slo=True)
    missed = score([_row(4, 9.0, meets_slo=False)], ObjectiveSpec(), slo)
    assert missed.state == "infeasible" and "SLO at t0-c1" in missed.reason
    assert score([_row(4, 9.0, meets_slo=True)], ObjectiveSpec(), slo).state == "ok"
    busy = [_row(4, 9.0, speedup=1.5, host_busy=False, baseline_busy=True)]
    withheld = score(busy, ObjectiveSpec(column="speedup"))
    assert withheld.state == "failed" and withheld.reason.startswith("withheld: a speedup")
    assert score(busy, ObjectiveSpec()).state == "ok"  # its own tok/s: kept, only marked
    at = score([_row(4, 9.0), _row(4, 5.0, conc=2)], ObjectiveSpec(at=["t0-c2"]))
    assert at.value == 5.0


def test_minimize_and_unknown_level() -> None:
    rows = [_row(4, 9.0, ttft_p90=0.5), _row(8, 5.0, ttft_p90=0.2)]
    (level,) = rank(rows, ObjectiveSpec(column="ttft_p90", goal="minimize"))
    assert level.winner is not None and level.winner.label == "b8 k2 bs4"
    with pytest.raises(ValueError, match="no points at t0-c9"):
        rank(rows, ObjectiveSpec(), at=["t0-c9"])


def test_restarts_give_intervals_and_overlap_means_no_winner() -> None:
    rows = [_row(4, v, restart=i) for i, v in enumerate((10.0, 11.0, 12.0))]
    rows += [_row(8, v, restart=i) for i, v in enumerate((10.5, 11.5, 12.5))]
    rows += [_row(16, v, restart=i) for i, v in enumerate((5.0, 5.1, 5.2))]
    (level,) = rank(rows, ObjectiveSpec())
    assert level.tied and level.winner is None
    assert [e.label for e in level.ranked] == ["b8 k2 bs4", "b4 k2 bs4", "b16 k2 bs4"]
    interval = level.ranked[0].score.interval
    assert interval is not None and interval.n == 3 and interval.cv == pytest.approx(0.087, 0.01)
    assert interval.low == pytest.approx(11.5 - 4.303 * 1.0 / 3**0.5)
    apart = [r for r in rows if r["budget"] != 8]
    (level,) = rank(apart, ObjectiveSpec())
    assert not level.tied and level.winner is not None and level.winner.label == "b4 k2 bs4"


def test_separate_regimes() -> None:
    assert separate_regimes([10.0, 10.2, 14.9, 15.0])
    assert not separate_regimes([10.0, 11.0, 12.0, 13.0])
    assert not separate_regimes([10.0, 15.0])  # two restarts cannot tell noise from regimes
    # One restart apart is an outlier unless far apart: measured here, quiet, 3 restarts each.
    assert not separate_regimes([11.4, 13.16, 12.86])
    assert not separate_regimes([13.79, 14.3, 16.84])
    assert separate_regimes([10.0, 10.2, 14.0])
    one = Interval.of([3.0])
    assert (one.low, one.high, one.cv) == (None, None, None)
    assert not one.overlaps(Interval.of([3.0, 3.1]))


def test_winners_that_differ_only_in_an_extra_flag_are_told_apart() -> None:
    """A grid over `dtype`: its two configs rank under labels naming their values (the record
    columns each config writes, as a run's points hold them)."""
    tree = {"budget": 8, "topk": 2, "block_size": 4}
    rows = [
        {**_row(8, tok_s), **ServerConfig.of({"cuda_graph": False, "dtype": d}, tree).columns("x")}
        for d, tok_s in (("bfloat16", 30.0), ("float32", 20.0))
    ]
    (level,) = rank(rows, ObjectiveSpec())
    assert [e.label for e in level.ranked] == [
        "b8 k2 bs4 dtype=bfloat16",
        "b8 k2 bs4 dtype=float32",
    ]


def test_a_winner_measured_only_after_in_place_switches_is_not_named() -> None:
    # b8 wins on a process that was switched to it; no fresh process confirms it yet.
    rows = [_row(None, 5.0, served_by="load"), _row(4, 10.0, served_by="switch")]
    rows += [_row(8, 12.0, served_by="switch")]
    (level,) = rank(rows, ObjectiveSpec())
    assert level.unconfirmed and level.winner is None
    assert [e.label for e in level.ranked] == ["b8 k2 bs4", "b4 k2 bs4"]
    # A fresh process of it (a load, restart 1) measured within the noise confirms it.
    confirmed = [*rows, _row(8, 12.2, served_by="load", restart=1)]
    (level,) = rank(confirmed, ObjectiveSpec())
    assert not level.unconfirmed and level.winner is not None
    interval = level.winner.score.interval
    assert level.winner.label == "b8 k2 bs4" and interval is not None and interval.n == 2


def test_the_configs_to_confirm_are_the_named_ones_measured_only_after_switches() -> None:
    # The answer's ranking (speedup): b8 first, switched to; b4 (a load) second.
    def row(budget: int | None, speedup: float | None, **extra: Any) -> dict[str, Any]:
        return _row(budget, 10.0, speedup=speedup, server_config_id=f"id{budget}", **extra)

    rows = [row(None, None, served_by="load"), row(4, 1.2, served_by="load")]
    rows += [row(8, 1.5, served_by="switch")]
    assert to_confirm(rows) == {"id8": ("t0-c1",)}
    # Measured on a fresh process, it is named: nothing left to confirm.
    assert to_confirm([*rows, row(8, 1.5, served_by="load", restart=1)]) == {}
    # b4 switched-to and first: it is the one; a switched config that does not rank first is not.
    assert to_confirm([rows[0], row(4, 1.6, served_by="switch"), rows[2]]) == {"id4": ("t0-c1",)}
    # Every speedup withheld (a busy host): the fastest proven config, which the answer names.
    busy = [{**r, "speedup": None} for r in rows]
    busy[1]["output_tok_s"], busy[2]["output_tok_s"] = 9.0, 11.0
    assert to_confirm(busy) == {"id8": ("t0-c1",)}


def test_a_confirmation_counts_only_at_the_levels_it_measured() -> None:
    # b8 first at c1 and c2, switched to at both; b4 (a load) second at both.
    def row(budget: int | None, conc: int, **extra: Any) -> dict[str, Any]:
        speedup = {None: None, 4: 1.2, 8: 1.5}[budget]
        return _row(budget, 10.0, conc, speedup=speedup, server_config_id=f"id{budget}", **extra)

    rows = [row(None, c, served_by="load") for c in (1, 2)]
    rows += [row(4, c, served_by="load") for c in (1, 2)]
    rows += [row(8, c, served_by="switch") for c in (1, 2)]
    assert to_confirm(rows) == {"id8": ("t0-c1", "t0-c2")}
    # A fresh process measured it at c1 only: named there, still unconfirmed at c2.
    fresh_c1 = [*rows, row(8, 1, served_by="load", restart=1)]
    c1, c2 = rank(fresh_c1, ObjectiveSpec(column="speedup"))
    assert (c1.at, c1.unconfirmed, c2.at, c2.unconfirmed) == ("t0-c1", False, "t0-c2", True)
    assert to_confirm(fresh_c1) == {"id8": ("t0-c2",)}
