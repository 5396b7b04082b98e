"""How the runner scores sampled outputs (`determinism.sampled: scored`, and beside coupling)
and has them judged (`sweeper.proof.scored.verdict`): who scores (as the plan decided for each
point: `Point.scored_by`), when, and what the point records.

- A point whose server scores its own outputs (every AR server that accepts logprob requests; a
  speculative one where its engine's prefill never runs the speculative path) scores them after
  drawing them, before its point line: its sampled measured requests and the samples drawn
  beside them (`sweeper.plan.sampling`; coupled: none) scored by `self`. An AR point's scores
  are the run's false-alarm control (`control`); a speculative point's are judged
  (`at_measurement`). A speculative scorer also rescores one AR
  output per prompt, so two servers scored the same tokens: their raw probabilities must agree
  within `determinism.score_agreement` over enough tokens (`sweeper.proof.scored.agreement`), else
  its verdict is `unproven` (the scoring path is not the AR's, or not shown to be).
  A speculative point whose samples its server could not all score (it died after drawing them)
  is recorded `scored_pending` (a run that ends with one exits 3), and a resumed run starts its
  config again to score what has no score yet, as `self`, then settles it (`settle(own=True)`).
- Otherwise (SGLang) the point is recorded `unproven` for now, `scored_pending`, and the AR
  server, started once more after the host's speculative configs (a scoring step of the plan),
  scores its samples and every AR point's first output per prompt (the agreement), then appends
  the verdict as a settled line (`sweeper.results.scores`): records stay append-only, and a run
  killed mid-way scores, on resume, only what has no score yet, then settles. A point whose
  samples could not all be scored (a scorer that failed to start, a request that failed) stays
  pending, its settled line saying why, and a resumed run scores what is missing.
- Coupled points keep their token-for-token verdict; the scored one is a second proof beside it
  (`scored_verdict`), and a violation there makes the point's verdict that violation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sweeper.engines.base import Engine
from sweeper.measure.inputs import Inputs, InputsError
from sweeper.measure.scores import (
    Output,
    request_outputs,
    sample_outputs,
    score_header,
    score_outputs,
)
from sweeper.plan import Point
from sweeper.proof.determinism import SampledVerdict
from sweeper.proof.scored import judge as scored_proof
from sweeper.proof.scored import verdict as judging
from sweeper.proof.scored.agreement import output_key
from sweeper.results.scores import SELF, ScoreRecord, SettledRecord, score_key
from sweeper.results.store import utc_now
from sweeper.spec import Spec

if TYPE_CHECKING:
    from sweeper.runner.sampled import Known


@dataclass
class PointScores:
    """What scoring gave a point at its measurement: its score records (appended before its
    point line), its sampled verdict (None: keep the check's own) and its columns."""

    records: list[ScoreRecord] = field(default_factory=list)
    verdict: SampledVerdict | None = None
    columns: dict[str, Any] = field(default_factory=dict)


@dataclass
class Serving:
    """The server that scores: its URL, served model name, bound engine and config."""

    base_url: str
    model: str | None
    engine: Engine
    #: `self`, or the scoring config's id (records) and label (columns).
    scorer: str
    label: str


@dataclass
class ScoredProof:
    """The runner's side of scored proofs (see the module docstring)."""

    spec: Spec
    inputs: Inputs | None = None

    def applies(self, point: Point) -> bool:
        """Whether the point's sampled outputs are scored (the plan says who scores them)."""
        return point.scored_by is not None

    # -- at a point's measurement -------------------------------------------------------------

    def at_point(
        self,
        point: Point,
        serving: Serving,
        drawn: Sequence[Mapping[str, Any]],
        requests: Sequence[Mapping[str, Any]],
        known: Known,
    ) -> PointScores:
        """Score the point's outputs on its own server where it scores them (module docstring)
        and judge them; else the provisional columns of a point the AR server scores later."""
        if not self.applies(point):
            return PointScores()
        ar = point.server_config.mode == "ar"
        caps = serving.engine.capabilities
        if point.scored_by == "ar":
            if known.scorer_label is None:
                why = (
                    "its samples need the AR server to score them, and this plan starts none "
                    "after the speculative configs (a search, or no AR baseline)"
                )
                return PointScores([], SampledVerdict("unproven", why), {"scored_detail": why})
            why = (
                "its samples are scored by the AR server, started once more after the "
                "speculative configs; the verdict is settled then"
            )
            columns = {"scored_pending": True, "scored_by": known.scorer_label}
            return PointScores(
                [], SampledVerdict("unproven", why), {**columns, "scored_detail": why}
            )
        if caps is None or caps.scoring == "none":
            verdict, columns = judging.unscorable(point.sampled_check, _evidence(caps), ar=ar)
            return PointScores([], verdict, columns)
        outputs = self._outputs(point, serving, drawn, requests)
        twins, outputs = self._twins(point, outputs, serving.engine.name, known)
        records = [*twins, *self._score(serving, outputs, SELF, known)]
        rows = [r for r in known.proof_scores(point) if _judged_as(r, SELF)]
        if ar:
            control = scored_proof.control(rows, self.spec.determinism)
            return PointScores(records, None, {**control, "scored_by": SELF})
        ar_points = known.ar_points(point)
        # The agreement shows this server scores as the AR's does; with every output its AR
        # twin's, this server scored nothing, and nothing it scored needs showing.
        checks = self._agreement(ar_points, known, serving) if outputs else []
        agreeing = self._score(serving, checks, None, known)
        verdict, columns = judging.at_measurement(
            point.sampled_check,
            rows,
            _scores_of(ar_points, known),
            scorer=serving.scorer,
            control_point=known.done.get(point.baseline_point_id or ""),
            policy=self.spec.determinism,
        )
        return PointScores([*records, *agreeing], verdict, columns)

    def _score(
        self, serving: Serving, outputs: Sequence[Output], scorer: str | None, known: Known
    ) -> list[ScoreRecord]:
        """The outputs scored as `scorer` (None: as the serving config), known to the host."""
        records = score_outputs(
            serving.base_url,
            serving.engine,
            serving.model,
            outputs,
            scorer or serving.scorer,
            self.spec.determinism.sample_concurrency,
        )
        for record in records:
            known.add_score(record.model_dump())
        return records

    def _twins(
        self, point: Point, outputs: Sequence[Output], engine: str, known: Known
    ) -> tuple[list[ScoreRecord], list[Output]]:
        """A coupled point's outputs that are token-identical to their AR twin's (the same
        prompt, request index and sampling: the same draw), each with the score the twin's own
        server gave those tokens (the score is a function of prompt, tokens and sampling, so
        scoring them again only repeats it), and the outputs left to score."""
        twin = known.points.get(point.baseline_point_id or "")
        if point.sampled_check != "coupled" or twin is None or twin.server_config.mode != "ar":
            return [], list(outputs)
        twin_rows = {
            (r["source"], r["prompt_id"], r["index"]): r
            for r in known.scores_of(twin.point_id)
            if r.get("scorer") == SELF and not r.get("error")
        }
        taken, rest = [], []
        for output in outputs:
            row = twin_rows.get((output.source, output.prompt_id, output.index))
            header = score_header(output, twin.server_config.id, engine)
            same = row is not None and all(
                row.get(k) == v for k, v in header.items() if k not in _WHOSE
            )
            tokens = [p["token"] for p in row["positions"]] if row is not None else None
            if same and row is not None and tokens == list(output.token_ids):
                scores = {k: row[k] for k in _SCORES if k in row}
                taken.append(ScoreRecord(**header, **scores, twin_of=twin.point_id))
            else:
                rest.append(output)
        for record in taken:
            known.add_score(record.model_dump())
        return taken, rest

    def _outputs(
        self,
        point: Point,
        serving: Serving,
        drawn: Sequence[Mapping[str, Any]],
        requests: Sequence[Mapping[str, Any]],
    ) -> list[Output]:
        """The point's sampled outputs: the samples it drew (`drawn`; none where it shares
        another load's or its measured requests gave enough) and its measured requests."""
        inputs = self._inputs(serving, point)
        length_control = getattr(serving.engine, "length_control", ())
        workload, policy = self.spec.workload, self.spec.determinism
        return [
            *sample_outputs(
                point, drawn, workload, policy, length_control=length_control, inputs=inputs
            ),
            *request_outputs(point, requests, workload, inputs=inputs),
        ]

    def _recorded(self, point: Point, serving: Serving, known: Known) -> list[Output]:
        """A recorded point's sampled outputs: its measured requests, and the samples it drew or
        shares (those of the point that drew them)."""
        source = known.points.get(point.samples_from or point.point_id, point)
        drawn = known.samples_of(source.point_id)
        requests = known.baseline_rows.get(point.point_id, [])
        return [
            *self._outputs(source, serving, drawn, []),
            *self._outputs(point, serving, [], requests),
        ]

    def _inputs(self, serving: Serving, point: Point) -> Any:
        if self.inputs is None:
            return None
        try:
            ar = point.server_config.mode == "ar"
            return self.inputs.resolve(
                serving.base_url, serving.model, engine=serving.engine, ar=ar
            )
        except InputsError:
            return None

    def _agreement(
        self, ar_points: Sequence[Point], known: Known, serving: Serving
    ) -> list[Output]:
        """Each AR point's first self-scored output per prompt that this scorer has not scored."""
        out: list[Output] = []
        for ar_point in ar_points:
            rows = known.scores_of(ar_point.point_id)
            first: dict[str, Mapping[str, Any]] = {}
            for row in rows:
                if row.get("scorer") == SELF and not row.get("error"):
                    first.setdefault(str(row["prompt_id"]), row)
            done = {score_key(r) for r in rows if not r.get("error")}
            wanted = {output_key(r) for r in first.values()}
            for output in self._recorded(ar_point, serving, known):
                key = output.key(serving.scorer)
                if key[:-1] in wanted and key not in done:
                    out.append(output)
        return out

    # -- a scoring restart ---------------------------------------------------------------------

    def settle(
        self, points: Sequence[Point], serving: Serving, known: Known, *, own: bool = False
    ) -> tuple[list[ScoreRecord], list[SettledRecord]]:
        """Score what the recorded points awaiting this server have not had scored, and the
        outputs of the AR points they are judged beside that it has not scored (the
        agreement), then their settled verdicts. The points await the AR scoring restart, or
        (`own`) a fresh server of their own config, their own having died before it scored its
        samples: that config scores them as `self`."""
        scorer, label = (SELF, SELF) if own else (serving.scorer, serving.label)
        pending = [p for p in points if (known.done.get(p.point_id) or {}).get("scored_pending")]
        outputs: list[Output] = []
        seen: set[tuple[Any, ...]] = set()
        for point in pending:
            done = {score_key(r) for r in known.proof_scores(point) if not r.get("error")}
            for output in self._recorded(point, serving, known):
                key = output.key(scorer)
                if key not in done and key not in seen:
                    seen.add(key)
                    outputs.append(output)
        ar_of = {p.point_id: known.ar_points(p if own else None) for p in pending}
        ar_points = list({a.point_id: a for ars in ar_of.values() for a in ars}.values())
        checks = self._agreement(ar_points, known, serving)
        records = [
            *self._score(serving, outputs, scorer, known),
            *self._score(serving, checks, None, known),
        ]
        settled = []
        for point in pending:
            columns = judging.settled(
                [r for r in known.proof_scores(point) if r.get("scorer") == scorer],
                _scores_of(ar_of[point.point_id], known),
                scorer=serving.scorer,
                label=label,
                control_point=known.done.get(point.baseline_point_id or ""),
                policy=self.spec.determinism,
            )
            settled.append(self._settled(known.done[point.point_id], columns))
        return records, settled

    def unscored(self, points: Sequence[Point], known: Known, reason: str) -> list[SettledRecord]:
        """Settled lines for recorded points whose scorer could not score them (yet): still
        pending, with why, so a resumed run scores them."""
        out = []
        for point in points:
            row = known.done.get(point.point_id) or {}
            if row.get("scored_pending"):
                out.append(self._settled(row, judging.pending(reason)))
        return out

    def _settled(self, row: Mapping[str, Any], columns: Mapping[str, Any]) -> SettledRecord:
        """The settled line of a recorded point (`row`), with its verdict's columns."""
        return SettledRecord(
            point_id=str(row["point_id"]),
            attempt=str(row["attempt"]),
            settled_at=utc_now(),
            **columns,
        )


#: A score record's fields that say whose output it is and who scored it, not what was scored.
_WHOSE = ("run_id", "host", "point_id", "attempt", "role", "scorer")
#: A score record's fields that are the scorer's answer: what a twin's score lends.
_SCORES = ("basis", "order", "k", "positions", "prompt_token_ids")


def _judged_as(row: Mapping[str, Any], scorer: str) -> bool:
    """Whether a point's score row is one its verdict judges when `scorer` scored its outputs:
    that scorer's, or its AR twin's score of the same tokens."""
    return row.get("scorer") == scorer or bool(row.get("twin_of"))


def _scores_of(points: Sequence[Point], known: Known) -> list[dict[str, Any]]:
    """Every score of the points' outputs, whoever scored them."""
    return [r for p in points for r in known.scores_of(p.point_id)]


def own_scorer(row: Mapping[str, Any]) -> bool:
    """Whether a recorded point's samples are scored by its own config (a pending one then
    awaits a restart of that config, not the AR scoring restart)."""
    return row.get("scored_by") == SELF


def _evidence(caps: Any) -> str:
    said = [e for e in (caps.evidence if caps is not None else ()) if e.startswith("scoring")]
    return said[-1] if said else "not negotiated"
