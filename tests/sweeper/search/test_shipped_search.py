"""The search example in sweeps/, sweeps/search-local.yaml, loads and plans as shipped: a real
search (TPE) of the real runtime on this CPU (no planted package), stopping well inside its grid,
with the first trials the dry run previews. Running it takes minutes (docs/search.md)."""

from __future__ import annotations

from pathlib import Path

from sweeper.plan import build_plan
from sweeper.search import plan_problems, preview
from sweeper.spec import load_spec

SPEC = Path(__file__).resolve().parents[3] / "sweeps" / "search-local.yaml"


def test_the_local_search_example_loads_and_plans() -> None:
    spec = load_spec(SPEC)
    assert spec.name == "search-local" and spec.hosts[0].kind == "local"
    assert spec.runtime.engine == "ddtree_runtime" and spec.runtime.package is None
    assert (spec.runtime.model, spec.runtime.device) == ("smollm2-135m", "cpu")
    assert spec.search is not None and spec.search.strategy == "tpe"
    assert spec.search.stop is not None and spec.search.stop.restarts is not None
    plan = build_plan(spec)
    assert plan_problems(plan) == []
    [host] = plan.hosts
    speculative = [s for s in host.steps if s.server_config.mode != "ar"]
    assert len(speculative) == 18 and len(host.steps) == plan.restarts == 19
    assert spec.search.stop.restarts < plan.restarts / 2  # a search, not the grid
    lines = preview(plan)
    assert lines[1] == "stop: 8 restarts of the grid's 19 (42%), the AR baseline's restart included"
    assert lines[2].startswith("local: 1 AR baseline(s) first, then of 18 candidates: ")
