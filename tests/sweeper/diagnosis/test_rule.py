"""Attribution on crafted request records: separable, confounded, noisy (near-ties), a
nondeterministic pattern, no violations, a fault on every speculative path, a new grid axis, and
the same rule back whatever the factor columns are called or in which order they come."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from sweeper.diagnosis.rule import Diagnosis, diagnose
from sweeper.diagnosis.text import sentence, table
from sweeper.results.records import RequestRecord

PROMPTS = ("p0", "p1", "p2", "p3")
Row = dict[str, Any]


def grid(
    outcome: Callable[[Row], str],
    *,
    concurrency: tuple[int, ...] = (1, 4),
    repeats: int = 2,
    ar: bool = False,
) -> list[Row]:
    """Request rows over budget x topk x cuda_graph x concurrency x prompt x repeat, with the
    runtime's exposure: cuda_graph fixes the width (every round pads); at concurrency 4 without
    it, prompts p0-p2 have the smaller trees of their batch and pad; p3 never does."""
    rows = []
    for budget, topk, graph, conc, prompt, repeat in itertools.product(
        (4, 16), (1, 4), (True, False), concurrency, PROMPTS, range(repeats)
    ):
        padded = graph or (conc == 4 and prompt != "p3")
        row: Row = {
            "run_id": "r",
            "host": "local",
            "point_id": f"b{budget}-k{topk}-cg{int(graph)}-c{conc}",
            "engine": "ddtree_runtime",
            "mode": "speculative",
            "budget": budget,
            "topk": topk,
            "block_size": 8,
            "cuda_graph": graph,
            "temperature": 0.0,
            "max_tokens": 32,
            "concurrency": conc,
            "top_p": None,
            "prompt_id": prompt,
            "repeat": repeat,
            "padded_rounds": 6 if padded else 0,
            "padding_rows": 30 if padded else 0,
            "fixed_shape_rounds": 9 if graph else 0,
            "cuda_graph_rounds": 0,
            "batched_rounds": 8 if conc > 1 else 0,
            "max_tree_depth": min(budget, 7),
            "max_tree_width": topk,
            "max_tree_nodes": budget,
            "max_verify_width": 1 + budget,
            "accepted_hist": [1, 2, 3],
        }
        row["verdict"] = outcome(row)
        rows.append(row)
    if ar:
        for graph, conc, prompt, repeat in itertools.product(
            (True, False), concurrency, PROMPTS, range(repeats)
        ):
            rows.append(
                {
                    **rows[0],
                    "point_id": f"ar-cg{int(graph)}-c{conc}",
                    "mode": "ar",
                    **dict.fromkeys(("budget", "topk", "block_size")),
                    "cuda_graph": graph,
                    "concurrency": conc,
                    "prompt_id": prompt,
                    "repeat": repeat,
                    **dict.fromkeys(("padded_rounds", "padding_rows", "fixed_shape_rounds"), 0),
                    "batched_rounds": 8 if conc > 1 else 0,
                    **dict.fromkeys(("max_tree_depth", "max_tree_width", "max_tree_nodes"), 0),
                    "max_verify_width": 1,
                    "verdict": "n/a",  # the reference: not judged against itself
                }
            )
    return rows


def padded_breaks(row: Row) -> str:
    return "diverged" if row["padded_rounds"] > 0 else "exact"


def rule_of(d: Diagnosis) -> set[frozenset[tuple[str, str, str]]]:
    """The rule as a set of terms, each the set of conditions that moved together."""
    return {frozenset(c.key() for c in (t.condition, *t.together)) for t in d.rule}


def test_separable_padding_is_implicated_and_the_rest_is_cleared_or_acts_through_it() -> None:
    d = diagnose(grid(padded_breaks))
    assert rule_of(d) == {frozenset({("padded_rounds", ">", "0")})}
    assert (d.broken, d.explained, d.outside, d.clean_inside) == (88, 88, 0, 0)
    assert d.status_of("padded_rounds") == "implicated"
    # cuda_graph and concurrency change how often padding happens, not what padding does.
    for column in ("cuda_graph", "concurrency", "fixed_shape_rounds", "batched_rounds"):
        assert d.status_of(column) == "acts only through", column
    for column in ("topk", "budget", "max_tree_width", "prompt_id"):
        assert d.status_of(column) == "cleared", column
    for column in ("engine", "block_size", "temperature", "cuda_graph_rounds", "top_p"):
        assert d.status_of(column) == "not varied", column
    graph = next(f for f in d.findings if f.column == "cuda_graph")
    assert [lc.text for lc in graph.overall] == ["off: 24/64", "on: 64/64"]
    assert [lc.text for lc in graph.within] == ["off: 24/24", "on: 64/64"]
    text = sentence(d)
    assert "they live where padded_rounds > 0" in text
    assert "Acts only through padded_rounds: batched_rounds, concurrency, cuda_graph" in text
    assert {row["factor"] for row in table(d)} >= {"padded_rounds", "cuda_graph", "prompt_id"}


def test_confounded_factors_are_named_together_not_told_apart() -> None:
    # At concurrency 1 only, padding happens exactly when cuda_graph is on: the seed's grid.
    d = diagnose(grid(padded_breaks, concurrency=(1,)))
    assert rule_of(d) == {
        frozenset(
            {
                ("fixed_shape_rounds", ">", "0"),
                ("padded_rounds", ">", "0"),
                ("cuda_graph", "=", "on"),
            }
        )
    }
    for column in ("padded_rounds", "cuda_graph", "fixed_shape_rounds"):
        assert d.status_of(column) == "confounded", column
    assert d.status_of("topk") == "cleared"
    assert "cannot separate" in sentence(d)


def test_near_ties_are_not_violations_and_a_stray_violation_stays_outside() -> None:
    rng = random.Random(3)

    def noisy(row: Row) -> str:
        if rng.random() < 0.15:
            return "near-tie"  # numerics, anywhere in the grid
        return padded_breaks(row)

    rows = grid(noisy)
    stray = next(r for r in rows if r["padded_rounds"] == 0 and r["verdict"] == "exact")
    stray["verdict"] = "diverged"
    d = diagnose(pd.DataFrame(rows))  # as read back from requests.parquet
    assert rule_of(d) == {frozenset({("padded_rounds", ">", "0")})}
    assert d.outside == 1 and d.broken == d.explained + 1
    assert d.verdicts == {"diverged": d.broken}
    assert d.status_of("topk") == "cleared"


def test_a_nondeterministic_pattern_is_attributed_and_called_so() -> None:
    def racy(row: Row) -> str:
        return "nondeterministic" if row["concurrency"] > 1 else "exact"

    d = diagnose(grid(racy))
    assert rule_of(d) == {frozenset({("batched_rounds", ">", "0"), ("concurrency", "=", "4")})}
    assert d.verdicts == {"nondeterministic": 64} and d.clean_inside == 0
    assert d.status_of("padded_rounds") == "acts only through"
    assert d.status_of("cuda_graph") == "cleared"
    assert "nondeterministic" in sentence(d) and "race" in sentence(d)


def test_no_violations_with_near_ties_implicates_nothing() -> None:
    rng = random.Random(5)
    d = diagnose(grid(lambda row: "near-tie" if rng.random() < 0.2 else "exact", ar=True))
    assert d.broken == 0 and not d.rule and d.implicated == [] and d.near_ties > 20
    assert {f.status for f in d.findings} <= {"cleared", "not varied", "unknown"}
    assert "nothing to explain" in sentence(d)


def test_a_fault_on_every_speculative_path_names_the_mode_not_padding() -> None:
    # The AR baseline is the reference (clean); every speculative request breaks.
    d = diagnose(grid(lambda row: "garbled", ar=True))
    # One term: speculative decoding itself, with the tree sizes only it has (AR has none).
    (term,) = rule_of(d)
    assert ("mode", "=", "speculative") in term and ("max_tree_depth", ">=", "4") in term
    assert (d.explained, d.clean_inside) == (128, 0)
    assert d.status_of("mode") == "confounded"
    assert d.status_of("padded_rounds") == "acts only through"  # only speculative requests pad
    for column in ("cuda_graph", "concurrency", "topk", "budget", "prompt_id"):
        assert d.status_of(column) == "cleared", column


def test_a_new_axis_joins_without_a_change() -> None:
    # An extra grid flag no record model declares (say a prefill chunk size) is a factor too,
    # as are the declared config columns (the load's `rate`).
    assert (
        "prefill_chunk" not in RequestRecord.model_fields and "rate" in RequestRecord.model_fields
    )
    for column in ("prefill_chunk", "rate"):
        rows = grid(lambda row: "exact")
        for index, row in enumerate(rows):
            row[column] = (1.0, 8.0)[index % 2]
            row["verdict"] = "diverged" if row[column] == 8.0 and row["budget"] == 16 else "exact"
        d = diagnose(rows)
        axis, size = sorted(rule_of(d), key=len)
        assert axis == {(column, "=", "8")} and ("budget", "=", "16") in size, column
        assert (d.explained, d.clean_inside) == (32, 0)
        assert d.status_of(column) == "implicated" and d.status_of("topk") == "cleared"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_renaming_or_reordering_factor_columns_gives_the_same_rule(seed: int) -> None:
    rng = random.Random(seed)
    rows = grid(lambda row: "diverged" if row["padded_rounds"] and row["topk"] == 4 else "exact")
    original = diagnose(rows)
    names = list(rows[0])
    factors = [n for n in names if n not in ("verdict", "mode", "engine", "prompt_id", "repeat")]
    renamed = {n: f"x{rng.randrange(10**6)}_{n[::-1]}" for n in factors}
    shuffled = []
    for row in rows:
        keys = list(row)
        rng.shuffle(keys)
        shuffled.append({renamed.get(k, k): row[k] for k in keys})
    rng.shuffle(shuffled)
    kinds_before = {c: k for c, k in _kinds(original).items()}
    kinds_after = {renamed.get(c, c): k for c, k in kinds_before.items()}
    again = diagnose(shuffled, kinds=dict(rng.sample(list(kinds_after.items()), len(kinds_after))))
    back = {v: k for k, v in renamed.items()}
    assert {frozenset((back.get(c, c), op, v) for c, op, v in term) for term in rule_of(again)} == (
        rule_of(original)
    )
    assert {back.get(f.column, f.column): f.status for f in again.findings} == {
        f.column: f.status for f in original.findings
    }
    assert (again.broken, again.explained, again.clean_inside) == (
        original.broken,
        original.explained,
        original.clean_inside,
    )


def _kinds(d: Diagnosis) -> dict[str, str]:
    assert d.population is not None
    return dict(d.population.kinds)
