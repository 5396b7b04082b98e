"""A DFlash block-diffusion draft model, written against the public z-lab/dflash checkpoint format.

Checkpoint: a local directory with a Qwen3-style ``config.json`` (hidden_size, num_hidden_layers,
heads, head_dim, intermediate_size, rms_norm_eps, rope settings) plus DFlash fields, either at the
top level or under ``dflash_config``: ``block_size``, ``target_layer_ids`` (0-based target layers
whose outputs are concatenated) and ``mask_token_id``; and ``*.safetensors`` weights named
``layers.{i}.self_attn.{q,k,v,o}_proj``, ``.q_norm``, ``.k_norm``, ``layers.{i}.mlp.*``,
``layers.{i}.{input,post_attention}_layernorm``, ``norm``, ``fc`` and ``hidden_norm``. The draft has
no embeddings or head of its own: it reuses the target's.

One forward drafts a block: the queries are the embeddings of [root, mask x (block - 1)] at the
positions after the context; each layer attends (non-causally) over the projected target features
of the context (``hidden_norm(fc(features))``, the same for every layer) followed by the block.

Status: implemented from the public reference's format and tested only with a tiny self-made
random checkpoint on CPU; never run on a real DFlash checkpoint or on a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")


def _field(config: dict, name: str, default: Any = None) -> Any:
    return config.get("dflash_config", {}).get(name, config.get(name, default))


class _Attention(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        bias = bool(cfg.attention_bias)
        h, d = cfg.hidden_size, self.head_dim
        self.q_proj = nn.Linear(h, self.heads * d, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * d, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * d, bias=bias)
        self.o_proj = nn.Linear(self.heads * d, h, bias=bias)
        self.q_norm = Qwen3RMSNorm(d, eps=cfg.rms_norm_eps)
        self.k_norm = Qwen3RMSNorm(d, eps=cfg.rms_norm_eps)

    def forward(
        self, x: torch.Tensor, ctx: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> torch.Tensor:
        from transformers.models.qwen3.modeling_qwen3 import rotate_half

        b, q_len, _ = x.shape
        d = self.head_dim
        both = torch.cat([ctx, x], dim=1)  # keys/values: context features, then the block
        q = self.q_norm(self.q_proj(x).view(b, q_len, -1, d)).transpose(1, 2)
        k = self.k_norm(self.k_proj(both).view(b, both.shape[1], -1, d)).transpose(1, 2)
        v = self.v_proj(both).view(b, both.shape[1], -1, d).transpose(1, 2)
        cos, sin = cos[:, None], sin[:, None]
        qc, qs = cos[..., -q_len:, :], sin[..., -q_len:, :]
        q = q * qc + rotate_half(q) * qs
        k = k * cos + rotate_half(k) * sin
        groups = self.heads // self.kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, scale=d**-0.5)
        return self.o_proj(out.transpose(1, 2).reshape(b, q_len, -1))


class _Layer(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP, Qwen3RMSNorm

        self.self_attn = _Attention(cfg)
        self.mlp = Qwen3MLP(cfg)
        self.input_layernorm = Qwen3RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = Qwen3RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)

    def forward(
        self, x: torch.Tensor, ctx: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), ctx, cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class DFlashModel(nn.Module):
    def __init__(self, config: dict) -> None:
        super().__init__()
        from transformers import Qwen3Config
        from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm, Qwen3RotaryEmbedding

        fields = {k: v for k, v in config.items() if k not in ("dflash_config", "auto_map")}
        cfg = Qwen3Config(**fields)
        if getattr(cfg, "head_dim", None) is None:
            cfg.head_dim = cfg.hidden_size // cfg.num_attention_heads
        self.cfg = cfg
        self.vocab_size = config.get("vocab_size")  # None: not stated, not checked
        self.target_layer_ids = [int(i) for i in _field(config, "target_layer_ids")]
        self.block_size = int(_field(config, "block_size"))
        self.mask_token_id = int(_field(config, "mask_token_id"))
        self.embedding_scale = float(_field(config, "input_embedding_scale", 1.0))
        self.output_multiplier = float(_field(config, "output_multiplier", 1.0))
        softcap = _field(config, "final_logit_softcapping")
        self.softcap = float(softcap) if softcap else 0.0
        h = cfg.hidden_size
        self.layers = nn.ModuleList([_Layer(cfg) for _ in range(cfg.num_hidden_layers)])
        self.norm = Qwen3RMSNorm(h, eps=cfg.rms_norm_eps)
        self.fc = nn.Linear(len(self.target_layer_ids) * h, h, bias=False)
        self.hidden_norm = Qwen3RMSNorm(h, eps=cfg.rms_norm_eps)
        self.rotary_emb = Qwen3RotaryEmbedding(cfg)

    def forward(self, features: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
        """Features [B, T, F] of context positions 0..T-1, block embeds [B, Q, H] -> [B, Q, H]."""
        ctx = self.hidden_norm(self.fc(features))
        total = features.shape[1] + block.shape[1]
        positions = torch.arange(total, device=block.device)[None, :].expand(block.shape[0], -1)
        cos, sin = self.rotary_emb(block, positions)
        x = block
        for layer in self.layers:
            x = layer(x, ctx, cos, sin)
        return self.norm(x)


def load_dflash(path: str) -> DFlashModel:
    """Build the draft from ``config.json``, load its safetensors; ValueError if invalid."""
    from safetensors.torch import load_file

    directory = Path(path)
    if not (directory / "config.json").is_file():
        raise ValueError(f"dflash: {directory} is not a checkpoint directory (no config.json)")
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"dflash: {directory}/config.json is not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise ValueError(f"dflash: {directory}/config.json is not a JSON object")
    for name in ("block_size", "target_layer_ids", "mask_token_id"):
        if _field(config, name) is None:
            raise ValueError(f"dflash: {directory}/config.json has no {name}")
    missing = [n for n in REQUIRED if n not in config]
    if missing:
        raise ValueError(f"dflash: {directory}/config.json lacks {', '.join(missing)}")
    if _field(config, "conv_kernel_size") is not None or _field(config, "selector_rank"):
        raise ValueError(
            "dflash: DFlash2 checkpoints (convolutions, candidate selector) are not supported"
        )
    if "sliding_attention" in (config.get("layer_types") or []) or config.get("is_causal"):
        raise ValueError("dflash: sliding-window or causal draft attention is not supported")
    if int(_field(config, "block_size")) < 2:
        raise ValueError("dflash: block_size must be at least 2")
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise ValueError(f"dflash: no *.safetensors weights in {directory}")
    model = DFlashModel(config)
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    state = {k.removeprefix("model."): v for k, v in state.items()}
    expected = {k for k in model.state_dict() if not k.startswith("rotary_emb.")}
    lacking = sorted(expected - state.keys())
    extra = sorted(set(state) - expected)
    if lacking or extra:
        raise ValueError(
            f"dflash: weights in {directory} do not match config.json: "
            f"{len(lacking)} missing (e.g. {lacking[:2]}), "
            f"{len(extra)} unexpected (e.g. {extra[:2]})"
        )
    try:
        model.load_state_dict(state, strict=False)
    except RuntimeError as e:
        first = str(e).strip().splitlines()[-1].strip()
        raise ValueError(f"dflash: weights in {directory} have wrong shapes: {first}") from None
    return model.eval()
