"""The shipped specs of sweeps/ and bench/specs/, loaded on a machine that has no hub datasets
(CI has no network) and no planted runtime built: a recipe read from the Hugging Face hub is
pointed (`hf:`) at a small local copy in the hub's layout, written here with the columns its
template reads; a `runtime.package` not built here (the bench specs' planted runtimes, under the
git-ignored results/) is an unpatched copy of the runtime, which plans the same (the fault only
shows when it serves). Everything else of the spec (hosts, runtime, grid, the reference) loads as
shipped, through the real `datasets` loading code.

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
from tests.sweeper.planted import plant_fault

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


def shipped_here(path: Path, root: Path | None = None) -> Path:
    """The shipped spec at `path` as this machine can load it: `path` itself when it can, else a
    copy under `root` (default: a fresh temporary directory) with its hub recipes read from
    local copies and a package that is not built here replaced (see the module docstring)."""
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    datasets = (data.get("workload") or {}).get("datasets") or []
    hub = [d for d in datasets if RECIPES.get(d.get("recipe", "")) and RECIPES[d["recipe"]].hf]
    runtime = data.get("runtime") or {}
    package = runtime.get("package")
    if not hub and package is None:
        return path
    root = root if root is not None else Path(tempfile.mkdtemp(prefix="shipped-"))
    for dataset in hub:
        dataset["hf"] = str(local_hub_copy(root / "hub", dataset["recipe"]))
    if package is not None:
        built = (path.parent / package).resolve()
        here = (built / "ddtree_runtime" / "__main__.py").is_file()
        runtime["package"] = str(built if here else plant_fault(root / "package", None))
    copy = root / path.name
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    return copy


def load_shipped(path: Path) -> Spec:
    """`load_spec` of the shipped spec at `path` as this machine can load it (`shipped_here`)."""
    return load_spec(shipped_here(path))
