"""How the runner proves a point's sampled outputs (temperature > 0), and what a host thread
knows of its recorded points (`Known`).

The plan resolved the check and the point carries it (`Point.sampled_check`); here it meets the
server: a `coupled` check needs the server to advertise coupled sampling (else the point is
`unproven`, with what to set), and its AR baseline is asked for sample margins; a
`distribution` check draws the point's seeded samples after its measured requests
(`sweeper.measure.samples`) and has them judged (`sweeper.proof.sampled`): a speculative
point's test against its baseline's samples, an AR point's AR-vs-AR control and power.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sweeper.engines.base import Engine
from sweeper.measure.inputs import Inputs, InputsError
from sweeper.measure.samples import draw_samples
from sweeper.plan import Point
from sweeper.progress import SweepProgress
from sweeper.proof import sampled as sampled_analysis
from sweeper.proof.determinism import SampledVerdict
from sweeper.results.baseline import EarlierBaseline
from sweeper.results.scores import SELF, score_key
from sweeper.spec import Spec


@dataclass
class Known:
    """What one host thread knows of its recorded points: their rows, the request rows of the
    AR points and of the points whose sampled outputs are scored (`baseline_rows`), every
    point's samples and scores, the plan's points by id, and the label of the server that
    scores its speculative points' samples after them (None: none does)."""

    done: dict[str, dict[str, Any]]
    baseline_rows: dict[str, list[dict[str, Any]]]
    points: dict[str, Point]
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    scores: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    scorer_label: str | None = None
    #: Samples kept on disk by an attempt at an unrecorded point that was stopped mid-way
    #: (`RunStore.interrupted_samples`): the next attempt takes its id and draws the rest.
    interrupted: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def samples_of(self, point_id: str | None) -> list[dict[str, Any]]:
        return list(self.samples.get(point_id or "", []))

    def scores_of(self, point_id: str | None) -> list[dict[str, Any]]:
        return list(self.scores.get(point_id or "", []))

    def proof_scores(self, point: Point) -> list[dict[str, Any]]:
        """The scores a point's sampled proof judges: its own outputs' (its measured requests,
        its samples where it drew them) and those of the samples it shares (`samples_from`:
        never that point's measured requests, another load's)."""
        shared = self.scores_of(point.samples_from) if point.samples_from else []
        return [*self.scores_of(point.point_id), *(r for r in shared if r["source"] == "sample")]

    def add_score(self, row: dict[str, Any]) -> None:
        """A score of one output by one scorer, as the store reads them back: the first that
        scored it stands, a failed one gives way to a success (`current_scores`)."""
        rows = self.scores.setdefault(str(row["point_id"]), [])
        key = score_key(row)
        for n, old in enumerate(rows):
            if score_key(old) == key:
                if old.get("error") and not row.get("error"):
                    rows[n] = row
                return
        rows.append(row)

    def ar_points(self, point: Point | None) -> list[Point]:
        """The AR points whose outputs a scorer rescores to prove it agrees with the AR's own
        scores: a speculative point's baseline (where it drew them), else every AR
        point of the host whose outputs it scored itself."""
        if point is not None:
            source = self.points.get(self.sample_source(point.baseline_point_id) or "")
            return [source] if source is not None else []
        return [
            p
            for p in self.points.values()
            if p.server_config.mode == "ar"
            and any(r.get("scorer") == SELF for r in self.scores_of(p.point_id))
        ]

    def sample_source(self, point_id: str | None) -> str | None:
        """The point whose samples `point_id` uses (itself, or the sibling that drew them)."""
        point = self.points.get(point_id or "")
        return point.samples_from or point.point_id if point is not None else point_id


@dataclass
class SampledProof:
    """The runner's side of proving sampled points (see the module docstring)."""

    spec: Spec
    progress: SweepProgress
    inputs: Inputs | None = None
    earlier: EarlierBaseline | None = None

    def unavailable(self, point: Point, engine: Engine) -> SampledVerdict | None:
        """The `unproven` verdict a point's sampled requests carry where the plan expected
        coupling this server does not advertise (None otherwise)."""
        caps = engine.capabilities
        if point.sampled_check != "coupled" or caps is None:
            return None
        if point.server_config.mode == "ar":
            return None  # the reference: nothing of it is compared
        if caps.sampling == "coupled":
            return None
        why = (
            "the plan expected coupled sampling, but this server does not advertise it "
            "(/server_info sampling.coupled): nothing to compare token for token; set "
            "determinism.sampled: distribution"
        )
        return SampledVerdict("unproven", why)

    def draw(
        self,
        point: Point,
        base_url: str,
        model: str | None,
        engine: Engine,
        key: dict[str, Any],
        have: list[dict[str, Any]],
        on_drawn: Callable[[dict[str, Any]], None],
    ) -> list[dict[str, Any]]:
        """The point's seeded samples for its distribution test (none unless it draws them):
        those of `have` (kept by this attempt before it was stopped) and the rest, drawn now,
        each handed to `on_drawn` as it arrives."""
        if not point.samples:
            return []
        self.progress.status(point.host, f"{point.server_config.label} samples")
        ar = point.server_config.mode == "ar"
        try:
            inputs = (
                self.inputs.resolve(base_url, model, engine=engine, ar=ar) if self.inputs else None
            )
        except InputsError:
            inputs = None  # the measured requests failed with the reason already
        return draw_samples(
            base_url,
            point,
            self.spec.workload,
            self.spec.determinism,
            point.samples,
            engine,
            key,
            model=model,
            inputs=inputs,
            have=have,
            on_drawn=on_drawn,
        )

    def judge(
        self, point: Point, baseline_point: dict[str, Any] | None, known: Known
    ) -> tuple[SampledVerdict | None, dict[str, Any]]:
        """A distribution-tested point's verdict and columns: a speculative point's test
        against its baseline's samples; an AR point's control and power."""
        if point.sampled_check != "distribution":
            return None, {}
        policy = self.spec.determinism
        own = known.samples_of(point.samples_from or point.point_id)
        columns: dict[str, Any] = {}
        if point.samples_from:
            columns["samples_point_id"] = point.samples_from
        if point.server_config.mode == "ar":
            sibling = known.done.get(point.samples_from or "")
            if sibling is not None:
                return None, {**columns, **{c: sibling.get(c) for c in sampled_analysis.COLUMNS}}
            return None, sampled_analysis.control_columns(own, policy) if own else columns
        if self.earlier is not None:
            theirs = self.earlier.samples_for(point)
        else:
            theirs = known.samples_of(known.sample_source(point.baseline_point_id))
        verdict, judged = sampled_analysis.judge(own, theirs, baseline_point, policy)
        return verdict, {**columns, **judged}
