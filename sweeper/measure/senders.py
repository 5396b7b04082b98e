"""Senders: how one request is written and its stream read, named by import path for the workers.

A sender is an async function `(client: StreamClient, base_url: str, payload: dict) -> dict`
(sweeper.measure.sse_http; its `control` is an httpx client for anything but the stream): it
sends one request described by a plain-dict payload and returns a plain-dict record (it must
not raise for HTTP trouble; it puts the reason in the record's `error`). Worker
processes import it by path, "module:function", so an engine module can supply its own without
the pool knowing engines. `DEFAULT_SENDER` streams a request through
`sweeper.measure.client.stream_request` with the engine the payload names: its payload is a
`RequestSpec`'s fields, an optional "model", the spec's runtime section as plain data
("runtime"), from which each worker process builds the engine once (the default runtime's
engine when absent), and optionally the request as the parent's engine wrote it ("request":
path, body, headers). The parent's engine has proven the server and may have learned what it is
(engine `openai` asks a vLLM server for token ids, which a freshly built engine would not
know), so when the parent writes the request the workers' engines only read the streams.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict
from typing import Any

from sweeper.engines.base import Engine, HttpRequest, RequestSpec
from sweeper.engines.registry import engine_for
from sweeper.measure.client import stream_request
from sweeper.measure.sse_http import StreamClient
from sweeper.spec import RuntimeSpec

Sender = Callable[[StreamClient, str, dict[str, Any]], Awaitable[dict[str, Any]]]
DEFAULT_SENDER = "sweeper.measure.senders:openai_stream"


def load_sender(path: str) -> Sender:
    """The async function at "module:function", or a ValueError saying what is wrong."""
    module_name, sep, name = path.partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"sender {path!r} is not of the form 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"sender {path!r}: cannot import {module_name}: {exc}") from exc
    fn = getattr(module, name, None)
    if fn is None:
        raise ValueError(f"sender {path!r}: {module_name} has no {name}")
    if not inspect.iscoroutinefunction(fn):
        raise ValueError(f"sender {path!r} is not an async function")
    return fn


def spec_payload(
    spec: RequestSpec,
    model: str | None = None,
    runtime: RuntimeSpec | None = None,
    engine: Engine | None = None,
) -> dict[str, Any]:
    """The default sender's payload for one RequestSpec (plain data, picklable); with `engine`,
    the request is written here, by that engine."""
    payload = asdict(spec)
    if spec.messages is not None:
        payload["messages"] = [dict(m) for m in spec.messages]
    if model:
        payload["model"] = model
    if runtime is not None:
        payload["runtime"] = runtime.model_dump(mode="json")
    if engine is not None:
        payload["request"] = asdict(engine.request(spec, model))
    return payload


_ENGINES: dict[str, Engine] = {}


def _engine(runtime: Mapping[str, Any] | None) -> Engine:
    """The engine a payload names, built once per worker process."""
    key = repr(sorted((runtime or {}).items()))
    if key not in _ENGINES:
        _ENGINES[key] = engine_for(RuntimeSpec.model_validate(runtime or {}))
    return _ENGINES[key]


async def openai_stream(
    client: StreamClient, base_url: str, payload: Mapping[str, Any]
) -> dict[str, Any]:
    """Stream one request (`sweeper.measure.client.stream_request`) from a `spec_payload`."""
    fields = dict(payload)
    model = fields.pop("model", None)
    engine = _engine(fields.pop("runtime", None))
    written = fields.pop("request", None)
    request = HttpRequest(**written) if written is not None else None
    if fields.get("messages") is not None:
        fields["messages"] = tuple(fields["messages"])
    spec = RequestSpec(**fields)
    return await stream_request(client, base_url, spec, engine, model=model, request=request)
