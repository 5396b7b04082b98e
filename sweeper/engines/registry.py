"""Engines by name: the one place that maps `runtime.engine` to the module that drives it."""

from __future__ import annotations

from collections.abc import Callable

from sweeper.engines.base import Engine
from sweeper.engines.ddtree_runtime import DDTreeRuntime
from sweeper.engines.openai import OpenAIEndpoint
from sweeper.engines.sglang import SGLang
from sweeper.engines.vllm import VLLM
from sweeper.spec import RuntimeSpec

#: Engine name -> constructor taking the runtime section and the manifest's runtime source hash.
ENGINES: dict[str, Callable[[RuntimeSpec, str | None], Engine]] = {
    "ddtree_runtime": DDTreeRuntime,
    "sglang": SGLang,
    "vllm": VLLM,
    "openai": OpenAIEndpoint,
}


def engine_for(runtime: RuntimeSpec, source_hash: str | None = None) -> Engine:
    """The engine driving `runtime`; `source_hash` is what the bundled runtime must report."""
    try:
        make = ENGINES[runtime.engine]
    except KeyError:
        raise ValueError(f"no engine module for {runtime.engine!r}") from None
    return make(runtime, source_hash)
