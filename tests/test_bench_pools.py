"""`bench/scored_pools.py`'s pool specs: old ones keep their cache paths, processor parts name
theirs and reach the runtime's `Processors`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def pools() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scored_pools", ROOT / "bench/scored_pools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's names through it
    spec.loader.exec_module(module)
    return module


def test_old_pool_specs_keep_their_paths() -> None:
    parse = pools().PoolSpec.parse
    out = Path("c")
    assert parse("ar:none:0.7:1.0:0").path(out, 192, 24, 20) == Path(
        "c/ar-none-t0.7-p1.0-s0-n192-l24-k20.npz"
    )
    assert parse("ar:none:0.7:1.0:300000000:0:0.1").path(out, 48, 24, 20) == Path(
        "c/ar-none-t0.7-p1.0-s300000000-mp0.1-n48-l24-k20.npz"
    )


def test_processor_parts_name_the_pool_and_reach_the_runtime() -> None:
    from ddtree_runtime.algo.processors import Processors

    spec = pools().PoolSpec.parse("lbd:logit_bias_drafts_ignored:0.7:1.0:14:0:0:rp1.3:lb28=-5")
    assert spec.processors == Processors(repetition_penalty=1.3, logit_bias=((28, -5.0),))
    assert spec.path(Path("c"), 32, 24, 20).name == (
        "lbd-logit_bias_drafts_ignored-t0.7-p1.0-s14-rp1.3-lb28=-5.0-n32-l24-k20.npz"
    )
