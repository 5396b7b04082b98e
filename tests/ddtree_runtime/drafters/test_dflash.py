"""DFlash drafter: a tiny self-made random checkpoint in the public reference's format, on CPU.

No real DFlash checkpoint is available here; these tests check the engine's handling of the target
features (kept exactly for the committed tokens), exactness with the drafter, the drafter's
proposals and its errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from ddtree_runtime.drafters import OracleDrafter, make_drafter
from ddtree_runtime.drafters.dflash_model import DFlashModel
from ddtree_runtime.engine import Engine, EngineConfig
from tests.ddtree_runtime.engine_helpers import (
    first_divergence,
    long_refs,
    mixed_budgets,
    prompts_and_refs,
    run_greedy,
    tiny,
)

LAYERS = [1, 3]


def draft_config(**overrides: Any) -> dict:
    cfg = tiny().model.config
    config: dict[str, Any] = {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "hidden_size": int(cfg.hidden_size),
        "intermediate_size": 384,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "max_position_embeddings": 4096,
        "vocab_size": int(cfg.vocab_size),
        "block_size": 4,
        "num_target_layers": int(cfg.num_hidden_layers),
        "dflash_config": {"target_layer_ids": LAYERS, "mask_token_id": 5},
    }
    config.update(overrides)
    return config


def write_checkpoint(directory: Path, seed: int = 0, **overrides: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = draft_config(**overrides)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = DFlashModel(config)
        for p in model.parameters():
            torch.nn.init.normal_(p, std=0.08)
    (directory / "config.json").write_text(json.dumps(config))
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(directory / "model.safetensors"))
    return directory


def target_features(ids: list[int]) -> torch.Tensor:
    """The selected layers' outputs over `ids` from one plain forward of the target."""
    model = tiny().model
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    return torch.cat([out.hidden_states[i + 1][0] for i in LAYERS], dim=-1)


class FeatureCheckingOracle(OracleDrafter):
    """The oracle (deep acceptance) asking for features and checking them against a forward."""

    feature_layers = LAYERS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.checked = 0

    def propose(
        self, contexts: list[list[int]], depth: int, k: int, hidden: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        assert hidden is not None and len(hidden) == len(contexts)
        for ctx, feats in zip(contexts, hidden, strict=True):
            want = target_features(ctx[:-1])
            assert feats.shape == want.shape
            torch.testing.assert_close(feats, want, rtol=1e-9, atol=1e-9)
            self.checked += 1
        return super().propose(contexts, depth, k, hidden)


def test_engine_keeps_exactly_the_committed_tokens_features() -> None:
    """Prefill + accepted paths (padding active, deep trees accepted) == a plain forward's."""
    prompts, refs = prompts_and_refs()
    m = tiny()
    drafter = FeatureCheckingOracle(long_refs(), int(m.model.config.vocab_size))
    engine = Engine(m, drafter, EngineConfig(budget=8, topk=2, block_size=6, max_batch=3))
    results = run_greedy(engine, mixed_budgets(8, 3), max_tokens=12)  # first 3 prompts
    assert drafter.checked > 0
    assert max(r.stats.tau for r in results) > 1.5
    assert first_divergence([r.token_ids for r in results], [r[:12] for r in refs[:3]]) is None


def test_ddtree_with_dflash_is_exact_with_padding(tmp_path: Path) -> None:
    prompts, refs = prompts_and_refs()
    m = tiny()
    drafter = make_drafter(f"dflash:{write_checkpoint(tmp_path / 'ckpt')}", m)
    assert drafter.name == "dflash"
    engine = Engine(m, drafter, EngineConfig(budget=12, topk=4, block_size=6, max_batch=3))
    assert engine.wants_features
    results = run_greedy(engine, mixed_budgets(12, len(prompts)), max_tokens=24)
    got = [r.token_ids for r in results]
    assert first_divergence(got, [r[:24] for r in refs]) is None


def test_other_drafters_collect_no_features() -> None:
    m = tiny()
    engine = Engine(m, make_drafter("ngram", m), EngineConfig(budget=4, max_batch=2))
    assert not engine.wants_features and engine.forward.feature_layers is None


def test_proposals_are_sorted_and_depend_on_the_target_features(tmp_path: Path) -> None:
    m = tiny()
    drafter = make_drafter(f"dflash:{write_checkpoint(tmp_path / 'ckpt')}", m)
    ctx = m.tokenizer.encode("Hello there")
    feats = target_features(ctx[:-1])
    other = target_features(m.tokenizer.encode("Goodbye now")[: len(ctx) - 1])
    lp, tok = drafter.propose([ctx, ctx], depth=5, k=3, hidden=[feats, other])
    assert lp.shape == tok.shape == (2, 5, 3)
    assert torch.isfinite(lp[:, :3]).all() and torch.isinf(lp[:, 3:]).all()  # block_size 4
    assert (lp[:, :3, :-1] >= lp[:, :3, 1:]).all()
    assert (lp[:, :3].exp().sum(-1) <= 1 + 1e-9).all()
    assert not torch.equal(lp[0], lp[1])  # same tokens, different features: different drafts
    again, tok_again = drafter.propose([ctx], depth=5, k=3, hidden=[feats])
    assert torch.equal(again[0], lp[0]) and torch.equal(tok_again[0], tok[0])
    with pytest.raises(ValueError, match="feature rows"):
        drafter.propose([ctx], depth=5, k=3, hidden=[feats[:-1]])


def test_bad_checkpoints_are_clear(tmp_path: Path) -> None:
    m = tiny()

    def load(directory: Path) -> None:
        make_drafter(f"dflash:{directory}", m)

    with pytest.raises(ValueError, match="no config.json"):
        load(tmp_path / "absent")
    bad = tmp_path / "badjson"
    bad.mkdir()
    (bad / "config.json").write_text("{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        load(bad)
    no_mask = write_checkpoint(tmp_path / "nomask")
    cfg = json.loads((no_mask / "config.json").read_text())
    del cfg["dflash_config"]["mask_token_id"]
    (no_mask / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="no mask_token_id"):
        load(no_mask)
    no_weights = tmp_path / "noweights"
    write_checkpoint(no_weights)
    (no_weights / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="no \\*.safetensors"):
        load(no_weights)
    deeper = write_checkpoint(tmp_path / "deeper")
    cfg = json.loads((deeper / "config.json").read_text())
    cfg["num_hidden_layers"] = 3
    (deeper / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="do not match config.json"):
        load(deeper)
    with pytest.raises(ValueError, match="hidden_size 128 != the target's 256"):
        load(write_checkpoint(tmp_path / "narrow", hidden_size=128))
    with pytest.raises(ValueError, match="target_layer_ids .* out of range"):
        load(
            write_checkpoint(
                tmp_path / "far", dflash_config={"target_layer_ids": [1, 9], "mask_token_id": 5}
            )
        )
    with pytest.raises(ValueError, match="sliding-window or causal"):
        load(write_checkpoint(tmp_path / "causal", is_causal=True))
    with pytest.raises(ValueError, match="vocab_size 1000"):
        load(write_checkpoint(tmp_path / "vocab", vocab_size=1000))
