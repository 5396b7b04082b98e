"""From a validated request to engine work: prompt token ids, sampling params, and the event stream.

`EngineRequest` is the only place a request meets the engine loop; closing it early (client gone,
server stopping) aborts the request in the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from ddtree_runtime.engine import SamplingParams
from ddtree_runtime.server.engine_loop import EngineFailure
from ddtree_runtime.server.protocol import (
    ChatMessage,
    RequestError,
    SamplingFields,
)
from ddtree_runtime.server.state import RuntimeState


def new_request_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def check_model_name(state: RuntimeState, request: SamplingFields) -> None:
    if request.model != state.config.served_model_name:
        raise RequestError(
            f"model '{request.model}' is not served here; "
            f"this server serves '{state.config.served_model_name}'",
            param="model",
        )


def text_ids(state: RuntimeState, text: str, param: str, add_special_tokens: bool) -> list[int]:
    """A text's ids under the served tokenizer; a text too long to fit is refused (naming
    `param`) by its length alone, before the tokenizer sees it (`RequestLimits`)."""
    state.limits.check_prompt(text, param)
    return list(state.loaded.tokenizer.encode(text, add_special_tokens=add_special_tokens))


def completion_prompt_ids(state: RuntimeState, prompt: str | list[int]) -> list[int]:
    """A completion's prompt ids: text encoded by the served tokenizer, or ids checked."""
    if isinstance(prompt, str):
        ids = text_ids(state, prompt, "prompt", add_special_tokens=True)
    else:
        ids = list(prompt)
        vocab = len(state.loaded.tokenizer)
        if any(not 0 <= token < vocab for token in ids):
            raise RequestError(f"prompt token ids must be in [0, {vocab})", param="prompt")
    if not ids:
        raise RequestError("prompt must not be empty", param="prompt")
    return ids


def chat_prompt_ids(state: RuntimeState, chat: list[ChatMessage]) -> list[int]:
    """A chat's prompt ids: the model's template, or a plain transcript without one."""
    tokenizer = state.loaded.tokenizer
    messages = [{"role": m.role, "content": m.text()} for m in chat]
    if state.loaded.chat_template:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    else:
        # Test models ship no template; a plain transcript keeps chat usable with them.
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"
    ids = text_ids(state, text, "messages", add_special_tokens=False)
    if not ids:
        raise RequestError("messages produce an empty prompt", param="messages")
    return ids


def sampling_params(
    state: RuntimeState,
    request: SamplingFields,
    prompt_len: int,
    max_tokens: int | None,
    logprobs: int | None,
) -> SamplingParams:
    """Checks the length limits (400 on excess) and builds the engine's SamplingParams."""
    limit = state.config.max_model_len
    if max_tokens is not None and max_tokens > limit:
        raise RequestError(
            f"max_tokens ({max_tokens}) is larger than max_model_len ({limit})",
            param="max_tokens",
        )
    if max_tokens is None:
        max_tokens = limit - prompt_len
    if prompt_len + max_tokens > limit:
        raise RequestError(
            f"prompt ({prompt_len} tokens) plus max_tokens ({max_tokens}) exceeds "
            f"max_model_len ({limit})",
            param="max_tokens",
        )
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        top_k=max(request.top_k, 0),
        min_p=request.min_p,
        seed=request.seed,
        stop=request.stop_list(),
        logprobs=logprobs,
        ignore_eos=request.ignore_eos,
        min_tokens=request.min_tokens,
        repetition_penalty=request.repetition_penalty,
        frequency_penalty=request.frequency_penalty,
        presence_penalty=request.presence_penalty,
        logit_bias=dict(request.processors().logit_bias),
        n=request.n,
        response_format=request.response_format,
        regex=request.regex,
    )


class EngineRequest:
    """One request submitted to the engine loop (on construction); `events()` yields its
    TokenEvents as they are accepted, ending after the finished one. Always `close()` it: closing
    before the end aborts the request, so no work is done for a client that is gone. It keeps
    the engine and the live counters it was submitted to: a switch may replace both between its
    last event and its answer, and its stats are that engine's and count for that config."""

    def __init__(
        self, state: RuntimeState, request_id: str, prompt_ids: list[int], params: SamplingParams
    ) -> None:
        self.state = state
        self.engine = state.engine
        self.stats = state.stats
        self.request_id = request_id
        self.finished = False
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        try:
            state.loop.submit(request_id, prompt_ids, params, self._sink)
        except ValueError as error:
            raise RequestError(str(error)) from error
        except RuntimeError as error:
            raise RequestError(str(error), status=503) from error

    def _sink(self, item: Any) -> None:
        # Runs on the engine thread.
        # RuntimeError: the event loop is closed, the server is gone.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def events(self) -> AsyncIterator[Any]:
        while not self.finished:
            item = await self._queue.get()
            if isinstance(item, EngineFailure):
                self.finished = True
                self.stats.failed += 1
                raise item
            self.finished = bool(item.finished)
            yield item

    def close(self) -> None:
        if not self.finished:
            self.finished = True
            self.state.loop.abort(self.request_id)
            self.stats.aborted += 1


def submit_choices(
    state: RuntimeState, request_id: str, prompt_ids: list[int], params: SamplingParams
) -> list[EngineRequest]:
    """One engine request per choice (`SamplingParams.choices`: each its own seed): choice 0
    under `request_id` itself, choice i under `request_id-i`. If one is refused, those already
    submitted are closed."""
    submitted: list[EngineRequest] = []
    try:
        for index, choice in enumerate(params.choices()):
            rid = request_id if index == 0 else f"{request_id}-{index}"
            submitted.append(EngineRequest(state, rid, prompt_ids, choice))
    except BaseException:
        for request in submitted:
            request.close()
        raise
    return submitted
