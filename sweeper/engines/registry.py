"""Engines by name: `engine_for` gives the engine driving a spec's `runtime.engine`.

Each engine class registers itself against its catalog record next to the class
(`sweeper.engines.base.register`); importing the engine modules here is what registers them.
"""

from __future__ import annotations

# The engine modules are imported for their registration (`@register`), not for a name.
from sweeper.engines import ddtree_runtime, openai, sglang, vllm  # noqa: F401
from sweeper.engines.base import ENGINES, Engine
from sweeper.spec import RuntimeSpec

__all__ = ["ENGINES", "engine_for"]


def engine_for(runtime: RuntimeSpec, source_hash: str | None = None) -> Engine:
    """The engine driving `runtime`; `source_hash` is what the bundled runtime must report."""
    try:
        make = ENGINES[runtime.engine]
    except KeyError:
        raise ValueError(f"no engine module for {runtime.engine!r}") from None
    return make(runtime, source_hash)
