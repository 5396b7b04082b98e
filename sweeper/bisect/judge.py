"""Is a commit good or bad? A step's run directories read back and judged on the chosen points.

- `verdict`: bad when any chosen point broke determinism (`proof.verdicts.standing`, the
  judgement behind `sweeper run`'s exit 4); the evidence is its first violating request (prompt,
  verdict, first divergent token). Good only when every chosen speculative point that ran is
  proven (`proof.verdicts.proven`); one left unproven, or whose recorded verdict is damaged
  (missing, no verdict's name), is a skip naming it: no verdict, no judgement.
- `output_tok_s`: each chosen point's restarts, pooled over the commit's runs, against the good
  end's, pooled over its runs (`speed.compare`: the ratio of geometric means with both ends'
  noise in its interval, each end narrower than the threshold): bad when the ratio lies wholly
  below `1 - threshold`, good when wholly above, and undecided otherwise, naming the end(s) to
  measure again, never a guess. Only restarts measured on a quiet host are judged: a restart
  beside other load (`host_busy`) says how busy the host was, not how fast the commit is.
A commit none of whose chosen points ran (the server never started, the package did not import)
is a skip, with the recorded reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper.bisect.search import Outcome
from sweeper.bisect.speed import End, LogInterval, SpeedVerdict, compare
from sweeper.bisect.state import PointEvidence
from sweeper.config import first_restart_label, is_missing, point_id
from sweeper.proof.verdicts import VIOLATIONS, standing, verdict_damage, worst
from sweeper.results.reader import read_run


@dataclass(frozen=True)
class Judgement:
    """What a commit's runs showed: its outcome (None: not decided yet), why, each chosen
    point's evidence, and while undecided which ends to measure again."""

    outcome: Outcome | None
    reason: str
    points: list[PointEvidence]
    again: frozenset[End] = frozenset()


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
    unproven = []
    for point in points:
        recorded = point.get("determinism")
        verdict = str(recorded) if standing(recorded) != "damaged" else "damaged"
        detail = verdict_damage(recorded)
        ran = point.get("status") == "ok" and str(point.get("mode")) != "ar"
        if ran and standing(recorded) in ("unjudged", "damaged"):
            unproven.append(f"{point['point_id']} {detail or verdict}")
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
    if unproven:
        return Judgement("skip", f"not proven, so not judged: {'; '.join(unproven)}", evidence)
    return Judgement(
        "good", f"no violation on {len(judged)} point(s) (worst {worst(judged)})", evidence
    )


@dataclass(frozen=True)
class Restarts:
    """One point's restarts at one end: the metric of those measured on a quiet host, and
    how many were measured on a busy one (kept on disk, never judged: as `best` withholds a
    speedup measured beside other load, a bisect never blames a commit for the host's load)."""

    quiet: list[float]
    busy: int

    def enough(self) -> bool:
        """Two quiet restarts at least: an interval."""
        return len(self.quiet) >= 2

    def said(self, end: str) -> str:
        total = len(self.quiet) + self.busy
        return (
            f"{end} has {len(self.quiet)} of its {total} restart(s) measured on a quiet host "
            f"({self.busy} on a busy one, not judged)"
        )


def samples(
    runs: Iterable[Path], chosen: Sequence[str], metric: str = "output_tok_s"
) -> tuple[dict[str, Restarts], list[dict[str, Any]]]:
    """Each chosen point's restarts over every run (pooled), by base id, and the point rows
    they came from. A restart counts when ok with a positive value; it is judged only when its
    host was not busy (`host_busy`, `measure.hostload`)."""
    points, _ = _rows(runs, chosen, with_requests=False)
    found: dict[str, Restarts] = {}
    for row in points:
        value: Any = row.get(metric)
        if row.get("status") != "ok" or is_missing(value) or not float(value) > 0:
            continue
        restarts = found.setdefault(base_id(row), Restarts([], 0))
        if row.get("host_busy") is True:
            found[base_id(row)] = Restarts(restarts.quiet, restarts.busy + 1)
        else:
            restarts.quiet.append(float(value))
    return found, points


def judge_reference(runs: Iterable[Path], chosen: Sequence[str]) -> Judgement:
    """The good end under `output_tok_s`: every chosen point measured on 2+ quiet restarts (an
    interval, which every later step is held against); else undecided (measured again). How
    wide it may be is decided against each commit (`speed.compare`), where both ends' noise
    counts."""
    found, points = samples(runs, chosen)
    skipped = _skip_if_nothing_ran(points, chosen)
    if skipped is not None:
        return skipped
    evidence, missing = [], []
    for pid in chosen:
        restarts = found.get(pid, Restarts([], 0))
        if restarts.quiet:
            interval = LogInterval.of(restarts.quiet)
            evidence.append(_measured(pid, interval, f"{interval.said()} (reference)"))
        if not restarts.enough():
            missing.append(f"{pid}: {restarts.said('the good end')}")
    if missing:
        return Judgement(None, "; ".join(missing), evidence, frozenset({"good"}))
    said = "; ".join(f"{e.point_id}: {e.detail}" for e in evidence)
    return Judgement("good", f"reference: {said}", evidence)


def judge_speed(
    runs: Iterable[Path], good_runs: Iterable[Path], chosen: Sequence[str], threshold: float
) -> Judgement:
    """Slower than the good end by more than `threshold` (a fraction), judged on both ends'
    quiet restarts pooled over their runs (`speed.compare`): bad when any chosen point is,
    undecided (with the ends to measure again) when any is undecided, else good."""
    found, points = samples(runs, chosen)
    skipped = _skip_if_nothing_ran(points, chosen)
    if skipped is not None:
        return skipped
    reference, _ = samples(good_runs, chosen)
    evidence: list[PointEvidence] = []
    verdicts: list[tuple[str, SpeedVerdict]] = []
    for pid in chosen:
        ends: tuple[tuple[End, str, Restarts], ...] = (
            ("commit", "the commit", found.get(pid, Restarts([], 0))),
            ("good", "the good end", reference.get(pid, Restarts([], 0))),
        )
        short = [(e, name, r) for e, name, r in ends if not r.enough()]
        if short:
            reason = "; ".join(r.said(name) for _, name, r in short)
            verdicts.append((pid, SpeedVerdict(None, reason, frozenset(e for e, _, _ in short))))
            continue
        got = LogInterval.of(ends[0][2].quiet)
        verdict = compare(got, LogInterval.of(ends[1][2].quiet), threshold)
        verdicts.append((pid, verdict))
        evidence.append(_measured(pid, got, verdict.reason))
    for outcome in ("bad", None):
        hits = [(pid, v) for pid, v in verdicts if v.outcome == outcome]
        if hits:
            reason = "; ".join(f"{pid}: {v.reason}" for pid, v in hits)
            again = frozenset(e for _, v in hits for e in v.again)
            return Judgement(outcome, reason, evidence, again if outcome is None else frozenset())
    return Judgement("good", "; ".join(f"{p}: {v.reason}" for p, v in verdicts), evidence)


def host_load(runs: Iterable[Path], chosen: Sequence[str]) -> str:
    """How busy each host was while the runs measured the chosen points, from what each point
    recorded (`measure.hostload`): the most CPU other processes used, and how many restarts
    were measured on a busy host."""
    points, _ = _rows(runs, chosen, with_requests=False)
    said = []
    for host in dict.fromkeys(str(p.get("host")) for p in points):
        rows = [p for p in points if str(p.get("host")) == host and p.get("status") == "ok"]
        others = [
            float(p["host_other_cpu"]) for p in rows if not is_missing(p.get("host_other_cpu"))
        ]
        if not others:
            said.append(f"host {host}: its load was not recorded")
            continue
        cpus = next((int(p["host_cpus"]) for p in rows if not is_missing(p.get("host_cpus"))), 0)
        busy = sum(p.get("host_busy") is True for p in rows)
        of = f" of {cpus}" if cpus else ""
        said.append(
            f"host {host}: other processes used up to {max(others):.2f}{of} CPUs, "
            f"{busy} of {len(rows)} restart(s) measured busy"
        )
    return "; ".join(said) or "no host's load was recorded"


def _measured(point_id: str, interval: LogInterval, detail: str) -> PointEvidence:
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
