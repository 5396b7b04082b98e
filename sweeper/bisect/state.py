"""`bisect.json`: a bisect's question, every step it measured, and its answer.

Written atomically after every step (a kill loses at most the step in flight, whose run
directory `--resume` then continues), so a resumed bisect never measures a commit twice. Read
fail-closed: a file that is not a whole bisect state (empty, cut short, `null`, edited) stops
the command with one line naming it (`BisectStateError`), never read as absent or as new.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sweeper.bisect.search import Outcome
from sweeper.results.pinned import file_changes, resumable, spec_changes
from sweeper.results.store import atomic_write, utc_now
from sweeper.statefile import STATE, read_state

STATE_FILE = "bisect.json"
Metric = Literal["verdict", "output_tok_s"]


class BisectStateError(ValueError):
    """A bisect's state on disk cannot be read as one; the message names the file and what to
    do (the command exits 5)."""


class CommitRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sha: str
    subject: str
    author: str
    date: str
    #: Its parents' shas, first parent first (two or more: a merge).
    parents: list[str] = Field(default_factory=list)


class PointEvidence(BaseModel):
    """What one chosen point showed at a commit."""

    model_config = ConfigDict(extra="forbid")

    point_id: str
    status: str
    determinism: str | None = None
    #: verdict: the first violating request (prompt, verdict, divergence index, texts);
    #: output_tok_s: the measurement against the good end's, in words.
    detail: str = ""
    #: output_tok_s: the geometric mean over restarts and its 95% interval (log scale).
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = 0


class StepRecord(BaseModel):
    """One commit measured: where (its run directories), what it showed, and the outcome."""

    model_config = ConfigDict(extra="forbid")

    sha: str
    #: "good end", "bad end", "step N", "branch tip" or "branch step N".
    role: str
    outcome: Outcome
    reason: str
    runs: list[str]
    points: list[PointEvidence] = Field(default_factory=list)
    finished_at: str = Field(default_factory=utc_now)


class Branch(BaseModel):
    """A merged branch walked into (`--all-parents`): the merge the walk named and the
    branch's commits, oldest first, its tip last (the merge's first parent is the good side)."""

    model_config = ConfigDict(extra="forbid")

    merge: str
    commits: list[CommitRecord]


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: The first bad commit; with skips right before it, those come first (one is the culprit).
    culprits: list[str]
    summary: str
    evidence: list[PointEvidence]
    show_stat: str


class BisectState(BaseModel):
    """The question (fixed when the bisect starts; a resume must ask the same) and the steps."""

    model_config = ConfigDict(extra="forbid")

    spec_path: str
    #: The spec as resolved (defaults filled in, datasets expanded into prompts) and the sha256
    #: of every input file a run pins: part of the question, so an edited spec or prompt file
    #: is another bisect, never a resume of this one.
    spec: dict[str, Any]
    input_files: dict[str, str]
    repo: str
    prefix: str
    good: str
    bad: str
    commits: list[CommitRecord]
    metric: Metric
    threshold: float | None = None
    restarts: int = 1
    points: list[str]
    prompts: list[str] = Field(default_factory=list)
    #: Walk into a merged branch when the first-parent walk names its merge (`--all-parents`);
    #: how far to walk, not what is asked, so a resume may turn it on.
    all_parents: bool = False
    branches: list[Branch] = Field(default_factory=list)
    steps: list[StepRecord] = Field(default_factory=list)
    answer: Answer | None = None
    #: "running", "answered", or why it stopped without an answer (the ends are not as
    #: claimed, too noisy to decide, a step's run broke).
    status: str = "running"
    created_at: str = Field(default_factory=utc_now)

    def question(self) -> dict[str, Any]:
        """What a resume must match: the range, the metric, the points and prompts, the starts
        per commit, and the spec and input files they run (less what a resume may change)."""
        asked = self.model_dump(
            include={"good", "bad", "metric", "threshold", "points", "prompts", "restarts"}
        )
        return {**asked, "spec": resumable(self.spec), "input_files": self.input_files}

    def key(self) -> str:
        """A short hash of the question: the bisect directory's suffix, so another question of
        the same range is another directory."""
        text = json.dumps(self.question(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:6]

    def changes(self, other: BisectState) -> list[str]:
        """What `other` asks differently from this bisect, one phrase each (empty: the same)."""
        mine, theirs = self.question(), other.question()
        changed = [
            f"--{name} {mine[name]!r} -> {theirs[name]!r}"
            for name in ("good", "bad", "metric", "threshold", "points", "prompts", "restarts")
            if mine[name] != theirs[name]
        ]
        changed += spec_changes(self.spec, other.spec)
        changed += file_changes(self.input_files, other.input_files)
        return changed

    def step_of(self, sha: str) -> StepRecord | None:
        return next((s for s in self.steps if s.sha == sha), None)

    def save(self, directory: Path) -> None:
        text = self.model_dump_json(indent=2) + "\n"
        atomic_write(directory / STATE_FILE, lambda tmp: tmp.write_text(text))

    @classmethod
    def load(cls, directory: Path) -> BisectState:
        """The state in `directory`; a BisectStateError naming the file when it is not one."""
        path = directory / STATE_FILE
        todo = (
            f"restore it, or move {directory} aside to start the bisect afresh (its steps' "
            "runs stay there for report and compare)"
        )
        try:
            text = read_state(path, STATE)
        except OSError as exc:
            raise BisectStateError(f"{path} cannot be read ({exc.strerror}): {todo}") from None
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise BisectStateError(
                f"{path} is not a bisect state ({_kind(text, exc)}): {todo}"
            ) from None


def _kind(text: bytes, exc: ValidationError) -> str:
    """What is wrong with a state file, in a few words: empty, cut short, not an object, or
    the first field that does not hold."""
    if not text.strip():
        return "empty"
    try:
        data = json.loads(text)
    except ValueError:
        return "cut short or not JSON"
    if not isinstance(data, dict):
        return f"it holds {json.dumps(data)[:40]}, not an object"
    first = exc.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
