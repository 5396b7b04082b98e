"""Measuring one point on a proven server: drive its load (`sweeper.measure.drive`), read the
acceptance counters, host load and service log, draw its samples and score them where this
server scores (`sweeper.runner.scoring`), have it judged (`sweeper.analysis.summary`, the
sampled proof) and commit its records.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from sweeper.analysis.summary import summarize
from sweeper.engines.base import Engine
from sweeper.engines.capabilities import near_tie_margin
from sweeper.measure.drive import drive_point, records_tokens
from sweeper.measure.hostload import HostProbe
from sweeper.measure.inputs import Inputs
from sweeper.measure.point import Counters, measured_point, request_rows
from sweeper.plan import Point
from sweeper.progress import SweepProgress
from sweeper.proof.scored.verdict import merge
from sweeper.results.baseline import EarlierBaseline
from sweeper.results.records import SampleRecord
from sweeper.results.store import utc_now
from sweeper.runner.recording import Recorder
from sweeper.runner.sampled import Known, SampledProof
from sweeper.runner.scoring import ScoredProof
from sweeper.runner.scoring import Serving as Scorer
from sweeper.runner.serving import Serving
from sweeper.spec import Spec
from sweeper.workers.backends import Backend


@dataclass
class PointMeasurer:
    """Measures, judges and records the points of the runner's host threads."""

    spec: Spec
    engine: Engine
    progress: SweepProgress
    recorder: Recorder
    stop_event: threading.Event
    sampled: SampledProof
    scoring: ScoredProof
    inputs: Inputs | None
    earlier: EarlierBaseline | None
    #: Seconds spent outside model load and measurement (the runner's, shared).
    overhead_s: list[float]

    def measure(
        self, backend: Backend, point: Point, state: Serving, known: Known
    ) -> dict[str, Any] | None:
        host, sc = point.host, point.server_config
        done = known.done
        t0 = time.monotonic()
        started_at = utc_now()
        self.progress.status(host, f"{sc.label} {point.request_config.id}")
        workload, engine = self.spec.workload, state.engine or self.engine
        unavailable = self.sampled.unavailable(point, engine)
        counters = Counters(engine, state.base_url)
        probe = HostProbe(backend.host, state.instance.pid if state.instance else None)
        result = drive_point(
            state.base_url,
            point,
            workload,
            self.spec.runtime,
            engine,
            warmup=0 if state.warm else workload.warmup,
            model=state.model,
            after_warmup=lambda: [f() for f in (counters.start, probe.start)],
            inputs=self.inputs,
            sample_margins=point.sampled_check == "coupled",
        )
        self.progress.tokens(host, records_tokens(result))
        state.warm = True
        if self.stop_event.is_set():
            return None
        acceptance = counters.delta()
        log_text, state.log_cursor = backend.service.logs(state.log_cursor)
        store = self.recorder.store
        log_path = store.write_log(point.point_id, log_text)
        # Read as the measurement ends: judging below would count as another process's load.
        finished_at, host_load = utc_now(), probe.columns()
        # Samples a stopped attempt kept: this attempt takes its id and draws the rest.
        have = known.interrupted.pop(point.point_id, [])
        key = self.recorder.key(point, str(have[0]["attempt"]) if have else None)
        rows = request_rows(result, key, near_tie_margin=near_tie_margin(engine.name))
        sample = self.recorder.sample
        drawn = self.sampled.draw(point, state.base_url, state.model, engine, key, have, sample)
        if self.stop_event.is_set():
            return None
        known.samples[point.point_id] = drawn
        scorer = Scorer(state.base_url, state.model, engine, sc.id, sc.label)
        scored = self.scoring.at_point(point, scorer, drawn, rows, known)
        if self.stop_event.is_set():
            return None
        earlier, base = self.earlier, point.baseline_point_id or ""
        baseline_point = done.get(base) if earlier is None else earlier.point_for(point)
        verdict, sampled_columns = self.sampled.judge(point, baseline_point, known)
        verdict = verdict or scored.verdict
        summary, verdicts = summarize(
            point.server_config,
            point.request_config,
            rows,
            result.wall_s,
            policy=self.spec.determinism,
            baseline_rows=(
                known.baseline_rows.get(base) if earlier is None else earlier.rows_for(point)
            ),
            baseline_point=baseline_point,
            slo=self.spec.slo,
            speed_baseline_point=done.get(point.speed_baseline_point_id or ""),
            sampled_check=point.sampled_check,
            sampled_verdict=unavailable or verdict,
        )
        summary = merge({**summary, **sampled_columns}, scored.columns)
        record, requests = measured_point(
            point,
            result,
            rows,
            summary=summary,
            verdicts=verdicts,
            key=key,
            baseline_point=baseline_point,
            fingerprint=state.identity.fingerprint if state.identity else None,
            started_at=started_at,
            finished_at=finished_at,
            log_path=str(log_path.relative_to(store.dir)),
            log_text=log_text,
            acceptance=acceptance,
            capabilities=engine.capabilities,
            host_load=host_load,
        )
        # The others are on disk already, written as they were drawn.
        samples = [SampleRecord(**row) for row in drawn if row.get("error")]
        self.recorder.commit(record, requests, samples, scored.records)
        if sc.mode == "ar" or point.scored_by:  # a baseline, or outputs scored later
            known.baseline_rows[point.point_id] = [r.model_dump() for r in requests]
        self.overhead_s.append(time.monotonic() - t0 - result.wall_s)
        detail = f"{record.output_tok_s or 0:.1f} tok/s  {record.determinism}"
        detail = detail if record.status == "ok" else record.reason
        self.progress.point_done(host, point.point_id, record.status, detail)
        return record.model_dump()
