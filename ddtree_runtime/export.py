"""``python -m ddtree_runtime export --model NAME --out DIR``: a plain Hugging Face directory.

Other engines (vLLM, SGLang) load a target from a Hugging Face directory. The runtime's converted
smollm2 cache is not one they read correctly: its ``model.safetensors`` stores the tied embedding
once, as ``lm_head.weight``, with ``model.embed_tokens.weight`` only a safetensors metadata alias.
vLLM ties ``lm_head`` to ``embed_tokens`` and skips ``lm_head.weight`` on load, so it never sees
the embedding and emits token 0 forever. The export stores every state-dict entry as a tensor of
its own (tied ones copied), beside config.json, the generation config and the tokenizer files.

The directory is written atomically (a temp directory renamed into place) and carries
``ddtree_export.json`` naming the source model and its weights hash, so a result can say which
weights another engine served.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ddtree_runtime.models import DTYPES, LoadedModel, ModelNotFound, load_model

MARKER = "ddtree_export.json"
WEIGHTS = "model.safetensors"


class ExportError(Exception):
    """The export cannot be written (message says why)."""


def untied_state_dict(model: Any) -> dict[str, Any]:
    """Every state-dict entry as its own contiguous tensor: tied weights become equal copies.

    safetensors refuses tensors that share storage (save_model then keeps one name and an alias,
    the trap this module exists for), so a tensor whose storage was already taken is cloned.
    """
    tensors: dict[str, Any] = {}
    seen: set[int] = set()
    for name, tensor in model.state_dict().items():
        data = tensor.detach()
        ptr = data.untyped_storage().data_ptr()
        tensors[name] = data.clone().contiguous() if ptr in seen else data.contiguous()
        seen.add(ptr)
    return tensors


def _write(loaded: LoadedModel, directory: Path, source: str) -> None:
    from safetensors.torch import save_file

    save_file(untied_state_dict(loaded.model), str(directory / WEIGHTS), metadata={"format": "pt"})
    config = loaded.model.config
    if hasattr(config, "quantization_config"):  # GGUF-sourced weights are already dequantized
        del config.quantization_config
    if not getattr(config, "architectures", None):
        # GGUF-converted configs lack it; engines resolve the model class from it (vLLM guesses
        # "LlamaModel" without it), so name the class the weights were loaded into.
        config.architectures = [type(loaded.model).__name__]
    config.save_pretrained(directory)
    generation = getattr(loaded.model, "generation_config", None)
    if generation is not None:
        generation.save_pretrained(directory)
    context = getattr(config, "max_position_embeddings", None)
    if context and loaded.tokenizer.model_max_length > context:
        # GGUF-sourced tokenizers carry transformers' "no limit" (int(1e30)), which engines report
        # as is: SGLang's /tokenize answers it as max_model_len, and its JSON encoder fails on it
        # (HTTP 500). The model's own context is the tokenizer's real limit.
        loaded.tokenizer.model_max_length = context
    loaded.tokenizer.save_pretrained(directory)
    marker = {"source": source, "dtype": loaded.dtype, "source_weights_hash": loaded.weights_hash}
    (directory / MARKER).write_text(json.dumps(marker, indent=2) + "\n")


def export_model(name: str, out: Path, *, dtype: str = "float32", force: bool = False) -> Path:
    """Write model NAME (as load_model resolves it) to OUT as a Hugging Face directory."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ExportError(f"--out {out} exists and is not empty (pass --force to replace it)")
    loaded = load_model(name, dtype=dtype)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    old: Path | None = None
    try:
        _write(loaded, tmp, name)
        # mkdtemp makes 0700 and safetensors writes 0600; a server running as another user reads it.
        os.chmod(tmp, 0o755)
        for path in tmp.iterdir():
            os.chmod(path, 0o644)
        if out.exists():
            old = out.with_name(f".{out.name}-old-{os.getpid()}")
            os.rename(out, old)
        os.rename(tmp, out)
    finally:
        for leftover in (tmp, old):
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ddtree_runtime export",
        description="Write a model as a Hugging Face directory other engines (vLLM) load.",
    )
    parser.add_argument("--model", required=True, help="smollm2-135m, tiny-random or a directory")
    parser.add_argument("--out", required=True, type=Path, help="directory to write")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out")
    args = parser.parse_args(argv)
    try:
        out = export_model(args.model, args.out, dtype=args.dtype, force=args.force)
    except (ExportError, ModelNotFound) as exc:
        print(f"ddtree_runtime export: error: {exc}", file=sys.stderr)
        return 2
    print(f"exported {args.model} to {out}")
    return 0
