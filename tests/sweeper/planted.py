"""A copy of the runtime with a planted fault, to deploy as a run's `runtime.package`.

The recipe of `ddtree_runtime/algo/mask.py`'s docstring, on a copy: the one line that reads
exactly `_FAULTS: set[str] = set()` becomes `_FAULTS: set[str] = {"<fault>"}`. Used by the tests
and, from the command line, to build the must-show runs' runtimes:
`python -m tests.sweeper.planted DEST pad_visible` (DEST then holds `ddtree_runtime/`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from sweeper.services.bundle import runtime_package_dir

FAULT_LINE = "_FAULTS: set[str] = " + "set()"  # split, so this file never holds the line itself
FAULTS = ("pad_visible", "stale_positions")


def plant_fault(dest: Path, fault: str | None) -> Path:
    """Copy the installed runtime's source into `dest/ddtree_runtime`, with `fault` planted
    (None: an unpatched copy); returns `dest`, the directory to name as `runtime.package`."""
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r} (known: {', '.join(FAULTS)})")
    installed = runtime_package_dir()
    copy = dest / "ddtree_runtime"
    for source in sorted(installed.rglob("*")):
        if source.is_file() and "__pycache__" not in source.parts:
            target = copy / source.relative_to(installed)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    if fault is not None:
        mask = copy / "algo" / "mask.py"
        lines = mask.read_text().splitlines(keepends=True)
        hits = [i for i, line in enumerate(lines) if line.rstrip("\n") == FAULT_LINE]
        if len(hits) != 1:
            raise RuntimeError(f"{mask}: expected the fault switch line once, found {len(hits)}")
        lines[hits[0]] = f'_FAULTS: set[str] = {{"{fault}"}}\n'
        mask.write_text("".join(lines))
    return dest


if __name__ == "__main__":
    print(plant_fault(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None))
