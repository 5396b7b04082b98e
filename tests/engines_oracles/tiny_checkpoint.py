"""Tiny local checkpoints (config + tokenizer, no weights) for SGLang's resolver and HTTP routes.

SGLang reads the target's and the draft's `config.json` while it resolves server arguments, and
its chat route renders the chat template with the target's tokenizer. Nothing here has weights:
the oracles never run a model. The tokenizer is a word-level one over VOCAB, so a token id is an
index into VOCAB and a test can write expected text and ids by hand.

Runs under the SGLang Python (needs `tokenizers`); shared by the oracle scripts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Word-level vocabulary: token id i is VOCAB[i]. Words are space-separated when decoded.
VOCAB = [
    "<unk>",
    "<|im_start|>",
    "<|im_end|>",
    "user",
    "assistant",
    "system",
    "the",
    "tide",
    "comes",
    "in",
    "goes",
    "out",
    "sea",
    "poem",
    "hello",
    "world",
]
EOS = "<|im_end|>"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
    "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)

_TARGET_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "vocab_size": len(VOCAB),
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "eos_token_id": VOCAB.index(EOS),
}
# A DFlash drafter's config as z-lab publishes them: a small Qwen3 stack with `block_size` and
# `dflash_config` (SGLang's parse_dflash_draft_config reads both).
_DRAFT_CONFIG: dict[str, Any] = {
    **_TARGET_CONFIG,
    "architectures": ["DFlashDraftModel"],
    "num_hidden_layers": 1,
    "block_size": 16,
    "dflash_config": {"mask_token_id": len(VOCAB) - 1, "target_layer_ids": [0, 1]},
}


def write_checkpoint(root: Path, config: dict[str, Any]) -> Path:
    """Write config.json + a word-level tokenizer with a chat template into `root`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config, indent=1))
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tokenizer.save(str(root / "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS,
        "unk_token": "<unk>",
        "chat_template": CHAT_TEMPLATE,
        # As real checkpoints say; without it transformers reports int(1e30), which SGLang's
        # /tokenize returns as max_model_len and its JSON encoder cannot write (HTTP 500).
        "model_max_length": _TARGET_CONFIG["max_position_embeddings"],
    }
    (root / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=1))
    return root


def write_target_and_draft(root: Path, *, draft_block_size: int | None = 16) -> tuple[Path, Path]:
    """A target and a DFlash draft checkpoint under `root`; the draft's block_size as given."""
    draft_config = dict(_DRAFT_CONFIG)
    if draft_block_size is None:
        draft_config.pop("block_size")
    else:
        draft_config["block_size"] = draft_block_size
    target = write_checkpoint(root / "target", _TARGET_CONFIG)
    draft = write_checkpoint(root / "draft", draft_config)
    return target, draft
