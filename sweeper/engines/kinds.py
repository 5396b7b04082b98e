"""What each engine is, as data the spec and the plan read without importing the engines:
whether the sweeper launches its server (an `openai` endpoint is already running), and whether
the server runs the bundled runtime's code (which `runtime.package` may replace)."""

from __future__ import annotations

#: Engine name -> the sweeper starts, restarts and stops its server.
LAUNCHED: dict[str, bool] = {
    "ddtree_runtime": True,
    "sglang": True,
    "vllm": True,
    "openai": False,
}

#: Engine name -> its server is the bundled runtime (`ddtree_runtime`), whose code a spec's
#: `runtime.package` replaces and whose source hash the manifest names.
RUNS_BUNDLED_RUNTIME: dict[str, bool] = {name: name == "ddtree_runtime" for name in LAUNCHED}
