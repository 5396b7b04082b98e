"""The shipped specs of sweeps/, loaded on a machine that has no hub datasets (CI has no network):
a recipe read from the Hugging Face hub is pointed (`hf:`) at a small local copy in the hub's
layout, written here with the columns its template reads. Everything else of the spec (hosts,
runtime, grid, the reference) loads as shipped, through the real `datasets` loading code.

The rows are test rows (`Row 3: ...`), never the dataset's own text: they check the spec, the
loader and the templates, not the data.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from sweeper.spec import Spec, load_spec
from sweeper.spec.recipes import RECIPES

#: Rows in the columns each hub recipe's template reads.
_COLUMNS: dict[str, tuple[str, ...]] = {
    "gsm8k": ("question", "answer"),
    "math500": ("problem", "answer"),
    "mbpp": ("prompt", "code"),
    "alpaca": ("instruction", "input", "output"),
}


def local_hub_copy(root: Path, recipe: str, rows: int = 4) -> Path:
    """A directory in the hub's layout (README.md `configs:` + one parquet per split) holding
    the recipe's config and split, with test rows."""
    spec = RECIPES[recipe]
    config = spec.config or "default"
    split = spec.split or "test"
    directory = root / recipe
    (directory / config).mkdir(parents=True, exist_ok=True)
    card = {
        "configs": [
            {
                "config_name": config,
                "data_files": [{"split": split, "path": f"{config}/{split}-*.parquet"}],
            }
        ]
    }
    (directory / "README.md").write_text(f"---\n{yaml.safe_dump(card)}---\n# test rows\n")
    table = [
        {
            column: f"Row {i}: {column} text" if column != "input" or i % 2 else ""
            for column in _COLUMNS[recipe]
        }
        for i in range(rows)
    ]
    pq.write_table(pa.Table.from_pylist(table), directory / config / f"{split}-0.parquet")
    return directory


def load_shipped(path: Path) -> Spec:
    """`load_spec(path)`, its hub recipes read from local copies (see the module docstring)."""
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    datasets = (data.get("workload") or {}).get("datasets") or []
    hub = [d for d in datasets if RECIPES.get(d.get("recipe", "")) and RECIPES[d["recipe"]].hf]
    if not hub:
        return load_spec(path)
    root = Path(tempfile.mkdtemp(prefix="shipped-"))
    for dataset in hub:
        dataset["hf"] = str(local_hub_copy(root / "hub", dataset["recipe"]))
    copy = root / path.name
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(copy)
