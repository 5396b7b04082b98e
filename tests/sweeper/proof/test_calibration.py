"""Near-ties calibrated by an AR-vs-AR control: a config with more near-ties than AR flips at
another batch shape is flagged, and its near-ties count as broken in the diagnosis and as
violations in every judge (the exit code through `calibrated_points`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from sweeper.diagnosis.rule import diagnose
from sweeper.diagnosis.runs import calibrated, diagnose_requests
from sweeper.diagnosis.text import sentence
from sweeper.exit_codes import EXIT_OK, EXIT_VIOLATION, exit_code_for
from sweeper.proof.calibration import Control, ar_control, calibrated_points, near_tie_rates
from sweeper.results.records import factor_kinds


def _req(mode: str, prompt: str, conc: int, sha: str, verdict: str, **cfg: Any) -> dict:
    return {
        "mode": mode,
        "host": "local",
        "prompt_id": prompt,
        "repeat": 0,
        "max_tokens": 16,
        "temperature": 0.0,
        "concurrency": conc,
        "sha256": sha,
        "verdict": verdict,
        "error": None,
        "budget": cfg.get("budget"),
        "topk": cfg.get("topk"),
        "block_size": 4 if mode != "ar" else None,
        "cuda_graph": False,
        "point_id": f"{mode}-{cfg.get('topk')}-{conc}",
    }


def _run(flip_in_ar: bool) -> list[dict]:
    rows = []
    for i in range(10):
        p = f"p{i}"
        rows.append(_req("ar", p, 1, f"s{i}", "n/a"))
        ar2 = f"x{i}" if flip_in_ar and i < 5 else f"s{i}"
        rows.append(_req("ar", p, 2, ar2, "n/a"))
        for conc in (1, 2):
            rows.append(_req("speculative", p, conc, f"s{i}", "exact", budget=8, topk=1))
            tie = "near-tie" if i < 6 else "exact"  # topk 4 flips where margins are small
            rows.append(_req("speculative", p, conc, f"t{i}", tie, budget=8, topk=4))
    return rows


def test_a_config_above_the_control_is_flagged_and_diagnosed() -> None:
    rows = _run(flip_in_ar=False)
    control = ar_control(rows)
    assert control == Control(pairs=10, flips=0) and 0.2 < control.upper < 0.35
    rates = near_tie_rates(rows, control)
    assert rates["b8 k4 bs4"].flagged and rates["b8 k4 bs4"].rate == 0.6
    assert not rates["b8 k1 bs4"].flagged
    marked = calibrated(pd.DataFrame(rows))
    assert marked["near_tie_excess"].sum() == 12
    found = diagnose(marked, factor_kinds(list(pd.DataFrame(rows).columns)))  # as on disk
    assert found.broken == 12 and "topk" in found.implicated


def test_natural_flips_in_the_control_leave_near_ties_clean() -> None:
    rows = _run(flip_in_ar=True)  # AR itself flips half its requests at another batch shape
    control = ar_control(rows)
    assert control is not None and control.rate == 0.5
    assert not near_tie_rates(rows, control)["b8 k4 bs4"].flagged
    kinds = factor_kinds(list(pd.DataFrame(rows).columns))
    assert diagnose(calibrated(pd.DataFrame(rows)), kinds).broken == 0
    single = [r for r in rows if r["concurrency"] == 1]
    assert ar_control(single) is None  # one batch shape: nothing to calibrate against
    assert not near_tie_rates(single, None)["b8 k4 bs4"].flagged


def test_the_diagnosis_says_what_the_control_flagged() -> None:
    kinds = factor_kinds(list(pd.DataFrame(_run(False)).columns))
    flagged = sentence(diagnose_requests(calibrated(pd.DataFrame(_run(False))), kinds))
    assert flagged.endswith(
        "Near-ties against the AR-vs-AR control (0 of 10 pairs flipped, 95% upper bound 27.8%): "
        "above it, so their near-ties count as violations: b8 k4 bs4 12 of 20 (60%)."
    )
    natural = sentence(diagnose_requests(calibrated(pd.DataFrame(_run(True))), kinds))
    assert natural.startswith("No violations among 60 judged requests (12 near-ties")
    assert natural.endswith(
        "(5 of 10 pairs flipped, 95% upper bound 76.3%): no config above it, "
        "so its near-ties stay numerics."
    )
    single = pd.DataFrame([r for r in _run(False) if r["concurrency"] == 1])
    assert "uncalibrated: the AR baseline ran at one batch shape" in sentence(
        diagnose_requests(calibrated(single), kinds)
    )


def _points(rows: list[dict]) -> list[dict]:
    """The point rows those requests make: each point's worst verdict."""
    order = ["exact", "near-tie", "n/a"]
    points: dict[str, dict] = {}
    for r in rows:
        point = points.setdefault(
            r["point_id"],
            {k: r[k] for k in ("point_id", "mode", "budget", "topk", "block_size", "cuda_graph")}
            | {"status": "ok", "determinism": "exact"},
        )
        if order.index(r["verdict"]) > order.index(point["determinism"]):
            point["determinism"] = r["verdict"]
    return list(points.values())


def test_every_judge_counts_near_ties_above_the_control_as_violations() -> None:
    rows = _run(flip_in_ar=False)
    raw = {p["point_id"]: p for p in _points(rows)}
    assert exit_code_for(raw) == EXIT_OK  # read raw, the near-ties would pass
    judged = {p["point_id"]: p for p in calibrated_points(raw.values(), rows)}
    assert judged["speculative-4-1"]["determinism"] == "diverged"
    assert judged["speculative-4-1"]["near_tie_excess"] is True
    assert judged["speculative-1-1"]["determinism"] == "exact"
    assert exit_code_for(judged) == EXIT_VIOLATION
    # AR flipping as often as the config: numerics here, so nothing changes.
    noisy = _run(flip_in_ar=True)
    calm = calibrated_points(_points(noisy), noisy)
    assert {p["determinism"] for p in calm if p["topk"] == 4} == {"near-tie"}
