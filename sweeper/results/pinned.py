"""What a run pins: every input that decides its outputs, so a resume is the same experiment.

The manifest holds the spec as resolved (`spec`: every default filled in, and every dataset's
prompts expanded into `workload.prompts`, so an edited dataset file changes it), the sha256 of
every input file's bytes (`input_files`: a change the prompts do not show is still named) and
the runtime's source hash. A resume compares the plan it would run against both: any difference
outside `RESUMABLE_CHANGES` is a different experiment, refused with what changed
(`sweeper run --resume --force-new-inputs` starts a new run linked to the old one instead).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sweeper.results.manifest import Manifest
from sweeper.statefile import INPUT, read_state

#: Spec fields a resume may change: how long and how patiently, never what is measured
#: (`search.budget` is `search.stop` in a run saved before the rename).
RESUMABLE_CHANGES = ("search.stop", "search.budget", "runtime.ready_timeout_s")
#: Most differences named in one refusal.
SHOWN = 5


def file_hashes(paths: list[Path]) -> dict[str, str]:
    """sha256 of each file's bytes by path (a directory: of its files' names and bytes, in
    order; an unreadable path: "unreadable")."""
    out = {}
    for path in paths:
        digest = hashlib.sha256()
        try:
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for file in files:
                digest.update(str(file.relative_to(path) if path.is_dir() else "").encode())
                digest.update(read_state(file, INPUT))
        except OSError:
            out[str(path)] = "unreadable"
            continue
        out[str(path)] = digest.hexdigest()
    return out


def changed_inputs(
    manifest: Manifest,
    spec: dict[str, Any],
    source_hash: str | None,
    files: dict[str, str] | None = None,
) -> list[str]:
    """What differs between the run's pinned inputs and these (empty: the same experiment).
    `source_hash`: the bundled runtime's source the plan would run (None where the engine
    does not run it); `files`: `file_hashes` of the input files now."""
    changed = spec_changes(manifest.spec, spec)
    if files is not None:
        changed += file_changes(manifest.input_files, files)
    pinned = manifest.runtime_source_hash
    if source_hash is not None and pinned and pinned != source_hash:
        changed.append(f"the runtime's source (hash {pinned[:12]} -> {source_hash[:12]})")
    return changed


def spec_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Where a resolved spec differs from the one pinned, outside `RESUMABLE_CHANGES`:
    `spec PATH` (dotted) for at most `SHOWN` of them, then how many more."""
    paths = [
        path
        for path in _differences(old, new, "")
        if not any(path == key or path.startswith(f"{key}.") for key in RESUMABLE_CHANGES)
    ]
    changed = [f"spec {path}" for path in paths[:SHOWN]]
    if len(paths) > SHOWN:
        changed.append(f"{len(paths) - SHOWN} more spec field(s)")
    return changed


def file_changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """The pinned input files (`old`, path -> sha256) whose bytes differ now or that are gone:
    `the file PATH`. A file only `new` names comes with a spec change, which names it."""
    return [f"the file {path}" for path, digest in old.items() if new.get(path) != digest]


def resumable(spec: dict[str, Any]) -> dict[str, Any]:
    """A resolved spec without the fields a resume may change (`RESUMABLE_CHANGES`)."""
    out = json.loads(json.dumps(spec))
    for key in RESUMABLE_CHANGES:
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return out


def _differences(old: Any, new: Any, path: str) -> Iterator[str]:
    """Dotted paths where `new` differs from `old`. A key the old spec lacks is a field a newer
    sweeper added (its default then decides nothing the old run did not)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            where = f"{path}.{key}" if path else str(key)
            if key not in new:
                yield where
            else:
                yield from _differences(old[key], new[key], where)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from _differences(a, b, f"{path}[{index}]")
    elif old != new:
        yield path
