"""Built-in reference tables (`reference: NAME` in a spec): published figures, one YAML file each,
in the shape of `sweeper.spec.reference.ReferenceTable`, read and validated like a user's file.

- `ddtree-paper-qwen3-4b`, `ddtree-paper-qwen3-8b`, `ddtree-paper-qwen3-coder-30b-a3b`: the DDTree
  paper's table of speedup and tau (arXiv 2604.12989; liranringel/ddtree, src/data/results.tex),
  DFlash (`chain`) and DFlash + DDTree (`tree`), temperatures 0 and 1, ten datasets. Quoted, not
  measured here.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent

#: Built-in name -> its file.
REFERENCE_SETS: dict[str, Path] = {path.stem: path for path in sorted(_HERE.glob("*.yaml"))}
