"""Drafters: per-position top-K draft distributions for the next L positions.

The interface is ``base.Drafter``. ``ngram`` looks up suffix matches in the context; ``oracle``
(tests only) knows the target's greedy continuations and adds controllable noise; ``dflash:PATH``
loads a DFlash block-diffusion draft checkpoint (``dflash_model``) and drafts from the target's
hidden states, which the engine then keeps per request. ``make_drafter`` is the registry: a spec
string -> a drafter.
DFlash is implemented against the public z-lab/dflash checkpoint format and tested only with a tiny
self-made random checkpoint on CPU: it has never been run on a real DFlash checkpoint or on a GPU.
"""

from __future__ import annotations

from typing import Any

from ddtree_runtime.drafters.base import Drafter
from ddtree_runtime.drafters.dflash import DFlashDrafter
from ddtree_runtime.drafters.ngram import NgramDrafter
from ddtree_runtime.drafters.oracle import OracleDrafter
from ddtree_runtime.models import LoadedModel

__all__ = ["DFlashDrafter", "Drafter", "NgramDrafter", "OracleDrafter", "make_drafter"]


def make_drafter(spec: str, loaded: LoadedModel, **oracle_args: Any) -> Drafter:
    """'ngram' | 'dflash:PATH' | 'oracle' (tests only: pass references=...)."""
    if spec == "ngram":
        return NgramDrafter()
    if spec.startswith("dflash:"):
        path = spec.partition(":")[2]
        if not path:
            raise ValueError("dflash drafter needs a checkpoint path: dflash:/path/to/checkpoint")
        return DFlashDrafter(path, loaded)
    if spec == "oracle":
        if "references" not in oracle_args:
            raise ValueError("oracle drafter is test-only and needs references=[...]")
        vocab = int(loaded.model.config.vocab_size)
        return OracleDrafter(vocab_size=vocab, **oracle_args)
    raise ValueError(f"unknown drafter {spec!r}: use ngram, dflash:PATH or oracle")
