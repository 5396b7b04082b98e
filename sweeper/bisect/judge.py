"""Is a commit good or bad? A step's run directories read back and judged on the chosen points.

- `verdict`: bad when any chosen point broke determinism (`proof.verdicts.VIOLATIONS`, the
  judgement behind `sweeper run`'s exit 4); the evidence is its first violating request (prompt,
  verdict, first divergent token).
- `output_tok_s`: each chosen point's mean over its restarts with the 95% interval
  (`analysis.objective.Interval`), against the good end's mean: bad when the whole interval lies
  below the good mean by more than the threshold, good when it lies wholly above that line, and
  undecided while the line falls inside it: the step is measured again, never guessed.
A commit none of whose chosen points ran (the server never started, the package did not import)
is a skip, with the recorded reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sweeper.analysis.objective import Interval
from sweeper.bisect.state import PointEvidence
from sweeper.config import first_restart_label, is_missing, point_id
from sweeper.proof.verdicts import VIOLATIONS, worst
from sweeper.results.reader import read_run

Judged = Literal["good", "bad", "skip", "undecided"]


@dataclass(frozen=True)
class Judgement:
    outcome: Judged
    reason: str
    points: list[PointEvidence]


def base_id(row: Mapping[str, Any]) -> str:
    """The id a record's point answers to whatever its restart (`plan.only`'s ids)."""
    label = first_restart_label(str(row["server_label"]))
    return point_id(str(row["host"]), label, str(row["request_config_id"]))


def _rows(
    runs: Iterable[Path], chosen: Sequence[str], with_requests: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The chosen points' point rows and (unless not needed) request rows over every run of
    the step."""
    points, requests = [], []
    for run_dir in runs:
        run = read_run(run_dir)
        try:
            frame = run.points
            if frame is not None:
                points += [r for r in frame.to_dict("records") if base_id(r) in chosen]
            ids = {str(r["point_id"]) for r in points}
            if with_requests and ids and run.has_requests:
                table = run.requests(
                    ["point_id", "prompt_id", "verdict", "divergence_index", "text"],
                    categorical=False,
                )
                requests += [r for r in table.to_dict("records") if str(r["point_id"]) in ids]
        finally:
            run.close()
    return points, requests


def _skip_if_nothing_ran(points: list[dict[str, Any]], chosen: Sequence[str]) -> Judgement | None:
    ran = [p for p in points if p.get("status") == "ok"]
    if ran:
        return None
    reasons = list(dict.fromkeys(str(p.get("reason") or "no reason recorded") for p in points))
    why = "; ".join(reasons) if reasons else "no record of the chosen points"
    evidence = [
        PointEvidence(
            point_id=str(p["point_id"]), status=str(p["status"]), detail=str(p.get("reason") or "")
        )
        for p in points
    ]
    return Judgement("skip", f"none of the {len(chosen)} chosen point(s) ran: {why}", evidence)


def judge_verdict(runs: Iterable[Path], chosen: Sequence[str]) -> Judgement:
    """Bad when a chosen point broke determinism; its first violating request is the evidence."""
    points, requests = _rows(runs, chosen)
    skipped = _skip_if_nothing_ran(points, chosen)
    if skipped is not None:
        return skipped
    evidence = []
    for point in points:
        verdict = str(point.get("determinism") or "n/a")
        detail = ""
        if verdict in VIOLATIONS:
            failing = next(
                (
                    r
                    for r in requests
                    if r["point_id"] == point["point_id"] and r.get("verdict") in VIOLATIONS
                ),
                None,
            )
            if failing is not None:
                at: Any = failing.get("divergence_index")
                where = f" at output token {int(at)}" if not is_missing(at) else ""
                text = str(failing.get("text") or "")[:80]
                said = f"prompt {failing['prompt_id']}: {failing['verdict']}{where}"
                detail = f"{said}; output {text!r}"
        evidence.append(
            PointEvidence(
                point_id=str(point["point_id"]),
                status=str(point["status"]),
                determinism=verdict,
                detail=detail,
            )
        )
    judged = [e.determinism for e in evidence if e.status == "ok" and e.determinism]
    broken = [e for e in evidence if e.determinism in VIOLATIONS]
    if broken:
        first = broken[0]
        return Judgement("bad", f"{first.point_id} {first.determinism}: {first.detail}", evidence)
    return Judgement(
        "good", f"no violation on {len(judged)} point(s) (worst {worst(judged)})", evidence
    )


def intervals(
    runs: Iterable[Path], chosen: Sequence[str], metric: str = "output_tok_s"
) -> tuple[dict[str, Interval], list[dict[str, Any]]]:
    """Each chosen point's metric over every ok restart in the runs, by base id."""
    points, _ = _rows(runs, chosen, with_requests=False)
    values: dict[str, list[float]] = {}
    for row in points:
        value: Any = row.get(metric)
        if row.get("status") == "ok" and not is_missing(value):
            values.setdefault(base_id(row), []).append(float(value))
    return {k: Interval.of(v) for k, v in values.items()}, points


def judge_speed(
    runs: Iterable[Path], chosen: Sequence[str], good: Mapping[str, Interval], threshold: float
) -> Judgement:
    """Slower than the good end by more than `threshold` (a fraction) outside restart noise."""
    runs = list(runs)
    found, points = intervals(runs, chosen)
    skipped = _skip_if_nothing_ran(points, chosen)
    if skipped is not None:
        return skipped
    evidence: list[PointEvidence] = []
    verdicts: list[tuple[Judged, str]] = []
    for pid in chosen:
        got, ref = found.get(pid), good.get(pid)
        if got is None or ref is None:
            verdicts.append(("undecided", f"{pid}: no measurement to compare"))
            continue
        line = ref.mean * (1 - threshold)
        change = got.mean / ref.mean - 1 if ref.mean else 0.0
        measured = f"{_interval(got)} vs good {ref.mean:.1f} ({change:+.1%}; line {line:.1f})"
        shown = f"{pid}: {measured}"
        evidence.append(_measured(pid, got, measured))
        if got.low is None or got.high is None:
            verdicts.append(("undecided", f"{shown}: one restart has no interval"))
        elif got.high < line and not got.overlaps(ref):
            verdicts.append(("bad", shown))
        elif got.low >= line:
            verdicts.append(("good", shown))
        else:
            verdicts.append(("undecided", f"{shown}: the threshold lies inside its interval"))
    outcome: Judged
    for outcome in ("bad", "undecided"):
        hits = [why for o, why in verdicts if o == outcome]
        if hits:
            return Judgement(outcome, "; ".join(hits), evidence)
    return Judgement("good", "; ".join(why for _, why in verdicts), evidence)


def judge_reference(runs: Iterable[Path], chosen: Sequence[str]) -> Judgement:
    """The good end under `output_tok_s`: every chosen point measured with an interval (2+
    restarts), which every later step is held against; else undecided (measured again)."""
    runs = list(runs)
    found, points = intervals(runs, chosen)
    skipped = _skip_if_nothing_ran(points, chosen)
    if skipped is not None:
        return skipped
    evidence = [_measured(pid, i, f"{_interval(i)} (reference)") for pid, i in found.items()]
    missing = [pid for pid in chosen if pid not in found or found[pid].low is None]
    if missing:
        return Judgement("undecided", f"no interval yet for {', '.join(missing)}", evidence)
    said = "; ".join(f"{e.point_id}: {e.detail}" for e in evidence)
    return Judgement("good", f"reference: {said}", evidence)


def _measured(point_id: str, interval: Interval, detail: str) -> PointEvidence:
    """A point's evidence under `output_tok_s`: its interval over restarts, said `detail`."""
    return PointEvidence(
        point_id=point_id,
        status="ok",
        mean=interval.mean,
        low=interval.low,
        high=interval.high,
        n=interval.n,
        detail=detail,
    )


def _interval(interval: Interval) -> str:
    if interval.low is None or interval.high is None:
        return f"{interval.mean:.1f} tok/s (n={interval.n})"
    return f"{interval.mean:.1f} tok/s [{interval.low:.1f}, {interval.high:.1f}] (n={interval.n})"
