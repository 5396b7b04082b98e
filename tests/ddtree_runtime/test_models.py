"""Model loading: deterministic tiny-random, clear errors, the real smollm2 cache."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ddtree_runtime.models import ModelNotFound, load_model


def test_tiny_random_is_deterministic_with_a_byte_tokenizer() -> None:
    a, b = load_model("tiny-random"), load_model("tiny-random")
    assert a.weights_hash == b.weights_hash and re.fullmatch(r"[0-9a-f]{64}", a.weights_hash)
    assert a.eos_token_ids == [256] and a.dtype == "float32" and a.device == "cpu"
    ids = a.tokenizer.encode("héllo, wörld")
    assert a.tokenizer.decode(ids) == "héllo, wörld" and max(ids) < 256


def test_unknown_or_incomplete_models_raise_model_not_found(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound, match="unknown model 'nope'"):
        load_model("nope")
    with pytest.raises(ModelNotFound, match="no config.json"):
        load_model(str(tmp_path))
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    with pytest.raises(ModelNotFound, match="no \\*.safetensors weights"):
        load_model(str(tmp_path))
    with pytest.raises(ValueError, match="unknown dtype"):
        load_model("tiny-random", dtype="int3")


@pytest.mark.slow
def test_smollm2_loads_from_the_converted_cache() -> None:
    m = load_model("smollm2-135m")
    assert re.fullmatch(r"[0-9a-f]{64}", m.weights_hash) and m.chat_template
    assert m.model.config.vocab_size == 49152 and m.eos_token_ids
    ids = m.tokenizer.encode("The capital of France is")
    assert m.tokenizer.decode(ids) == "The capital of France is"
