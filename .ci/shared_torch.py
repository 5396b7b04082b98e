"""Put the shared torch folder on the running venv's path (Makefile `use_shared_torch`).

    VENV/bin/python .ci/shared_torch.py TORCH_SITE 'torch==2.13.0'

Writes a `.pth` line naming TORCH_SITE into the venv's site-packages, after checking that the
folder holds torch at the pinned version. A folder whose stamp survived but whose torch did not
(emptied, another version) stops set-up with one line: read as absent, pip would resolve the
runtime's `torch` requirement to a multi-GB CUDA build instead.
"""

from __future__ import annotations

import site
import sys
from importlib.metadata import distributions
from pathlib import Path

PTH = "zz-shared-torch.pth"


def main(folder: str, pin: str) -> int:
    want = pin.split("==", 1)[1]
    found = [d.version for d in distributions(path=[folder]) if d.metadata["Name"] == "torch"]
    if [v.split("+", 1)[0] for v in found] != [want]:
        have = ", ".join(found) or "no torch"
        print(
            f"error: {folder}: {have} where {pin} belongs; remove {Path(folder).parent} "
            "and run make again",
            file=sys.stderr,
        )
        return 2
    Path(site.getsitepackages()[0], PTH).write_text(folder + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
