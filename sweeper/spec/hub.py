"""Reading an `hf:` dataset through the `datasets` library, and pinning what was read.

`datasets` (and `huggingface_hub`) are imported here only, and only when a spec names an `hf:`
dataset: `sweeper` imports without them (the `hub` extra installs them).

- A hub id (`openai/gsm8k`): `datasets.load_dataset(id, config, split=, revision=)`, which
  itself reads its cache when offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE are datasets' own).
  The hub's endpoint is first asked one HTTP request (through the environment's proxy), for
  at most `hub_access.PROBE_S` seconds: where no answer comes, the load runs in offline mode, so a
  machine without a network reads its cache at once instead of retrying for half a minute.
  Failing that, the huggingface_hub cache's snapshot of the repo (`snapshot_download(...,
  local_files_only=True)`) loaded as a directory; failing both, one line saying which dataset,
  why the hub was not asked (offline mode, or the host unreachable), which caches were read,
  and how to get it. The libraries' own logging (retry chatter) is silenced: that one line
  says it all.
- A local directory (relative to the spec): `load_from_disk` when it holds `dataset_dict.json`
  or `state.json` (`save_to_disk`), else `load_dataset(dir, config, split=)` (the hub's layout:
  data files, with an optional README.md `configs:`).

The revision read (`HubData.revision`, written into the resolved spec): the hub commit sha
(datasets' cache path `<cache>/<ns>___<name>/<config>/<version>/<sha>/...`, or the snapshot's
`.../snapshots/<sha>/`), a git checkout's HEAD sha (its work tree clean), a saved dataset's
`_fingerprint`, else `sha256:<hex>` of the directory's files' names and bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper.spec.datasets import HUB_ID, DatasetSpec
from sweeper.spec.hub_access import caches, hub_unreachable, offline, offline_mode

INSTALL = "pip install 'ddtree-sweeper[hub]' (or make setup)"
SHA = re.compile(r"^[0-9a-f]{40}$")


class HubProblem(ValueError):
    """An `hf:` dataset that cannot be read: the spec field to blame and one line saying why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass
class HubData:
    """The rows of the chosen split (each with its index in the split), what was read."""

    rows: list[tuple[int, dict[str, Any]]]
    columns: list[str]
    split: str
    revision: str
    #: `hf:ID[config/split]` or the directory: names the dataset in row problems.
    where: str
    #: The directory read, when local (hashed into the manifest's input files).
    local: Path | None
    #: The licence a local copy's README.md states (None: not stated or not local).
    licence: str | None = None


def local_dir(spec: DatasetSpec, base_dir: Path) -> Path | None:
    """The local directory an `hf:` names (None: a hub id)."""
    assert spec.hf is not None
    candidate = (base_dir / spec.hf).expanduser()
    if candidate.is_dir():
        return candidate.resolve()
    if HUB_ID.match(spec.hf) and not spec.hf.startswith("."):
        return None
    raise HubProblem("hf", f"no directory {str(candidate)!r} and not a hub dataset id")


def load_hub(spec: DatasetSpec, base_dir: Path, selection: Any = None) -> HubData:
    """The chosen split's rows; `selection(dataset) -> dataset` picks rows with datasets' own
    methods (the recipes' shuffle) before they are read. HubProblem for anything wrong."""
    try:
        import datasets
    except ImportError:
        raise HubProblem("hf", f"an 'hf' dataset needs the datasets package: {INSTALL}") from None
    import huggingface_hub.utils

    # Its own error lines ("Failed to read schema from ...") would precede the spec's one line,
    # which says the same: only a crash may speak.
    datasets.utils.logging.set_verbosity(datasets.utils.logging.CRITICAL)
    datasets.utils.logging.disable_progress_bar()
    huggingface_hub.utils.logging.set_verbosity_error()  # "Retrying in 8s [Retry 4/5]."
    directory = local_dir(spec, base_dir)
    if directory is not None:
        loaded, revision = _load_local(datasets, spec, directory)
        where, licence = str(directory), card_licence(directory)
    else:
        loaded, revision, licence = _load_hub_id(datasets, spec)
        where = f"hf:{spec.hf}"
    dataset, split = _choose_split(loaded, spec, where)
    n = len(dataset)
    dataset = dataset.add_column("__sweeper_row__", list(range(n)))
    if selection is not None:
        dataset = selection(dataset)
    columns = [c for c in dataset.column_names if c != "__sweeper_row__"]
    rows = []
    for record in dataset.to_list():
        index = record.pop("__sweeper_row__")
        rows.append((int(index), record))
    config = f"{spec.config}/" if spec.config else ""
    return HubData(rows, columns, split, revision, f"{where} [{config}{split}]", directory, licence)


def _choose_split(loaded: Any, spec: DatasetSpec, where: str) -> tuple[Any, str]:
    """The split asked for, else `test` when there is one, else the only split."""
    import datasets

    if isinstance(loaded, datasets.Dataset):
        return loaded, spec.split or str(loaded.split or "test")
    splits = list(loaded)
    if not splits:
        raise HubProblem("hf", f"{where} holds no splits")
    chosen = spec.split or ("test" if "test" in splits else splits[0] if len(splits) == 1 else None)
    if chosen not in splits:
        message = f"{where} has splits {', '.join(splits)}: choose one as 'split'"
        raise HubProblem("split", message)
    return loaded[chosen], str(chosen)


def _load_local(datasets: Any, spec: DatasetSpec, directory: Path) -> tuple[Any, str]:
    if spec.revision is not None:
        _at_revision(directory, spec.revision)
    saved = (directory / "dataset_dict.json").is_file() or (directory / "state.json").is_file()
    try:
        if saved:
            loaded = datasets.load_from_disk(str(directory))
        else:
            loaded = datasets.load_dataset(str(directory), spec.config, split=spec.split)
    except Exception as exc:  # datasets raises a dozen types for one unreadable directory
        field = "split" if "Unknown split" in str(exc) else "hf"
        raise HubProblem(field, f"cannot read {str(directory)!r}: {_reason(exc)}") from None
    if saved:
        revision = _fingerprint(loaded, spec, directory)
    else:
        revision = _snapshot_sha(directory) or _git_head(directory) or _files_hash(directory)
    return loaded, revision


def _load_hub_id(datasets: Any, spec: DatasetSpec) -> tuple[Any, str, str | None]:
    assert spec.hf is not None
    unreachable = None if offline() else hub_unreachable()
    with offline_mode(unreachable is not None):
        try:
            loaded = datasets.load_dataset(
                spec.hf, spec.config, split=spec.split, revision=spec.revision
            )
        except Exception as first:
            directory = _cached_snapshot(spec)
            if directory is None:
                raise HubProblem("hf", _not_found(spec, first, unreachable)) from None
            try:
                loaded = datasets.load_dataset(str(directory), spec.config, split=spec.split)
            except Exception as exc:
                raise HubProblem("hf", f"{_named(spec)}: {_reason(exc)}") from None
            return loaded, directory.name, card_licence(directory)
    return loaded, _cache_sha(loaded) or spec.revision or "unknown", None


def _cached_snapshot(spec: DatasetSpec) -> Path | None:
    """The huggingface_hub cache's snapshot of the repo at the revision, if it holds one."""
    assert spec.hf is not None
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(
            spec.hf, repo_type="dataset", revision=spec.revision, local_files_only=True
        )
    except Exception:  # not cached (LocalEntryNotFoundError), or no huggingface_hub at all
        return None
    return Path(path)


def _named(spec: DatasetSpec) -> str:
    parts = [f"hf:{spec.hf}"]
    if spec.config:
        parts.append(f"config {spec.config}")
    parts.append(f"split {spec.split or 'test (or the only one)'}")
    if spec.revision:
        parts.append(f"revision {spec.revision}")
    return ", ".join(parts)


def _not_found(spec: DatasetSpec, exc: Exception, unreachable: str | None) -> str:
    if unreachable is not None:
        mode = f"the hub cannot be reached ({unreachable}) and it is not in the cache"
    elif offline():
        mode = "offline mode is on (HF_HUB_OFFLINE) and it is not in the cache"
    else:
        mode = f"not readable ({_reason(exc)})"
    return (
        f"dataset {_named(spec)}: {mode} ({caches()}); get it by running once online, or "
        f"`hf download --repo-type dataset {spec.hf}`, or point 'hf' at a local copy"
    )


def _reason(exc: BaseException) -> str:
    """The error in one line, with what caused it ("An error occurred while generating the
    dataset" says nothing alone), in a user's words: a bare StopIteration is a data file with
    no rows, and the resolver datasets names (`functools.partial(<function ...>)`) is cut."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, StopIteration) or isinstance(cause, StopIteration):
        return "a data file holds no rows"
    text = " ".join(str(exc).split()) or type(exc).__name__
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text}: {' '.join(str(cause).split())}"
    text = _INTERNALS.sub("", text)
    return text if len(text) <= 300 else text[:297] + "..."


#: What datasets says of its own machinery: ": Couldn't resolve pattern ** with resolver
#: functools.partial(<function resolve_pattern at 0x...>, ...)".
_INTERNALS = re.compile(r":? ?Couldn't resolve pattern .*$|\s*<function [^>]*>")


def _cache_sha(loaded: Any) -> str | None:
    """The hub commit sha in datasets' cache path (`.../<ns>___<name>/<config>/<ver>/<sha>/`)."""
    parts_of = loaded.values() if hasattr(loaded, "values") else [loaded]
    for part in parts_of:
        for cache in getattr(part, "cache_files", []):
            for piece in reversed(Path(cache["filename"]).parts):
                if SHA.match(piece):
                    return piece
    return None


def _snapshot_sha(directory: Path) -> str | None:
    """A hub cache snapshot's commit: `.../snapshots/<sha>`."""
    if directory.parent.name == "snapshots" and SHA.match(directory.name):
        return directory.name
    return None


def _at_revision(directory: Path, revision: str) -> None:
    """HubProblem unless `directory` is a clean git checkout of `revision` (a local copy read
    at another revision than the spec asks would be pinned as what it is not)."""
    head = _git_head(directory)
    if head is None:
        what = "a git checkout with changes" if (directory / ".git").exists() else "no git checkout"
        raise HubProblem(
            "revision",
            f"{str(directory)!r} is {what}: 'revision' applies to a hub id or a clean git "
            "checkout (drop it: a local copy is pinned by the hash of its files)",
        )
    wanted = _git(directory, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if wanted != head:
        raise HubProblem(
            "revision",
            f"{str(directory)!r} is checked out at {head[:12]}, not at revision {revision!r}"
            + (f" ({wanted[:12]})" if wanted else " (not in its history)")
            + f": git -C {str(directory)!r} checkout {revision}",
        )


def _git(directory: Path, *args: str) -> str | None:
    """A git command's output in `directory` (None when it fails)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), *args],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def _git_head(directory: Path) -> str | None:
    """HEAD of a git checkout rooted at `directory` whose work tree is clean (else None)."""
    if not (directory / ".git").exists():
        return None
    head = _git(directory, "rev-parse", "HEAD")
    # --no-optional-locks: reading status must not rewrite .git/index.
    dirty = _git(directory, "--no-optional-locks", "status", "--porcelain")
    return head if head and SHA.match(head) and dirty == "" else None


def _fingerprint(loaded: Any, spec: DatasetSpec, directory: Path) -> str:
    """A saved dataset's `_fingerprint` as its state.json holds it (the chosen split's, for a
    DatasetDict): `load_from_disk` gives the loaded copy a fingerprint of its own."""
    import datasets

    state = directory / "state.json"
    if isinstance(loaded, datasets.DatasetDict):
        try:
            _, split = _choose_split(loaded, spec, "")
        except HubProblem:
            return _files_hash(directory)
        state = directory / split / "state.json"
    try:
        return str(json.loads(state.read_text())["_fingerprint"])
    except (OSError, ValueError, KeyError, TypeError):
        return _files_hash(directory)


def data_files(directory: Path) -> list[Path]:
    """A directory's files, `.git` left out (what is hashed and pinned as input files)."""
    return sorted(
        p
        for p in directory.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(directory).parts
    )


def _files_hash(directory: Path) -> str:
    digest = hashlib.sha256()
    for file in data_files(directory):
        digest.update(str(file.relative_to(directory)).encode())
        digest.update(file.read_bytes())
    return f"sha256:{digest.hexdigest()}"


def card_licence(directory: Path) -> str | None:
    """`license:` of a README.md's YAML front matter (a hub repo's dataset card)."""
    card = directory / "README.md"
    try:
        text = card.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("---"):
        return None
    front = text.split("\n---", 1)[0]
    found = re.search(r"^license:\s*(\S.*)$", front, re.MULTILINE)
    if found:
        return found.group(1).strip().strip("'\"")
    listed = re.search(r"^license:\s*\n\s*-\s*(\S.*)$", front, re.MULTILINE)
    return listed.group(1).strip() if listed else None
