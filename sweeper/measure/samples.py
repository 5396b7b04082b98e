"""Drawing a point's seeded samples (`determinism.sampled: scored` or `distribution`), after
its measured requests, from the same server.

Per prompt, N samples per role (`Point.samples_per_prompt`: what its measured requests lack,
as the plan decided), each with its own seed, none shared between prompts
(`sampling.sample_seeds`: disjoint per role, so the speculative config's samples, the baseline's and
the baseline's control set share none), the point's temperature, top-p and top-k, and
`determinism.sample_length` output tokens, `determinism.sample_concurrency` in flight. A held output
length is held by `ignore_eos` alone: an engine's `min_tokens` masks EOS (vLLM's does), which would
move the distribution a scored sample is judged against. Samples are never timed: they are evidence
of the distribution a server samples from, recorded in `samples.jsonl`, not measured load: each
as it arrives, so a run stopped mid-drawing resumes drawing only those it lacks. A point asking
`n` > 1 choices draws each sample with them: every choice is a sample row of its own (index =
sample x n + choice, its request's seed), recorded and judged like any other."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sweeper.engines.base import Engine, RequestSpec
from sweeper.measure.client import choice_records
from sweeper.measure.drive import point_prompts
from sweeper.measure.workload import run_requests_sync
from sweeper.plan import Point
from sweeper.plan.sampling import sample_seeds
from sweeper.results.records import PointKey
from sweeper.spec import DeterminismSpec, WorkloadSpec


def sample_specs(
    point: Point,
    workload: WorkloadSpec,
    policy: DeterminismSpec,
    roles: Sequence[str],
    *,
    length_control: Sequence[str] = (),
    inputs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[tuple[str, int, RequestSpec]]:
    """(role, sample index, request) for every sample the point draws, prompt-major."""
    rc = point.request_config
    tokens = policy.sample_length(rc.max_tokens)
    prompts = point_prompts(rc, workload, length_control=length_control, inputs=inputs)
    per = choices_per_sample(point)
    out = []
    for role in roles:
        # One seed per (prompt, sample), none shared between prompts: a seeded sampler draws
        # the same noise at the same position for the same seed, so outputs of two prompts at
        # one seed are not independent draws (the scored test assumes they are).
        # A request for n > 1 choices draws choice i at a seed derived from its own (vLLM:
        # seed + i), so the samples' seeds are n apart: no choice draws at another's seed.
        n = point.samples_per_prompt
        seeds = sample_seeds(workload.seed, role, n * len(prompts) * per)[::per]
        for number, prompt in enumerate(prompts):
            own = seeds[number * n : (number + 1) * n]
            for index, seed in enumerate(own):
                held = prompt.hold_tokens is not None
                spec = replace(
                    prompt,
                    seed=seed,
                    max_tokens=tokens,
                    repeat=index,
                    min_tokens=None,
                    hold_tokens=tokens if held else None,
                    sample_margins=False,
                )
                out.append((role, index, spec))
    return out


def choices_per_sample(point: Point) -> int:
    """How many sample rows one sample request gives: one per choice (`n`, 1 when unset)."""
    return point.request_config.n or 1


def sample_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """Which sample a row is of its point: its role, prompt, index and seed."""
    return (str(row["role"]), str(row["prompt_id"]), int(row["index"]), int(row["seed"]))


def draw_samples(
    base_url: str,
    point: Point,
    workload: WorkloadSpec,
    policy: DeterminismSpec,
    roles: Sequence[str],
    engine: Engine,
    key: Mapping[str, Any],
    *,
    model: str | None = None,
    inputs: Mapping[str, Mapping[str, Any]] | None = None,
    have: Sequence[Mapping[str, Any]] = (),
    on_drawn: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """The sample rows (`SampleRecord` fields) of the point's `roles`, in `sample_specs` order;
    a failed sample is a row with its error (the test leaves it out). Samples in `have` (drawn
    earlier by this attempt, kept on disk) are not drawn again; each new one that did not fail
    goes to `on_drawn` as it arrives, so a run stopped mid-drawing keeps what it drew."""
    specs = sample_specs(
        point,
        workload,
        policy,
        roles,
        length_control=getattr(engine, "length_control", ()),
        inputs=inputs,
    )
    kept = {sample_key(row): dict(row) for row in have if not row.get("error")}
    rc = point.request_config
    per = choices_per_sample(point)

    def row_of(
        role: str, index: int, spec: RequestSpec, record: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {
            # What identifies the point (`PointKey`: its configs' ids and label among it).
            **{k: key[k] for k in PointKey.model_fields if k in key},
            "mode": key["mode"],
            "temperature": rc.temperature,
            "top_p": rc.top_p,
            "top_k": rc.top_k,
            "max_tokens": spec.max_tokens,
            "role": role,
            "prompt_id": spec.prompt_id,
            "index": index,
            "seed": spec.seed,
            "token_ids": list(record.get("token_ids") or []),
            "text": str(record.get("text") or ""),
            "finish_reason": record.get("finish_reason"),
            "error": record.get("error") or None,
        }

    def keys(role: str, index: int, spec: RequestSpec) -> list[tuple[Any, ...]]:
        """The sample keys of one sample request's rows: one per choice."""
        return [(role, spec.prompt_id, index * per + c, spec.seed) for c in range(per)]

    # Seeds are disjoint between roles and prompts: (prompt, seed) names one sample request.
    todo = {
        (spec.prompt_id, spec.seed): (role, index, spec)
        for role, index, spec in specs
        if not all(k in kept for k in keys(role, index, spec))
    }
    drawn: dict[tuple[Any, ...], dict[str, Any]] = {}

    def arrived(spec: RequestSpec, record: dict[str, Any]) -> None:
        role, index, asked = todo[(spec.prompt_id, spec.seed)]
        for choice in choice_records(record):
            row = row_of(role, index * per + choice["choice"], asked, choice)
            drawn[sample_key(row)] = row
            if on_drawn is not None and not row["error"]:
                on_drawn(row)

    if todo:
        run_requests_sync(
            base_url,
            [spec for _, _, spec in todo.values()],
            engine=engine,
            concurrency=policy.sample_concurrency,
            model=model,
            on_record=arrived,
        )
    out = []
    for role, index, spec in specs:
        for sample in keys(role, index, spec):
            row = kept.get(sample) or drawn.get(sample)
            if row is not None:
                out.append(row)
    return out
