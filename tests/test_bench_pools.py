"""`bench/scored_pools.py`'s pool specs: old ones keep their cache paths, processor parts name
theirs and reach the runtime's `Processors`; its corpus drafter; `bench/scored_power.py`'s draws
of a pool coupled to its AR pool."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / f"bench/{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's names through it
    spec.loader.exec_module(module)
    return module


def pools() -> ModuleType:
    return bench("scored_pools")


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


def test_corpus_drafter_drafts_the_sample_the_context_follows() -> None:
    """A context that is a prefix of a corpus sample gets that sample's next tokens at rank 0;
    shorter suffixes fill the other candidates, ranked below; no candidate is -inf."""
    drafter = pools().CorpusDrafter([[1, 2, 3, 4, 5], [7, 2, 3, 6, 5], [8, 8, 3, 9, 9]])
    lps, toks = drafter.propose([[1, 2, 3], [0, 3]], depth=2, k=3)
    assert toks[0, 0].tolist() == [4, 6, 9]  # "1 2 3" (sample 0), then "2 3", then "3"
    assert lps[0, 0, 0] > lps[0, 0, 1] > lps[0, 0, 2] > float("-inf")
    assert toks[0, 1, :2].tolist() == [5, 9]  # sample 0's next; "2 3" adds no other
    assert lps[0, 1, 2] == float("-inf")
    assert toks[1, 0].tolist() == [4, 6, 9]  # "3" alone, each follower once
    assert lps[1, 0, 0] == lps[1, 0, 1] == lps[1, 0, 2]


def test_a_pool_on_the_ar_pools_seeds_gets_a_control_of_other_seeds(tmp_path: Path) -> None:
    """An oracle pool drawn on the AR pool's seeds is coupled to it sample by sample: a draw's AR
    control takes none of the test's samples (by index, that is by seed)."""
    import numpy as np

    power = bench("scored_power")
    for name in ("rpdo-x-s16-oracle", "ar-none-s16", "other-s17"):
        np.savez(tmp_path / f"{name}-n12.npz", length=np.full((2, 12), 3), prompts=["a", "b"])
    ar, test, other = (
        power.Pool([tmp_path / f"{name}-n12.npz"], 0.7, power.Settings())
        for name in ("ar-none-s16", "rpdo-x-s16-oracle", "other-s17")
    )
    rng = np.random.default_rng(0)
    for _ in range(20):
        mine, theirs = power.paired(test, ar, 6, rng)
        assert all(len(set(m) | set(t)) == 12 for m, t in zip(mine, theirs, strict=True))
    overlaps = [
        len(set(m) & set(t))
        for _ in range(20)
        for m, t in zip(*power.paired(other, ar, 6, rng), strict=True)
    ]
    assert max(overlaps) > 0  # pools on other seeds: independent draws, which may share indices
