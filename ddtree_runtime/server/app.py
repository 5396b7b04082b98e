"""The OpenAI-compatible HTTP app (FastAPI): routes, error mapping, streaming and non-streaming.

The contract is docs/runtime-api.md. Every client error is an OpenAI-style JSON error (400; 404
for an unknown route, 413 for a body over the cap) and never stops the server. Every body is
bounded (`limits.BodyLimit`), and a request's CPU work that grows with its size (parsing,
templating, tokenizing, rendering a long answer) runs on a worker thread, so the event loop
always answers (/health).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ddtree_runtime.score import score_continuation
from ddtree_runtime.server.config import SwitchRefused
from ddtree_runtime.server.engine_loop import EngineFailure
from ddtree_runtime.server.formatting import (
    Accumulated,
    ResponseHead,
    TokenText,
    chat_logprobs,
    legacy_logprobs,
    sse,
    usage,
)
from ddtree_runtime.server.generation import (
    EngineRequest,
    chat_prompt_ids,
    check_model_name,
    completion_prompt_ids,
    new_request_id,
    sampling_params,
    submit_choices,
    text_ids,
)
from ddtree_runtime.server.limits import BodyLimit
from ddtree_runtime.server.protocol import (
    ChatCompletionRequest,
    CompletionRequest,
    RequestError,
    SamplingFields,
    ScoreRequest,
    TokenizeRequest,
    error_body,
    validation_error,
)
from ddtree_runtime.server.state import SCORING, RuntimeState, request_stats_dict
from ddtree_runtime.server.switch import Gate, Switcher
from ddtree_runtime.stats import merged

if TYPE_CHECKING:
    import torch

log = logging.getLogger("ddtree_runtime.server")

# How often a non-streaming request checks whether its client is still there.
DISCONNECT_POLL_S = 0.25

RequestModel = TypeVar("RequestModel", bound=BaseModel)


def parse_body(model: type[RequestModel], body: bytes) -> RequestModel:
    try:
        return model.model_validate_json(body)
    except ValidationError as error:
        raise validation_error(error) from error


def completion_inputs(state: RuntimeState, body: bytes) -> tuple[CompletionRequest, list[int]]:
    """POST /v1/completions' request and prompt ids (worker thread)."""
    request = parse_body(CompletionRequest, body)
    check_model_name(state, request)
    return request, completion_prompt_ids(state, request.prompt)


def chat_inputs(state: RuntimeState, body: bytes) -> tuple[ChatCompletionRequest, list[int]]:
    """POST /v1/chat/completions' request and prompt ids (worker thread)."""
    request = parse_body(ChatCompletionRequest, body)
    check_model_name(state, request)
    return request, chat_prompt_ids(state, request.messages)


def score_inputs(
    state: RuntimeState, engine: Any, body: bytes
) -> tuple[ScoreRequest, list[int], torch.Tensor | None]:
    """POST /score's request, prompt ids and grammar bitmask per position (None without a
    grammar; `engine`'s grammar compiler), every check but the engine's (worker thread)."""
    request = parse_body(ScoreRequest, body)
    request.one_prompt()
    if request.model != state.config.served_model_name:
        raise RequestError(f"model '{request.model}' is not served here", param="model")
    if request.messages is not None:
        prompt = chat_prompt_ids(state, request.messages)
    else:
        assert request.prompt is not None
        prompt = completion_prompt_ids(state, request.prompt)
    continuation = request.continuation
    vocab = engine.limits.vocab_size
    if any(not 0 <= token < vocab for token in continuation):
        raise RequestError(f"continuation ids must be in [0, {vocab})", param="continuation")
    try:
        request.processors().check(vocab)
    except ValueError as error:  # the ranges are the protocol's: only ids past the vocabulary
        raise RequestError(str(error), param="logit_bias") from error
    limit = state.config.max_model_len
    if len(prompt) + len(continuation) > limit:
        raise RequestError(
            f"prompt ({len(prompt)} tokens) plus continuation ({len(continuation)}) exceeds "
            f"max_model_len ({limit})",
            param="continuation",
        )
    try:
        grammar = engine.request_grammar(request.response_format, request.regex)
    except ValueError as error:
        raise RequestError(str(error)) from error
    masks = None if grammar is None else grammar.chain_bitmask(prompt[-1], continuation)
    return request, prompt, masks


def compact_json(value: Any) -> str:
    """JSON as `JSONResponse` renders it."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def score_answer(request: ScoreRequest, prompt: list[int], scores: list[Any]) -> Response:
    """POST /score's answer, rendered a position at a time on a worker thread: a long
    continuation's `top` lists make megabytes of JSON, and one `json.dumps` over all of them
    would hold the GIL, and so the event loop, throughout. `prompt_token_ids`: the ids scored
    before the continuation (a chat's with its template applied), which a judge rebuilding the
    repetition penalty counts."""
    head = {
        "object": "score",
        "model": request.model,
        "prompt_tokens": len(prompt),
        "prompt_token_ids": prompt,
        **SCORING,
    }
    positions = ",".join(compact_json(position.as_dict()) for position in scores)
    # The head's closing brace gives way to the positions.
    body = f'{compact_json(head)[:-1]},"positions":[{positions}]}}'
    return Response(body, media_type="application/json")


def tokenize_answer(state: RuntimeState, body: bytes) -> JSONResponse:
    """POST /tokenize's answer, rendered (worker thread)."""
    request = parse_body(TokenizeRequest, body)
    if request.model not in (None, state.config.served_model_name):
        raise RequestError(f"model '{request.model}' is not served here", param="model")
    tokens = text_ids(state, request.prompt, "prompt", request.add_special_tokens)
    limit = state.config.max_model_len
    return JSONResponse({"tokens": tokens, "count": len(tokens), "max_model_len": limit})


@dataclass
class Job:
    """One validated generation request and how to shape its answer."""

    state: RuntimeState
    head: ResponseHead
    request: SamplingFields
    prompt_ids: list[int]
    top_logprobs: int | None  # None: no logprobs
    token_text: TokenText

    def choice(
        self, index: int, text_before: str, token_ids: list[int], logprobs: list[Any] | None
    ) -> dict[str, Any]:
        """Choice `index`'s fields shared by bodies and chunks (no finish_reason); `text_before`
        is its text before these tokens (legacy logprobs count offsets from it)."""
        choice: dict[str, Any] = {"index": index, "logprobs": None}
        if self.top_logprobs is not None and logprobs is not None:
            if self.head.chat:
                choice["logprobs"] = chat_logprobs(logprobs, self.token_text, self.top_logprobs)
            else:
                choice["logprobs"] = legacy_logprobs(
                    logprobs, self.token_text, self.top_logprobs, len(text_before)
                )
        if self.request.return_token_ids:
            choice["token_ids"] = token_ids
        return choice

    def finish(self, choices: list[EngineRequest], completion_tokens: int) -> dict[str, Any]:
        """usage (the prompt once, every choice's tokens) + ddtree stats (the choices merged),
        recorded in the live totals as one request."""
        # pop: the engine keeps a finished request's stats until the server has read them.
        parts = [choice.engine.pop_stats(choice.request_id) for choice in choices]
        stats = request_stats_dict(merged(parts))
        choices[0].stats.record(stats)
        return {"usage": usage(len(self.prompt_ids), completion_tokens), "ddtree": stats}


async def choice_events(choices: list[EngineRequest]) -> AsyncIterator[tuple[int, Any]]:
    """(choice index, TokenEvent) from every choice as they come, until all have finished; an
    EngineFailure of any one ends them all (the caller closes them)."""
    queue: asyncio.Queue[tuple[int, Any]] = asyncio.Queue()

    async def pump(index: int, choice: EngineRequest) -> None:
        try:
            async for event in choice.events():
                queue.put_nowait((index, event))
        except EngineFailure as error:
            queue.put_nowait((index, error))
        queue.put_nowait((index, None))

    tasks = [asyncio.ensure_future(pump(i, choice)) for i, choice in enumerate(choices)]
    try:
        running = len(tasks)
        while running:
            index, item = await queue.get()
            if isinstance(item, EngineFailure):
                raise item
            if item is None:
                running -= 1
            else:
                yield index, item
    finally:
        for task in tasks:
            task.cancel()


async def complete(job: Job, choices: list[EngineRequest]) -> dict[str, Any]:
    wholes = [Accumulated() for _ in choices]
    async for index, event in choice_events(choices):
        wholes[index].add(event)
    bodies = []
    for index, whole in enumerate(wholes):
        choice = job.choice(index, "", whole.token_ids, whole.logprobs)
        if job.head.chat:
            choice["message"] = {"role": "assistant", "content": whole.text}
        else:
            choice["text"] = whole.text
        choice["finish_reason"] = whole.finish_reason
        bodies.append(choice)
    body = job.head.body(bodies, chunk=False)
    body.update(job.finish(choices, sum(len(whole.token_ids) for whole in wholes)))
    return body


def close_all(choices: list[EngineRequest]) -> None:
    for choice in choices:
        choice.close()


async def complete_unless_gone(job: Job, choices: list[EngineRequest], http: Request) -> Any:
    """A non-streaming answer; if the client disconnects first, the request is aborted."""
    task = asyncio.ensure_future(complete(job, choices))
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if not task.done() and await http.is_disconnected():
                task.cancel()
                log.info("client gone, aborted %s", job.head.id)
                return JSONResponse(error_body("client disconnected"), status_code=499)
        return JSONResponse(task.result())
    except EngineFailure as error:
        return JSONResponse(
            error_body(str(error), code="engine_error", error_type="server_error"),
            status_code=error.status,
        )
    finally:
        task.cancel()
        close_all(choices)


async def stream(job: Job, choices: list[EngineRequest]) -> AsyncIterator[str]:
    """SSE chunks as tokens are accepted, one choice per chunk (its `index`); leaving early
    (client gone) aborts the request."""
    texts = [""] * len(choices)
    completion_tokens = 0
    try:
        if job.head.chat:
            for index in range(len(choices)):
                first = {"index": index, "delta": {"role": "assistant", "content": ""}}
                first.update(logprobs=None, finish_reason=None)
                yield sse(job.head.body([first], chunk=True))
        async for index, event in choice_events(choices):
            choice = job.choice(index, texts[index], list(event.token_ids), event.logprobs)
            if job.head.chat:
                choice["delta"] = {"content": event.text}
            else:
                choice["text"] = event.text
            choice["finish_reason"] = event.finish_reason if event.finished else None
            texts[index] += event.text
            completion_tokens += len(event.token_ids)
            yield sse(job.head.body([choice], chunk=True))
        tail = job.finish(choices, completion_tokens)
        if job.request.include_usage():
            final = job.head.body([], chunk=True)
            final.update(tail)
            yield sse(final)
    except EngineFailure as error:
        yield sse(error_body(str(error), code="engine_error", error_type="server_error"))
    finally:
        close_all(choices)
    yield sse("[DONE]")


async def respond(job: Job, http: Request, max_tokens: int | None, gate: Gate) -> Any:
    state = job.state
    params = sampling_params(state, job.request, len(job.prompt_ids), max_tokens, job.top_logprobs)
    await gate.enter()  # behind a switch; nothing awaits from here until it is submitted
    choices = submit_choices(state, job.head.id, job.prompt_ids, params)
    if job.request.stream:
        return StreamingResponse(stream(job, choices), media_type="text/event-stream")
    return await complete_unless_gone(job, choices, http)


def create_app(state: RuntimeState) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        # Shutdown: in-flight requests had their grace period; end the engine thread.
        state.loop.stop()

    app = FastAPI(title="ddtree_runtime", lifespan=lifespan)
    app.add_middleware(BodyLimit, limits=state.limits)
    token_text = TokenText(state.loaded.tokenizer)
    app.state.runtime = state
    switcher = Switcher(state)

    @app.exception_handler(RequestError)
    async def request_error(_: Request, error: RequestError) -> JSONResponse:
        return JSONResponse(error_body(error.message, error.param), status_code=error.status)

    @app.exception_handler(RequestValidationError)
    async def fastapi_validation_error(_: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0] if error.errors() else {"loc": (), "msg": "invalid request"}
        param = ".".join(str(part) for part in first["loc"] if part != "body") or None
        return JSONResponse(error_body(str(first["msg"]), param), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            error_body(str(error.detail), code=str(error.status_code)),
            status_code=error.status_code,
        )

    @app.get("/health")
    async def health() -> JSONResponse:
        if state.ready:
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "loading"}, status_code=503)

    @app.get("/server_info")
    async def server_info() -> dict[str, Any]:
        return state.server_info()

    @app.post("/admin/switch")
    async def admin_switch(http: Request) -> dict[str, Any]:
        """Switch the speculative config in place (`server.switch`); 409 before the server is
        ready (its own warm-up runs) or once a failed switch left it without an engine."""
        if not state.ready:
            raise RequestError("the server is not ready: it cannot switch now", status=409)
        try:
            changes = json.loads(await http.body())
        except ValueError as error:
            raise RequestError(f"a switch body is a JSON object: {error}") from error
        try:
            return await switcher.switch(changes)
        except SwitchRefused as error:
            raise RequestError(str(error), param=error.field) from error

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        model = {
            "id": state.config.served_model_name,
            "object": "model",
            "created": int(state.start_time),
            "owned_by": "ddtree_runtime",
            "root": state.config.model,
            "max_model_len": state.config.max_model_len,
        }
        return {"object": "list", "data": [model]}

    @app.post("/tokenize")
    async def tokenize(http: Request) -> JSONResponse:
        """A text's ids under the served tokenizer (vLLM's route and shape), so a client can
        build prompts of exact token counts."""
        return await asyncio.to_thread(tokenize_answer, state, await http.body())

    @app.post("/score")
    async def score(http: Request) -> Response:
        """A sampled continuation scored by the target's own prefill under the parameters it
        was drawn with (`ddtree_runtime.score`); the forward runs on the engine thread between
        steps."""
        # Behind a switch; the engine then serving compiles the grammar, even if a switch
        # replaces it meanwhile (its compiler is the same model's).
        await switcher.gate.enter()
        engine = state.engine
        body = await http.body()
        request, prompt, grammar = await asyncio.to_thread(score_inputs, state, engine, body)
        continuation = request.continuation
        model, top_k = state.loaded.model, max(request.top_k, 0)

        def run() -> list[Any]:
            return score_continuation(
                model,
                prompt,
                continuation,
                request.temperature,
                top_k,
                request.top_p,
                request.min_p,
                request.top_logprobs,
                request.processors(),
                grammar,
            )

        try:
            scores = await asyncio.wrap_future(state.loop.call(run))
        except RuntimeError as error:  # stopping before it was queued
            raise RequestError(str(error), status=503) from error
        except EngineFailure as error:  # stopping before it ran
            raise RequestError(str(error), status=error.status) from error
        return await asyncio.to_thread(score_answer, request, prompt, scores)

    @app.post("/v1/completions")
    async def completions(http: Request) -> Any:
        request, prompt_ids = await asyncio.to_thread(completion_inputs, state, await http.body())
        job = Job(
            state=state,
            head=ResponseHead(new_request_id("cmpl"), request.model, chat=False),
            request=request,
            prompt_ids=prompt_ids,
            top_logprobs=request.logprobs,
            token_text=token_text,
        )
        return await respond(job, http, request.max_tokens, switcher.gate)

    @app.post("/v1/chat/completions")
    async def chat_completions(http: Request) -> Any:
        request, prompt_ids = await asyncio.to_thread(chat_inputs, state, await http.body())
        top = (request.top_logprobs or 0) if request.logprobs else None
        job = Job(
            state=state,
            head=ResponseHead(new_request_id("chatcmpl"), request.model, chat=True),
            request=request,
            prompt_ids=prompt_ids,
            top_logprobs=top,
            token_text=token_text,
        )
        return await respond(job, http, request.token_limit(), switcher.gate)

    return app
