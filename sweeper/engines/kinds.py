"""What each engine is, as data the spec and the plan read without importing the engines:
whether the sweeper launches its server (an `openai` endpoint is already running)."""

from __future__ import annotations

#: Engine name -> the sweeper starts, restarts and stops its server.
LAUNCHED: dict[str, bool] = {
    "ddtree_runtime": True,
    "sglang": True,
    "vllm": True,
    "openai": False,
}
