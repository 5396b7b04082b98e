"""Scored samples (`scores.jsonl`) and settled verdicts (`settled.jsonl`): the records of
`determinism.sampled: scored`, and how they are read back.

A `ScoreRecord` is one sampled output (a seeded sample, or a coupled server's measured request)
scored token by token by a server's own prefill: the server that drew it (`scorer: self`) or
another config (the AR server, by its config id). It names the point whose record it scores and
that point's attempt, so a score of an attempt that never completed never counts; a sample is
scored once per scorer (`score_key`: the first line that scored it wins, so a resumed run adds
nothing; one that failed is scored again). A `SettledRecord` carries the verdict columns of a
point whose samples were scored after its point line was written (by the AR server, after the
speculative configs): the point line stays as it was recorded, and readers see it with its
latest settled columns (`settled_points`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from sweeper.results.records import PointRecord, with_feature_columns

#: Who scored a sample: the server that drew it, or another config's server (its config id).
SELF = "self"


class PositionScore(BaseModel):
    """One sampled token as the scoring server's prefill saw it."""

    token: int
    #: Raw log-softmax of the logits (temperature 1, untruncated) of `token`.
    logprob: float
    #: 1-based rank of `token` by raw logprob (ties: the lower id first, where the engine says).
    rank: int | None = None
    #: Basis `exact` (the bundled runtime computes the processed distribution itself): the
    #: processed probability (0.0 where truncation removed it), the processed mass strictly
    #: above it, and, where p is 0, how far outside the truncation it fell (tempered mass).
    p: float | None = None
    above: float | None = None
    gap: float | None = None
    #: Basis `exact`, where p is 0: the raw logprob of the boundary it fell outside (the least
    #: likely token kept), which a near tie is judged by.
    boundary: float | None = None
    #: The engine's top k at this position, (id, raw logprob), best first: on basis `topk`
    #: (vLLM, SGLang) what the PIT is bounded by; on either basis what the test for temperature
    #: weighs the position by.
    top: list[tuple[int, float]] | None = None
    #: The log-sum-exp of the raw logits (a raw logit is its logprob plus this), where the
    #: scorer returns it: what a repetition penalty, which scales a logit by its sign, is
    #: rebuilt from (`sweeper.proof.scored.processors`); without it one cannot be.
    logsumexp: float | None = None


class _ScoredOutput(BaseModel):
    """Which output a score is of, and the sampling it was drawn with before its processors."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    host: str
    #: The point whose sample (or request) this scores, and that point's attempt.
    point_id: str
    attempt: str
    #: What was scored: a seeded sample (`samples.jsonl`) or a measured request.
    source: Literal["sample", "request"] = "sample"
    #: The sample's role (`test`, `ar`, `control`); a request's: `test` on a speculative
    #: point, `control` on an AR point.
    role: str
    prompt_id: str
    #: The sample's index (`samples.jsonl`), or the request's index in its point.
    index: int
    #: `self`, or the config id of the server that scored it.
    scorer: str
    basis: Literal["exact", "topk"]
    #: What the output was drawn with (the request config's columns, by name): the distribution
    #: it is scored against (`sweeper.proof.scored.processors.Sampling.of`); its processors follow.
    temperature: float
    top_p: float | None = None
    top_k: int | None = None


if TYPE_CHECKING:
    _ScoredUnder = _ScoredOutput
else:
    #: The request's logit processors, as the request config's columns.
    _ScoredUnder = with_feature_columns(_ScoredOutput, processors_only=True)


class ScoreRecord(_ScoredUnder):
    """One sampled output scored (`scores.jsonl`; the module docstring)."""

    #: The engine's processing order (`sweeper.proof.scored.catalog`): steps applied in turn, each
    #: to what the one before left, renormalised; "top_k+top_p" is one step (both cut the
    #: same distribution).
    order: list[str]
    #: The engine's logit processors before temperature, in the order applied ("a|b": in an
    #: order it leaves unspecified), and the tokens its repetition penalty counts
    #: ("prompt+output" or "output"; `sweeper.proof.scored.catalog`). Unstated: none can be rebuilt.
    logit_order: list[str] = Field(default_factory=list)
    repetition_scope: str | None = None
    #: The prompt's token ids the scorer scored the output after: what a repetition penalty
    #: counts beside the output's own tokens (None: not known to the scorer).
    prompt_token_ids: list[int] | None = None
    #: How many top logprobs the engine returned per position (None: none).
    k: int | None = None
    #: The scoring engine's near-tie margin in nats (`sweeper.proof.scored.catalog`); None: none
    #: stated, so no near ties.
    near_tie_margin: float | None = None
    positions: list[PositionScore] = Field(default_factory=list)
    #: Why scoring failed (recorded, never dropped); then `positions` is empty.
    error: str | None = None
    #: A coupled output token-identical to its AR twin's is not scored again: this is the AR
    #: twin point's own score of the same tokens (its id here; `scorer`: the AR config).
    twin_of: str | None = None


def score_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes a score unique: one output of one attempt, scored by one server."""
    keys = ("point_id", "attempt", "source", "role", "prompt_id", "index", "scorer")
    return tuple(row.get(k, "sample" if k == "source" else None) for k in keys)


def current_scores(
    rows: Iterable[Mapping[str, Any]], points: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The score rows of recorded points' completed attempts, each output and scorer once:
    the first line that scored it, else the first that failed to (a resumed run scores a
    failed one again; both lines stay on disk)."""
    keep = {(pid, p.get("attempt")) for pid, p in points.items()}
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        if (row.get("point_id"), row.get("attempt")) in keep:
            key = score_key(row)
            if key not in seen or (seen[key].get("error") and not row.get("error")):
                seen[key] = dict(row)
    return list(seen.values())


class SettledKey(BaseModel):
    """Which point's attempt a settled line is for, and when it was settled."""

    model_config = ConfigDict(extra="forbid")

    point_id: str
    attempt: str
    settled_at: str


#: The point columns a settled line may set: its verdict and the scored test's columns.
SETTLED_COLUMNS = (
    "determinism",
    "sampled_detail",
    "unproven_reason",
    *(name for name in PointRecord.model_fields if name.startswith("scored_")),
    "score_agreement",
    "score_agreement_n",
)

if TYPE_CHECKING:
    SettledRecord = SettledKey
else:
    #: A point's verdict columns, settled after its point line (`settled.jsonl`): by the
    #: scores its samples got from a server started after it. Only `SETTLED_COLUMNS`, each
    #: typed as the point record types it (a column not set is absent, never null): a settled
    #: line never sets a measurement, and a line holding another column, a value of another
    #: type or an unknown verdict is damaged (named, never applied). Written with only the
    #: columns set (`exclude_unset`).
    SettledRecord = create_model(
        "SettledRecord",
        __base__=SettledKey,
        __module__=__name__,
        **{
            name: (PointRecord.model_fields[name].annotation, Field(default=None))
            for name in SETTLED_COLUMNS
        },
    )


def settled_points(
    points: Mapping[str, Mapping[str, Any]], settled: Iterable[Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The points with the columns of their latest settled line (of their own attempt)."""
    out = {pid: dict(row) for pid, row in points.items()}
    for line in settled:
        row = out.get(str(line.get("point_id")))
        if row is not None and row.get("attempt") == line.get("attempt"):
            row.update({k: v for k, v in line.items() if k not in ("settled_at",)})
    return out
