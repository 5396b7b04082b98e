"""Is a speculative config exact? Pure verdicts from request records (this is why the tool exists).

At temperature 0 DDTree must reproduce autoregressive decoding token for token. Per prompt:
the repeats must agree (else `nondeterministic`); each output is compared with the AR baseline's
output for the same prompt and request config, by token ids. At the first divergence the verdict
says whether it is numerics or a bug:

- `exact`: identical token ids;
- `near-tie`: they diverge where the baseline's top-1 minus top-2 logprob is below the near-tie
  margin in nats (two almost equally likely tokens; a different kernel order may flip them):
  the policy's `near_tie_margin` where it sets one, else the engine's calibrated margin as the
  request's record states it (`greedy_margin`), else 0; every verdict states it and whence;
- `garbled`: the output's garble score (`garble.py`) exceeds the baseline's by more than
  `garble_margin` and is at least `garble_min_score`;
- `diverged`: any other difference;
- `nondeterministic`: repeats of the same request disagree;
- `n/a`: nothing to compare (the baseline itself, a failed request, no baseline, unseeded
  sampling).

At temperature > 0 the point's sampled check (`determinism.sampled`, resolved per server by what
it advertises) decides:

- `coupled` (a server whose uniform is a function of seed and position: the bundled runtime):
  the output is compared with the AR baseline's at the same seed, token for token, as at
  temperature 0 (each measured request draws its own seed, its AR twin the same: requests
  that share a seed, an older run's, are repeats that must agree). A divergence is a sampled
  `near-tie` when the baseline's sample margin there (how far its uniform lay from the edge of
  the chosen token's CDF interval, in probability mass: `sample_margins`) is below the policy's
  `sampled_near_tie_margin`: a CDF moved that little by numerics changes the sample; unless
  the output's own sample margin there is below minus that margin (a token its own draw did not
  select, as relaxed acceptance emits): then `diverged`;
- `distribution` (rejection sampling: SGLang, vLLM): every request carries its point's
  two-sample test verdict (`sweeper.proof.distribution`, judged from the point's samples by
  the caller): `distribution-ok`, `shifted`, or `unproven` with why;
- `repeats` (asked for by name): only the repeats (all at the workload's seed) are compared.
  They prove determinism only:
  disagreeing repeats are `nondeterministic` (a violation), identical ones `unproven` with why,
  never `exact`: a server sampling the wrong distribution repeats itself just as well.

A point's status is its worst request verdict in `sweeper.proof.verdicts`' one order, except
that a speculative point none of whose requests was compared with anything is `unproven`: no
verdict without a proof.
Records are mappings (or a DataFrame) with the request columns of docs/results.md: prompt_id,
repeat, token_ids, text, top2_margins, sample_margins, error, engine, near_tie_margin.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sweeper.proof.garble import garble_score
from sweeper.proof.verdicts import CLEAN_VERDICTS, VIOLATIONS, Verdict, worst
from sweeper.results.rows import choice_of, is_failed, is_missing, rows_of
from sweeper.spec import DeterminismSpec
from sweeper.spec.model import SampledCheck


@dataclass(frozen=True)
class SampledVerdict:
    """A point's two-sample test outcome, given to every one of its requests."""

    verdict: Verdict
    detail: str


@dataclass(frozen=True)
class RequestVerdict:
    """The verdict on one request and, when it differs, where and how."""

    prompt_id: str
    repeat: int
    verdict: Verdict
    #: Which choice of its request (`n` > 1; 0 for n = 1).
    choice: int = 0
    #: Token index of the first difference (from the baseline, or between repeats), else None.
    divergence_index: int | None = None
    #: What the output was compared with: "baseline", "repeat <r>" (or
    #: "repeat <r> choice <c>") or "".
    compared_with: str = ""
    #: The baseline's margin at the divergence, when known: its top-1 minus top-2 logprob
    #: (greedy), or its sample margin in probability mass (coupled sampling).
    margin: float | None = None
    #: Character offset of the first differing character of the two texts.
    char_offset: int | None = None
    excerpt: str | None = None
    reference_excerpt: str | None = None
    garble: float | None = None
    reference_garble: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class PointVerdict:
    """A point's status and the verdict on each of its requests."""

    status: Verdict
    requests: tuple[RequestVerdict, ...]

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(r.verdict for r in self.requests))


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first differing token (the shorter length if one is a prefix); None if equal."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def judge_point(
    records: Any,
    baseline_records: Any = None,
    *,
    temperature: float,
    seed: int | None = None,
    policy: DeterminismSpec | None = None,
    is_baseline: bool = False,
    sampled_check: SampledCheck = "repeats",
    sampled_verdict: SampledVerdict | None = None,
) -> PointVerdict:
    """Verdicts for one point's requests against its AR baseline point's requests;
    `sampled_check` as the module docstring says. `sampled_verdict`: the point-level verdict
    every sampled request carries: its distribution test's, or why no check could be made
    (a server that does not advertise the coupling the plan expected)."""
    policy = policy or DeterminismSpec()
    sampled = temperature > 0
    groups = _outputs(rows_of(records), sampled)
    references = {
        key: rows[0] for key, rows in _outputs(rows_of(baseline_records), sampled).items() if rows
    }
    how = _How(sampled, sampled_check, seed, policy, sampled_verdict)
    verdicts: list[RequestVerdict] = []
    for key, rows in groups.items():
        split = None if how.by_point_verdict else _repeat_disagreement(rows)
        for row in rows:
            reference = None if is_baseline else references.get(key)
            verdicts.append(_judge_request(row, split, reference, how))
    verdicts.sort(key=lambda v: (v.prompt_id, v.repeat, v.choice))
    if any(_approximate(r) for r in [*rows_of(records), *references.values()]):
        verdicts = [
            replace(v, detail=f"on approximate token ids (re-tokenized text): {v.detail}")
            for v in verdicts
        ]
    status = worst(v.verdict for v in verdicts)
    judged = CLEAN_VERDICTS | VIOLATIONS
    if not is_baseline and verdicts and not any(v.verdict in judged for v in verdicts):
        status = "unproven"  # no verdict without a proof: nothing was compared with anything
    return PointVerdict(status, tuple(verdicts))


@dataclass(frozen=True)
class _How:
    """How a point's requests are judged (see the module docstring)."""

    sampled: bool
    check: SampledCheck
    seed: int | None
    policy: DeterminismSpec
    point_verdict: SampledVerdict | None

    @property
    def by_point_verdict(self) -> bool:
        """Every request carries the point's verdict (see `judge_point`): a point judged from
        its samples' distribution or scores, never by its repeats."""
        return self.sampled and (
            self.check in ("distribution", "scored") or self.point_verdict is not None
        )

    @property
    def token_for_token(self) -> bool:
        """Compared with the baseline's ids: greedy, or sampling coupled to the same seed."""
        return not self.sampled or self.check == "coupled"


def _approximate(row: Mapping[str, Any]) -> bool:
    """The row's ids are a re-tokenization of its text, not the ids the engine generated."""
    return row.get("token_ids_source") == "approximate"


def _judge_request(
    row: Mapping[str, Any],
    split: tuple[int, Mapping[str, Any], Mapping[str, Any]] | None,
    reference: Mapping[str, Any] | None,
    how: _How,
) -> RequestVerdict:
    prompt_id, repeat = str(row["prompt_id"]), int(row["repeat"])
    base: dict[str, Any] = {"prompt_id": prompt_id, "repeat": repeat, "choice": choice_of(row)}
    policy = how.policy
    if is_failed(row):
        return RequestVerdict(**base, verdict="n/a", detail="request failed")
    if _ids(row) is None:
        return RequestVerdict(**base, verdict="n/a", detail="no token ids recorded")
    if how.by_point_verdict:
        if how.point_verdict is None:
            return RequestVerdict(**base, verdict="n/a", detail="no samples were judged")
        judged = how.point_verdict
        return RequestVerdict(
            **base, verdict=judged.verdict, compared_with="distribution", detail=judged.detail
        )
    if how.sampled and how.seed is None:
        return RequestVerdict(**base, verdict="n/a", detail="unseeded sampling: nothing to compare")
    if split is not None:
        split_index, first, other = split
        counterpart = first if row is other else other
        if how.token_for_token and reference is not None and _ids(reference) == _ids(row):
            # The repeat that gave the baseline's output is not where the fault acted: the
            # point stays nondeterministic through the other repeats, and a diagnosis counts
            # only the outputs that were wrong (a correct repeat run alone, unpadded, was once
            # put outside a padding fault's rule).
            return RequestVerdict(
                **base,
                verdict="exact",
                compared_with="baseline",
                detail=f"identical to baseline; {_which(counterpart)} disagrees at "
                f"token {split_index}",
            )
        return _differs(
            base,
            "nondeterministic",
            row,
            counterpart,
            split_index,
            compared_with=_which(counterpart),
            detail=f"repeats disagree at token {split_index}",
        )
    if not how.token_for_token:
        detail = (
            f"repeats identical at seed {how.seed} (deterministic); repeats prove determinism "
            "only, not that the outputs are the target's: not compared with the AR baseline"
        )
        return RequestVerdict(**base, verdict="unproven", detail=detail)
    if reference is None or _ids(reference) is None:
        return RequestVerdict(**base, verdict="n/a", detail="no baseline output to compare")
    ids, ref_ids = _ids(row) or [], _ids(reference) or []
    index = first_divergence(ids, ref_ids)
    seeded = f" at seed {how.seed}" if how.sampled else ""
    if index is None:
        return RequestVerdict(
            **base,
            verdict="exact",
            compared_with="baseline",
            detail=f"identical to baseline{seeded}",
        )
    text, ref_text = str(row.get("text") or ""), str(reference.get("text") or "")
    garble, ref_garble = garble_score(text), garble_score(ref_text)
    # A sampled output's own margin where it diverged: numerics that flip a sample leave the
    # uniform at the edge of the new token's interval, so a token whose interval lies farther
    # from it was not its own draw (relaxed acceptance, a sampling bug), whatever AR's margin.
    off_draw: float | None = None
    if how.sampled:
        margin = _margin_at(reference, index, "sample_margins")
        limit, kind, unit = policy.sampled_near_tie_margin, "sample margin", ""
        whence, since = "", ""
        own = _margin_at(row, index, "sample_margins")
        off_draw = -own if own is not None and own < -limit else None
    else:  # the top-2 margin is a logprob difference: nats, as the scored near tie's
        margin = _margin_at(reference, index, "top2_margins")
        (limit, whence), kind, unit = greedy_margin(row, policy), "margin", " nats"
        since = f" ({whence})"
    if garble - ref_garble > policy.garble_margin and garble >= policy.garble_min_score:
        verdict: Verdict = "garbled"
        detail = f"garble score {garble:.2f} vs baseline {ref_garble:.2f}"
    elif off_draw is not None:
        verdict = "diverged"
        detail = (
            f"differs from baseline{seeded} at token {index}, a token its own draw there did "
            f"not select (its uniform lies {off_draw:.4g} outside the token's interval; "
            f"near-tie margin {limit:.4g})"
        )
    elif margin is not None and margin < limit:
        verdict = "near-tie"
        detail = (
            f"baseline {kind} {margin:.4g}{unit} < {limit:.4g}{unit}{since} at token "
            f"{index}{seeded}"
        )
    else:
        verdict = "diverged"
        shown = "unknown" if margin is None else f"{margin:.4g}{unit}"
        detail = (
            f"differs from baseline{seeded} at token {index} (baseline {kind} {shown}, "
            f"near-tie margin {limit:.4g}{unit}{': ' + whence if whence else ''})"
        )
    return _differs(
        base,
        verdict,
        row,
        reference,
        index,
        compared_with="baseline",
        detail=detail,
        margin=margin,
        garble=garble,
        reference_garble=ref_garble,
        excerpt_chars=policy.excerpt_chars,
    )


def greedy_margin(row: Mapping[str, Any], policy: DeterminismSpec) -> tuple[float, str]:
    """The greedy near-tie margin (nats) a request is judged at, and whence: the spec's where it
    sets one, else its engine's calibrated margin as the request's record states it (the
    measurement writes the catalog's, `sweeper.proof.scored.catalog`), else 0: no near ties from an
    engine whose numerics nobody measured."""
    if policy.near_tie_margin is not None:
        return float(policy.near_tie_margin), "the spec's near_tie_margin"
    engine = str(row.get("engine") or "the engine")
    stated = row.get("near_tie_margin")
    if stated is None or is_missing(stated):
        return 0.0, f"{engine} has no calibrated margin, set determinism.near_tie_margin"
    return float(stated), f"{engine}'s calibrated margin"


def _differs(
    base: dict[str, Any],
    verdict: Verdict,
    row: Mapping[str, Any],
    other: Mapping[str, Any],
    index: int,
    *,
    compared_with: str,
    detail: str,
    margin: float | None = None,
    garble: float | None = None,
    reference_garble: float | None = None,
    excerpt_chars: int = 40,
) -> RequestVerdict:
    """A verdict with the texts of both sides cut around their first differing character."""
    text, other_text = str(row.get("text") or ""), str(other.get("text") or "")
    offset = _common_prefix(text, other_text)
    start = max(0, offset - excerpt_chars)
    return RequestVerdict(
        **base,
        verdict=verdict,
        divergence_index=index,
        compared_with=compared_with,
        margin=margin,
        char_offset=offset,
        excerpt=text[start : offset + excerpt_chars],
        reference_excerpt=other_text[start : offset + excerpt_chars],
        garble=garble,
        reference_garble=reference_garble,
        detail=detail,
    )


def _repeat_disagreement(
    rows: list[Mapping[str, Any]],
) -> tuple[int, Mapping[str, Any], Mapping[str, Any]] | None:
    """(token index, first row, first disagreeing row) when the repeats of a prompt disagree."""
    usable = [r for r in rows if not is_failed(r) and _ids(r) is not None]
    if len(usable) < 2:
        return None
    first = _ids(usable[0]) or []
    for row in usable[1:]:
        index = first_divergence(first, _ids(row) or [])
        if index is not None:
            return index, usable[0], row
    return None


def _margin_at(reference: Mapping[str, Any], index: int, column: str) -> float | None:
    margins = reference.get(column)
    if margins is None or index >= len(margins):
        return None
    value = margins[index]
    return None if is_missing(value) else float(value)


def _common_prefix(a: str, b: str) -> int:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


def _ids(row: Mapping[str, Any]) -> list[int] | None:
    ids = row.get("token_ids")
    return None if ids is None else [int(i) for i in ids]


def output_key(row: Mapping[str, Any], sampled: bool) -> tuple[str, Any, int]:
    """The one pairing rule: the rows that must give one output (compared with each other as
    repeats) and the baseline row they are compared with share this key. Greedy, every choice
    of every repeat of a prompt is the prompt's greedy output (choice 0); sampled, a request is
    a draw at its seed (each measured request draws its own: `sweeper.measure.drive`; its AR
    twin the same), and choice i of it its own draw (its seed derived from the request's and
    i), so it pairs only with choice i of the same prompt, sent the same seed and n."""
    if not sampled:
        return str(row["prompt_id"]), None, 0
    seed: Any = row.get("seed")
    return str(row["prompt_id"]), None if is_missing(seed) else int(seed), choice_of(row)


def _outputs(
    rows: list[Mapping[str, Any]], sampled: bool
) -> dict[tuple[str, Any, int], list[Mapping[str, Any]]]:
    """Rows grouped by `output_key`, each group in repeat then choice order."""
    grouped: dict[tuple[str, Any, int], list[Mapping[str, Any]]] = defaultdict(list)
    order = sorted(rows, key=lambda r: (str(r["prompt_id"]), int(r["repeat"]), choice_of(r)))
    for row in order:
        grouped[output_key(row, sampled)].append(row)
    return dict(grouped)


def _which(row: Mapping[str, Any]) -> str:
    """A row named among its prompt's outputs: `repeat 1`, or `repeat 1 choice 2`."""
    choice = choice_of(row)
    return f"repeat {row['repeat']}" + (f" choice {choice}" if choice else "")
