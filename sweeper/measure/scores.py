"""Scoring sampled outputs on a proven server (`determinism.sampled: scored`, and beside
coupling): which outputs a point has, each with the request that drew it, and their scores from
one prefill each (`Engine.score`), `sample_concurrency` in flight.

An output is a seeded sample (`samples.jsonl`, its request rebuilt exactly as it was drawn:
`sample_specs`) or a sampled measured request (its prompt and the point's sampling
parameters). A failed scoring request is a `ScoreRecord` with its error, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from sweeper.engines.base import Engine, EngineError, RequestSpec
from sweeper.engines.capabilities import near_tie_margin, scored_under
from sweeper.measure.drive import point_prompts
from sweeper.measure.samples import choices_per_sample, sample_specs
from sweeper.plan import Point
from sweeper.results.rows import choice_of, is_missing
from sweeper.results.scores import ScoreRecord, score_key
from sweeper.spec import DeterminismSpec, WorkloadSpec

#: Seconds one scoring request may take (a cold server's first prefill compiles kernels).
SCORE_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Output:
    """One sampled output to score: the record it belongs to, how it was asked, its ids."""

    run_id: str
    host: str
    point_id: str
    attempt: str
    source: str
    role: str
    prompt_id: str
    index: int
    spec: RequestSpec
    token_ids: tuple[int, ...]

    def key(self, scorer: str) -> tuple[Any, ...]:
        """Its score's key (`sweeper.results.scores.score_key`) for `scorer`."""
        fields = ("point_id", "attempt", "source", "role", "prompt_id", "index")
        return score_key({**{f: getattr(self, f) for f in fields}, "scorer": scorer})


def sample_outputs(
    point: Point,
    rows: Iterable[Mapping[str, Any]],
    workload: WorkloadSpec,
    policy: DeterminismSpec,
    *,
    length_control: Sequence[str] = (),
    inputs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Output]:
    """The point's drawn samples (not failed, not empty), each with its request as drawn."""
    rows = [r for r in rows if not r.get("error") and r.get("token_ids")]
    roles = sorted({str(r["role"]) for r in rows})
    specs = {
        (role, spec.prompt_id, index): spec
        for role, index, spec in sample_specs(
            point, workload, policy, roles, length_control=length_control, inputs=inputs
        )
    }
    per = choices_per_sample(point)
    out = []
    for row in rows:
        # A sample row of choice c of sample request k has index k x n + c (`draw_samples`).
        spec = specs.get((str(row["role"]), str(row["prompt_id"]), int(row["index"]) // per))
        if spec is not None:
            out.append(_output(row, "sample", str(row["role"]), int(row["index"]), spec))
    return out


def request_outputs(
    point: Point,
    rows: Iterable[Mapping[str, Any]],
    workload: WorkloadSpec,
    *,
    inputs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Output]:
    """A sampled point's measured requests (not failed, not empty, not of a held prompt: where
    the engine takes `min_tokens` it masks EOS, so a held output does not sample the target's
    distribution), each with its prompt and the point's sampling parameters: role `control` on
    an AR point, `test` otherwise. Each draws its own seed (`sweeper.measure.drive`); where two
    share one (an older run's, all at the workload's seed) one is kept: a coupled sampler's
    uniform is a function of seed and position, so requests at one seed draw with the same
    uniforms, and their scores are one draw, not many (the scored test assumes independent
    tokens). The choices of one request (`n` > 1) draw at seeds derived from its seed and their
    index: each is a draw of its own, indexed request index x n + choice."""
    asked = point_prompts(point.request_config, workload, inputs=inputs)
    prompts = {p.prompt_id: p for p in asked if p.hold_tokens is None}
    role = "control" if point.server_config.mode == "ar" else "test"
    out = []
    seeds: set[Any] = set()
    for row in rows:
        spec = prompts.get(str(row.get("prompt_id")))
        if spec is None or row.get("error") or not row.get("token_ids"):
            continue
        choice = choice_of(row)
        seed = row.get("seed")
        if seed is not None and (seed, choice) in seeds:
            continue
        seeds.add((seed, choice))
        index = int(row["index"] if row.get("index") is not None else row.get("repeat") or 0)
        n = row.get("n")
        index = index * (1 if n is None or is_missing(n) else int(n)) + choice
        out.append(_output(row, "request", role, index, spec))
    return out


def _output(
    row: Mapping[str, Any], source: str, role: str, index: int, spec: RequestSpec
) -> Output:
    return Output(
        run_id=str(row["run_id"]),
        host=str(row["host"]),
        point_id=str(row["point_id"]),
        attempt=str(row["attempt"]),
        source=source,
        role=role,
        prompt_id=str(row["prompt_id"]),
        index=index,
        spec=spec,
        token_ids=tuple(int(t) for t in row["token_ids"]),
    )


def score_header(output: Output, scorer: str, engine: str) -> dict[str, Any]:
    """A score record's fields before the scores: which output, who scored it, and the
    distribution it is scored against (its sampling and the engine's processors)."""
    spec = output.spec
    which = ("run_id", "host", "point_id", "attempt", "source", "role", "prompt_id", "index")
    return {
        **{name: getattr(output, name) for name in which},
        "scorer": scorer,
        "temperature": spec.temperature,
        "top_p": spec.top_p,
        "top_k": spec.top_k,
        **scored_under(engine, spec),
        "near_tie_margin": near_tie_margin(engine),
    }


def score_outputs(
    base_url: str,
    engine: Engine,
    model: str | None,
    outputs: Sequence[Output],
    scorer: str,
    concurrency: int,
) -> list[ScoreRecord]:
    """Every output scored by the server at `base_url` (as `scorer`: `self` or its config
    id), in order; a failed one recorded with its error."""
    caps = engine.capabilities
    basis: Literal["exact", "topk"] = "exact" if caps and caps.scoring == "exact" else "topk"

    def one(client: httpx.Client, output: Output) -> ScoreRecord:
        fields = score_header(output, scorer, engine.name)
        try:
            scored = engine.score(client, base_url, output.spec, list(output.token_ids), model)
        except EngineError as exc:
            order = list(caps.scoring_order) if caps is not None else []
            return ScoreRecord(**fields, basis=basis, order=order, error=str(exc))
        return ScoreRecord(
            **fields,
            basis=scored.basis,  # type: ignore[arg-type]
            order=list(scored.order),
            k=scored.k,
            positions=scored.positions,  # type: ignore[arg-type]
            prompt_token_ids=list(scored.prompt_ids) if scored.prompt_ids is not None else None,
        )

    if not outputs:
        return []
    timeout = httpx.Timeout(SCORE_TIMEOUT_S, connect=10.0)
    limits = httpx.Limits(max_connections=concurrency)
    with (
        httpx.Client(timeout=timeout, limits=limits) as client,
        ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="score") as pool,
    ):
        return list(pool.map(lambda output: one(client, output), outputs))
