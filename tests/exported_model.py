"""smollm2-135m as a Hugging Face directory (`make vllm-model` / `make sglang-model`), exported
once per clone into `.cache/smollm2-hf`, the path the shipped vLLM and SGLang specs name.

The vLLM and SGLang tests may ask for it from two xdist workers at once (tests/lanes.py): the
export holds a lock beside the directory, so the second asker waits for the first one's export
instead of finding a directory that was not there when it looked and is there when it writes.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

from ddtree_runtime.export import export_model

REPO = Path(__file__).resolve().parents[1]
#: Relative to the repository, as the shipped specs name it.
SMOLLM2_HF = Path(".cache") / "smollm2-hf"


def smollm2_hf() -> Path:
    """The exported directory (absolute), exported now if absent."""
    path = REPO / SMOLLM2_HF
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (path / "model.safetensors").exists():
            export_model("smollm2-135m", path)
    return path
