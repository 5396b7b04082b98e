"""A copy of the runtime with a planted fault, to deploy as a run's `runtime.package`.

The recipe of `ddtree_runtime/algo/mask.py`'s docstring, on a copy: the one line that reads
exactly `_FAULTS: set[str] = set()` becomes `_FAULTS: set[str] = {"<fault>"}`. Used by the tests
and, from the command line, to build the must-show runs' runtimes:
`python -m tests.sweeper.planted DEST pad_visible` (DEST then holds `ddtree_runtime/`).

`rounded_logits` is no fault but numerics: on this CPU the runtime's verify equals AR bit for
bit, so a correct run has no near-ties to show; this copy rounds the verify logits of a
speculative engine (query length 1 + budget > 1; AR stays exact) to bfloat16, every row of every
round alike, so outputs stay batch-invariant and deterministic. That flips the argmax only where
the top-2 margin is below the rounding: at most 0.25 for logits under 64 (two half-ulps), so a
run of it takes `near_tie_margin: 0.5`. (Rounding to float16, at most 0.03, and only verifies
wider than one token, flipped nothing in a 160-request sweep of sweeps/local.yaml's prompts.)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from sweeper.services.runtime_package import runtime_package_dir

FAULT_LINE = "_FAULTS: set[str] = " + "set()"  # split, so this file never holds the line itself
FAULTS = (
    "pad_visible",
    "stale_positions",
    "hot_drafts",
    "cold_drafts",
    "untruncated_drafts",
    "blind_drafts",
    "penalty_committed_only",
    "penalty_whole_tree",
    "penalty_whole_batch",
    "penalties_drafts_ignored",
    "min_p_drafts_ignored",
    "logit_bias_drafts_ignored",
    "grammar_drafts_unmasked",
    "stop_round_end",
)
#: `unverified_b<N>`: drafts accepted unverified at budget N only (fast and wrong there).
UNVERIFIED = re.compile(r"^unverified_b[0-9]+$")
NUMERICS = "rounded_logits"
_VERIFY_RETURN = "        return self._upcast(out.logits)\n"
_ROUNDED = "        return self._upcast(out.logits.bfloat16() if self.q_len > 1 else out.logits)\n"


def plant_fault(dest: Path, fault: str | None) -> Path:
    """Copy the installed runtime's source into `dest/ddtree_runtime`, with `fault` planted
    (None: an unpatched copy); returns `dest`, the directory to name as `runtime.package`."""
    known = (*FAULTS, NUMERICS, "unverified_b<N>")
    if fault is not None and fault not in (*FAULTS, NUMERICS) and not UNVERIFIED.match(fault):
        raise ValueError(f"unknown fault {fault!r} (known: {', '.join(known)})")
    installed = runtime_package_dir()
    copy = dest / "ddtree_runtime"
    for source in sorted(installed.rglob("*")):
        if source.is_file() and "__pycache__" not in source.parts:
            target = copy / source.relative_to(installed)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    if fault == NUMERICS:
        _replace_line(copy / "forward.py", _VERIFY_RETURN, _ROUNDED)
    elif fault is not None:
        mask = copy / "algo" / "mask.py"
        lines = mask.read_text().splitlines(keepends=True)
        hits = [i for i, line in enumerate(lines) if line.rstrip("\n") == FAULT_LINE]
        if len(hits) != 1:
            raise RuntimeError(f"{mask}: expected the fault switch line once, found {len(hits)}")
        lines[hits[0]] = f'_FAULTS: set[str] = {{"{fault}"}}\n'
        mask.write_text("".join(lines))
    return dest


def _replace_line(path: Path, old: str, new: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line == old]
    if len(hits) != 1:
        raise RuntimeError(f"{path}: expected {old.strip()!r} once, found {len(hits)}")
    lines[hits[0]] = new
    path.write_text("".join(lines))


if __name__ == "__main__":
    print(plant_fault(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None))
