"""One point's load as the runner sends it: warm-up, then the point's requests through the
multi-process client (`sweeper.measure.pool`), closed loop or open loop.

- Warm-up: `warmup` requests sent one after another from this process and discarded (a fresh
  server's first requests pay for lazy initialisation); then `after_warmup` runs, with nothing
  in flight (the runner reads per-server acceptance counters there).
- The requests: request i of the point carries prompt i mod P (P prompts) as repeat i div P,
  so the prompts take turns and every (prompt, repeat) is unique; at temperature > 0 with a
  workload seed, its own seed too (`measured_requests`), so each output is an independent
  draw the sampled proof scores (`sweeper.plan.sampling`). A closed loop sends each
  prompt `repeats` times at its concurrency; an open loop sends its schedule (`load.requests`
  arrivals, the arrivals inside `load.duration_s`, or prompts x repeats), drawn once from the
  workload's seed (0 when unset) and so the same for every server config at that rate.
- The requests are written here, by the runner's engine (which has proven the server), and
  sent and read by `workload.client_processes` worker processes.

A client that fails (a worker crashed, or could not start) does not stop the sweep: every
request of the point is recorded with the reason, so the point fails with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sweeper.config import RequestConfig
from sweeper.engines.base import Engine, RequestSpec
from sweeper.measure.arrivals import ArrivalProfile, schedule
from sweeper.measure.client import stream_request
from sweeper.measure.inputs import Inputs, InputsError
from sweeper.measure.pool import ClosedLoop, Load, OpenLoop, run_load
from sweeper.measure.senders import spec_payload
from sweeper.measure.sse_http import StreamClient
from sweeper.measure.workload import WorkloadResult, expand_requests
from sweeper.plan import Point
from sweeper.plan.sampling import measured_seeds
from sweeper.spec import RuntimeSpec, WorkloadSpec

#: The seed of every open-loop schedule when the workload sets none.
DEFAULT_SCHEDULE_SEED = 0


def point_prompts(
    rc: RequestConfig,
    workload: WorkloadSpec,
    *,
    length_control: Sequence[str] = (),
    inputs: Mapping[str, Mapping[str, Any]] | None = None,
    sample_margins: bool = False,
) -> list[RequestSpec]:
    """One request per prompt (repeat 0) with the point's request config, the run's resolved
    inputs and the length fields the engine takes (`sample_margins`: see `expand_requests`)."""
    return expand_requests(
        workload.prompts,
        rc,
        repeats=1,
        chat=workload.api == "chat",
        length_control=length_control,
        inputs=inputs,
        sample_margins=sample_margins,
    )


def probe_spec(workload: WorkloadSpec) -> RequestSpec:
    """The workload's first prompt with text, greedy: the shape of a server's negotiation probe
    (a fixed short text where every prompt is synthetic: its ids are resolved later)."""
    written = [p for p in workload.prompts if p.text or p.messages][:1]
    if not written:
        return RequestSpec("probe", "Hello.", workload.max_tokens, 0.0, chat=workload.api == "chat")
    greedy = RequestConfig.make(0.0, workload.max_tokens, 1)
    return expand_requests(written, greedy, repeats=1, chat=workload.api == "chat")[0]


def point_load(rc: RequestConfig, workload: WorkloadSpec, length: int = 1) -> Load:
    """How the point's requests are sent: its closed loop, or its open loop's schedule; `length`
    times the workload's requests (or duration: a halving rung measures longer)."""
    offered = len(workload.prompts) * workload.repeats * length
    if rc.rate is None:
        assert rc.concurrency is not None  # a request config has one or the other
        return ClosedLoop(rc.concurrency, requests=offered)
    load = workload.load
    assert load is not None  # the plan makes open-loop points only from workload.load
    duration = None if load.duration_s is None else load.duration_s * length
    requests = load.requests * length if load.requests else offered
    profile = ArrivalProfile(
        rate=rc.rate,
        arrival=load.arrival,
        burstiness=rc.burstiness or 1.0,
        duration_s=duration,
        requests=None if duration is not None else requests,
    )
    seed = rc.seed if rc.seed is not None else DEFAULT_SCHEDULE_SEED
    return OpenLoop(profile, seed=seed, max_concurrency=rc.max_concurrency)


def measured_requests(point: Point, prompts: list[RequestSpec], load: Load) -> list[RequestSpec]:
    """Every request the point's load sends, in order: request i carries prompt i mod P as
    repeat i div P; at temperature > 0 with a seed, its own seed (`measured_seeds`: the same on
    a resumed run and on the AR twin), which its record keeps. Greedy requests, sampled ones
    without a workload seed (each then an unseeded, independent draw) and those of the
    `repeats` check (its repeats must share the seed to be compared) are sent as asked."""
    if isinstance(load, ClosedLoop):
        n = load.requests or len(prompts)
    else:
        n = load.profile.requests or len(schedule(load.profile, load.seed))
    rc = point.request_config
    seeded = rc.temperature > 0 and rc.seed is not None and point.sampled_check != "repeats"
    seeds = measured_seeds(rc.seed or 0, rc, n) if seeded else [rc.seed] * n
    return [
        replace(prompts[i % len(prompts)], repeat=i // len(prompts), seed=seeds[i])
        for i in range(n)
    ]


def drive_point(
    base_url: str,
    point: Point,
    workload: WorkloadSpec,
    runtime: RuntimeSpec,
    engine: Engine,
    *,
    warmup: int,
    model: str | None = None,
    after_warmup: Callable[[], object] | None = None,
    inputs: Inputs | None = None,
    sample_margins: bool = False,
) -> WorkloadResult:
    """Warm up, then run the point's load (see the module doc); one record per offered request,
    in schedule order. `inputs` resolves what the prompts need from the server first (synthetic
    token ids, later turns' histories); when it cannot, every request fails with the reason."""
    rc = point.request_config
    length_control = getattr(engine, "length_control", ())
    load = point_load(rc, workload, point.length)
    try:
        ar = point.server_config.mode == "ar"
        resolved = (
            inputs.resolve(base_url, model, engine=engine, ar=ar) if inputs is not None else None
        )
    except InputsError as exc:
        return _client_failed(measured_requests(point, point_prompts(rc, workload), load), str(exc))
    prompts = point_prompts(
        rc, workload, length_control=length_control, inputs=resolved, sample_margins=sample_margins
    )
    asyncio.run(_warm_up(base_url, prompts[:warmup], engine, model))
    if after_warmup is not None:
        after_warmup()
    requests = measured_requests(point, prompts, load)
    payloads = [spec_payload(spec, model, runtime, engine) for spec in requests]
    grace = workload.load.grace_s if workload.load is not None else 0.0
    try:
        result = run_load(
            base_url, payloads, load, processes=workload.client_processes, grace_s=grace
        )
    except (RuntimeError, ValueError, OSError) as exc:
        return _client_failed(requests, f"load client failed: {exc}")
    records = []
    for rec in result.records:
        fields = {k: v for k, v in rec.items() if k != "payload_index"}
        records.append((requests[int(rec["index"])], fields))
    return WorkloadResult(records, result.wall_s, result.check, result.processes)


async def _warm_up(
    base_url: str, prompts: list[RequestSpec], engine: Engine, model: str | None
) -> None:
    async with StreamClient() as client:
        for spec in prompts:
            await stream_request(client, base_url, replace(spec, repeat=-1), engine, model=model)


def _client_failed(requests: list[RequestSpec], reason: str) -> WorkloadResult:
    """Every request the point would have sent, each recorded with the client's failure."""
    records = [(spec, {"error": reason, "index": i}) for i, spec in enumerate(requests)]
    return WorkloadResult(records, 0.0)


def records_tokens(result: WorkloadResult) -> int:
    """Output tokens of a point's records (for progress)."""
    return sum(int(rec.get("output_tokens") or 0) for _spec, rec in result.records)
