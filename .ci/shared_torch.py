"""Put the shared torch folder on the running venv's path (Makefile `use_shared_torch`).

    python3 .ci/shared_torch.py 'torch==2.13.0'                      # before installing it
    VENV/bin/python .ci/shared_torch.py 'torch==2.13.0' TORCH_SITE   # on VENV's path

The pin names one version (`torch==VERSION`): the folder is installed once for every venv, each
of which must then find torch installed, and nothing here can weigh a range (the standard
library has no version specifiers); any other pin stops set-up with one line, before anything
is installed. Given the folder, it checks that the folder holds torch at that version, its
package and its metadata, then writes a `.pth` line naming the folder into the venv's
site-packages. A folder whose stamp survived but whose torch did not (emptied, another version,
the metadata without the package) stops set-up with one line: read as absent, pip would resolve
the runtime's `torch` requirement to a multi-GB CUDA build instead.
"""

from __future__ import annotations

import re
import site
import sys
from importlib.metadata import distributions
from pathlib import Path

PTH = "zz-shared-torch.pth"
#: An exact pin: `torch==2.13.0`, `torch==2.13.0+cpu` (no wildcard, no second clause).
EXACT = re.compile(r"\s*torch\s*==\s*([0-9][0-9A-Za-z.+!_-]*)\s*")


def main(pin: str, folder: str | None = None) -> int:
    exact = EXACT.fullmatch(pin)
    if exact is None:
        return _stop(f"TORCH={pin}: the shared torch folder takes one version, torch==VERSION")
    if folder is None:
        return 0
    want = exact.group(1)
    found = [d.version for d in distributions(path=[folder]) if d.metadata["Name"] == "torch"]
    if [v if "+" in want else v.split("+", 1)[0] for v in found] != [want]:
        have = ", ".join(found) or "no torch"
        return _stop(f"{folder}: {have} where {pin} belongs; {_remedy(folder)}")
    package = Path(folder, "torch")
    if not (package / "__init__.py").is_file():
        return _stop(
            f"{package}: missing, though torch {found[0]}'s metadata is there; {_remedy(folder)}"
        )
    Path(site.getsitepackages()[0], PTH).write_text(folder + "\n")
    return 0


def _remedy(folder: str) -> str:
    return f"remove {Path(folder).parent} and run make again"


def _stop(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
