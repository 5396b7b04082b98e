"""`bisect.json`: a bisect's question, every step it measured, and its answer.

Written atomically after every step (a kill loses at most the step in flight, whose run
directory `--resume` then continues), so a resumed bisect never measures a commit twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sweeper.results.store import atomic_write, utc_now

STATE_FILE = "bisect.json"
Metric = Literal["verdict", "output_tok_s"]
StepOutcome = Literal["good", "bad", "skip"]


class CommitRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sha: str
    subject: str
    author: str
    date: str


class PointEvidence(BaseModel):
    """What one chosen point showed at a commit."""

    model_config = ConfigDict(extra="forbid")

    point_id: str
    status: str
    determinism: str | None = None
    #: verdict: the first violating request (prompt, verdict, divergence index, texts).
    detail: str = ""
    #: output_tok_s: the mean over restarts and its 95% interval.
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = 0


class StepRecord(BaseModel):
    """One commit measured: where (its run directories), what it showed, and the outcome."""

    model_config = ConfigDict(extra="forbid")

    sha: str
    #: "good end", "bad end" or "step N".
    role: str
    outcome: StepOutcome
    reason: str
    runs: list[str]
    points: list[PointEvidence] = Field(default_factory=list)
    finished_at: str = Field(default_factory=utc_now)


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
    steps: list[StepRecord] = Field(default_factory=list)
    answer: Answer | None = None
    #: "running", "answered", or why it stopped without an answer (the ends do not differ...).
    status: str = "running"
    created_at: str = Field(default_factory=utc_now)

    def question(self) -> dict[str, object]:
        """What a resume must match: the range, the metric and the points."""
        return self.model_dump(include={"good", "bad", "metric", "threshold", "points", "prompts"})

    def step_of(self, sha: str) -> StepRecord | None:
        return next((s for s in self.steps if s.sha == sha), None)

    def save(self, directory: Path) -> None:
        text = self.model_dump_json(indent=2) + "\n"
        atomic_write(directory / STATE_FILE, lambda tmp: tmp.write_text(text))

    @classmethod
    def load(cls, directory: Path) -> BisectState:
        return cls.model_validate_json((directory / STATE_FILE).read_text())
