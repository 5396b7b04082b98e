"""Which points a bisect measures at every commit: the fewest that show the fault.

Given `--points`, those. Otherwise, from a run that showed the fault (`--from-run`, or the
newest run of the spec): under `verdict` its violating points and the prompts they failed on
(at most `MAX_PROMPTS`, as `diagnose`'s follow-up picks them: the fewest requests that
reproduce); with no such run, or under `output_tok_s`, every speculative point of the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweeper.bisect.judge import base_id
from sweeper.diagnosis.followup import MAX_PROMPTS
from sweeper.plan import Plan
from sweeper.plan.only import base_point_id
from sweeper.proof.verdicts import VIOLATIONS
from sweeper.results.reader import read_run


@dataclass(frozen=True)
class Reproducer:
    points: list[str]
    prompts: list[str]
    #: Where they came from, in words (printed before the bisect starts).
    origin: str


def from_run(run_dir: Path) -> Reproducer | None:
    """The violating points of a run and the prompts they failed on; None without violations."""
    run = read_run(run_dir)
    try:
        frame = run.points
        rows = [] if frame is None else frame.to_dict("records")
        broken = [r for r in rows if r.get("determinism") in VIOLATIONS]
        if not broken:
            return None
        ids = {str(r["point_id"]) for r in broken}
        table = run.requests(["point_id", "prompt_id", "verdict"], categorical=False)
        failing = [
            str(r["prompt_id"])
            for r in table.to_dict("records")
            if str(r["point_id"]) in ids and r.get("verdict") in VIOLATIONS
        ]
    finally:
        run.close()
    points = list(dict.fromkeys(base_id(r) for r in broken))
    prompts = list(dict.fromkeys(failing))[:MAX_PROMPTS]
    return Reproducer(points, prompts, f"the violations of {run_dir}")


def every_speculative(plan: Plan) -> Reproducer:
    points = [base_point_id(p) for p in plan.points() if p.server_config.mode != "ar"]
    return Reproducer(list(dict.fromkeys(points)), [], "every speculative point of the spec")
