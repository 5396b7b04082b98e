"""A point's requests and what measuring them gave (`WorkloadResult`), and the single-process
closed loop (`run_requests`) that the multi-process client (`sweeper.measure.drive`) replaced
in the runner; benches keep it as the reference the pool is compared with.

The concurrency level is an `asyncio.Semaphore`: at most that many requests are in flight, and a
new one starts as soon as one finishes. The wall time of the measured phase is returned so the
point's throughput is tokens over that span, not the sum of request latencies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sweeper.config import RequestConfig
from sweeper.engines.base import Engine, RequestSpec
from sweeper.measure.client import stream_request
from sweeper.measure.selfcheck import ClientCheck
from sweeper.measure.sse_http import StreamClient
from sweeper.spec import PromptSpec


@dataclass(frozen=True)
class WorkloadResult:
    """The measured records (in request order) and the wall time of the measured phase; from
    the load client, its self-check and how many processes it used."""

    records: list[tuple[RequestSpec, dict[str, Any]]]
    wall_s: float
    check: ClientCheck | None = None
    processes: int = 1


def expand_requests(
    prompts: Sequence[PromptSpec],
    rc: RequestConfig,
    *,
    repeats: int,
    chat: bool = False,
    length_control: Sequence[str] = (),
    inputs: Mapping[str, Mapping[str, Any]] | None = None,
    sample_margins: bool = False,
) -> list[RequestSpec]:
    """Every prompt x repeat as a RequestSpec asking what `rc` asks, prompt-major order (the
    order records keep).

    `inputs` holds what the run resolved for a prompt (`sweeper.measure.inputs`): the token ids
    of a synthetic prompt, the messages of a later turn with its history filled. A prompt's own
    `max_tokens` overrides the point's; a held one is sent with the `length_control` fields the
    engine takes. `sample_margins` asks a coupled server for its sample margins (AR's tell a
    sampled near tie; a speculative output's, whether its token was its own draw)."""
    return [
        _request(p, r, rc, chat, length_control, inputs or {}, sample_margins)
        for p in prompts
        for r in range(repeats)
    ]


def _request(
    prompt: PromptSpec,
    repeat: int,
    rc: RequestConfig,
    chat: bool,
    length_control: Sequence[str],
    inputs: Mapping[str, Mapping[str, Any]],
    sample_margins: bool,
) -> RequestSpec:
    resolved = inputs.get(prompt.id, {})
    ids = resolved.get("token_ids")
    messages = resolved.get("messages") or (
        [m.model_dump() for m in prompt.messages] if prompt.messages else None
    )
    n_out = prompt.max_tokens or rc.max_tokens
    hold = prompt.hold_output
    text = prompt.text
    if text is None:
        text = "\n".join(m["content"] for m in messages or []) or f"[{prompt.tokens} token ids]"
    return RequestSpec(
        prompt_id=prompt.id,
        prompt=text,
        messages=tuple(messages) if messages else None,
        prompt_token_ids=tuple(ids) if ids is not None else None,
        max_tokens=n_out,
        temperature=rc.temperature,
        seed=rc.seed,
        top_p=rc.top_p,
        top_k=rc.top_k,
        sample_margins=sample_margins and rc.temperature > 0,
        repeat=repeat,
        # Token ids go to the completions API: a chat template would add tokens.
        chat=chat and prompt.tokens is None,
        ignore_eos=hold and "ignore_eos" in length_control,
        min_tokens=n_out if hold and "min_tokens" in length_control else None,
        dataset=prompt.dataset,
        category=prompt.category,
        turn=prompt.turn,
        hold_tokens=n_out if hold else None,
        **rc.feature_values(),
    )


async def run_requests(
    base_url: str,
    requests: Sequence[RequestSpec],
    *,
    engine: Engine,
    concurrency: int,
    warmup: int = 0,
    timeout_s: float = 600.0,
    model: str | None = None,
    on_record: Callable[[RequestSpec, dict[str, Any]], None] | None = None,
    after_warmup: Callable[[], object] | None = None,
) -> WorkloadResult:
    """Send `warmup` discarded requests, then all `requests` with at most `concurrency` at once.

    `after_warmup` runs between the two (no request in flight): where per-server counters are
    read, so a point's acceptance counts its measured requests only.
    """
    async with StreamClient(timeout_s=timeout_s) as client:
        for i in range(min(warmup, len(requests)) if requests else 0):
            warm = replace(requests[i], repeat=-1)
            await stream_request(client, base_url, warm, engine, model=model)
        if after_warmup is not None:
            after_warmup()
        gate = asyncio.Semaphore(max(concurrency, 1))
        out: list[tuple[RequestSpec, dict[str, Any]] | None] = [None] * len(requests)

        async def one(i: int, spec: RequestSpec) -> None:
            async with gate:
                result = await stream_request(client, base_url, spec, engine, model=model)
            out[i] = (spec, result)
            if on_record is not None:
                on_record(spec, result)

        started = time.perf_counter()
        await asyncio.gather(*(one(i, s) for i, s in enumerate(requests)))
        wall = time.perf_counter() - started
    return WorkloadResult(records=[r for r in out if r is not None], wall_s=wall)


def run_requests_sync(base_url: str, requests: Sequence[RequestSpec], **kw: Any) -> WorkloadResult:
    """`run_requests` from synchronous code (the runner's per-host thread)."""
    return asyncio.run(run_requests(base_url, requests, **kw))
