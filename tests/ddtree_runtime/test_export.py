"""``ddtree_runtime export``: a Hugging Face directory with every tied tensor stored for real.

The trap it exists for: safetensors' ``save_model`` (how the runtime caches smollm2) keeps a tied
embedding once, as ``lm_head.weight``, with ``model.embed_tokens.weight`` only a metadata alias;
vLLM then never loads the embedding. The fast tests rebuild that trap with a tiny tied Llama; the
slow one exports the real smollm2-135m.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from ddtree_runtime.__main__ import main as cli_main
from ddtree_runtime.export import MARKER, WEIGHTS, ExportError, export_model, untied_state_dict
from ddtree_runtime.models import byte_tokenizer, load_model

EMBED, HEAD = "model.embed_tokens.weight", "lm_head.weight"


def stored_tensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors a safetensors file really holds (aliases excluded) and its metadata."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})  # noqa: SIM118


def greedy(model: Any, tokenizer: Any, prompt: str, n: int) -> list[int]:
    ids = torch.tensor([tokenizer.encode(prompt)])
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
    return [int(t) for t in out[0, ids.shape[1] :]]


@pytest.fixture(scope="module")
def tied_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny tied Llama saved the way the runtime caches smollm2 (save_model: alias only)."""
    from safetensors.torch import save_model
    from transformers import LlamaConfig, LlamaForCausalLM

    directory = tmp_path_factory.mktemp("tied-source")
    tokenizer = byte_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        initializer_range=0.08,
        tie_word_embeddings=True,
        eos_token_id=len(tokenizer) - 1,
    )
    torch.manual_seed(7)
    model = LlamaForCausalLM(config).eval()
    save_model(model, str(directory / WEIGHTS))
    config.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def test_the_source_really_has_the_trap(tied_source: Path) -> None:
    tensors, metadata = stored_tensors(tied_source / WEIGHTS)
    assert EMBED not in tensors and HEAD in tensors  # one real tensor ...
    assert metadata.get(EMBED) == HEAD  # ... and the embedding only as an alias


def test_export_stores_both_tied_tensors_and_keeps_greedy_tokens(
    tied_source: Path, tmp_path: Path
) -> None:
    out = export_model(str(tied_source), tmp_path / "hf")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", WEIGHTS, MARKER):
        assert (out / name).is_file(), name
    tensors, metadata = stored_tensors(out / WEIGHTS)
    assert EMBED in tensors and HEAD in tensors and EMBED not in metadata
    assert torch.equal(tensors[EMBED], tensors[HEAD]) and tensors[EMBED].abs().sum() > 0
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["tie_word_embeddings"]
    marker = json.loads((out / MARKER).read_text())
    assert marker["source"] == str(tied_source) and len(marker["source_weights_hash"]) == 64

    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = load_model(str(tied_source))
    exported = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    prompt = "hello, tied world"
    assert tokenizer.encode(prompt) == source.tokenizer.encode(prompt)
    want = greedy(source.model, source.tokenizer, prompt, 12)
    assert greedy(exported, tokenizer, prompt, 12) == want


def test_untied_state_dict_copies_shared_storage_only() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    state = model.state_dict()
    assert state[EMBED].data_ptr() == state[HEAD].data_ptr()  # tied in memory
    tensors = untied_state_dict(model)
    assert tensors.keys() == state.keys()
    assert tensors[EMBED].data_ptr() != tensors[HEAD].data_ptr()
    assert torch.equal(tensors[EMBED], tensors[HEAD])
    ptrs = [t.untyped_storage().data_ptr() for t in tensors.values()]
    assert len(set(ptrs)) == len(ptrs)  # safetensors' save_file accepts it


def test_cli_refuses_a_non_empty_out_unless_forced(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "hf"
    assert cli_main(["export", "--model", "tiny-random", "--out", str(out)]) == 0
    first = (out / WEIGHTS).stat().st_mtime_ns
    assert cli_main(["export", "--model", "tiny-random", "--out", str(out)]) == 2
    assert "exists and is not empty (pass --force" in capsys.readouterr().err
    assert (out / WEIGHTS).stat().st_mtime_ns == first  # nothing lost
    assert cli_main(["export", "--model", "tiny-random", "--out", str(out), "--force"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no temp or old dirs left
    assert (out / "config.json").stat().st_mode & 0o777 == 0o644


def test_bad_targets_fail_with_a_clear_message(tmp_path: Path, capsys: Any) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ExportError, match="is not a directory"):
        export_model("tiny-random", a_file)
    assert cli_main(["export", "--model", "nope", "--out", str(tmp_path / "o")]) == 2
    assert "unknown model 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_smollm2_export_stores_real_embeddings_and_matches_the_runtime(tmp_path: Path) -> None:
    out = export_model("smollm2-135m", tmp_path / "smollm2")
    tensors, metadata = stored_tensors(out / WEIGHTS)
    assert EMBED in tensors and HEAD in tensors and EMBED not in metadata
    assert torch.equal(tensors[EMBED], tensors[HEAD]) and tensors[EMBED].shape == (49152, 576)
    for name in ("config.json", "generation_config.json", "tokenizer.json", "chat_template.jinja"):
        assert (out / name).is_file(), name

    from transformers import AutoModelForCausalLM, AutoTokenizer

    runtime = load_model("smollm2-135m")
    exported = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    prompt = "The capital of France is"
    assert tokenizer.encode(prompt) == runtime.tokenizer.encode(prompt)
    # The model's context, not transformers' int(1e30) "no limit" (SGLang's /tokenize cannot
    # encode that number and answers 500).
    assert tokenizer.model_max_length == exported.config.max_position_embeddings == 8192
    want = greedy(runtime.model, runtime.tokenizer, prompt, 8)
    assert greedy(exported, tokenizer, prompt, 8) == want
