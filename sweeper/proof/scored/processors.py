"""The request's processors, defined once for every scored judge: what a sample was drawn with
(`Sampling`, read from a record's columns), and one position's logits after the logit
processors, rebuilt from what a scorer returns (`logits_of`).

The processors and the order an engine applies them in (`sweeper.proof.scored.catalog` says each
engine's, from its code): a grammar's mask, logit bias and the penalties act on the raw logits,
before temperature (`logit_order`); temperature, then the cuts (top-k, top-p, min-p) in the
engine's `order` (`sweeper.proof.scored.processed`). The penalties (vLLM's definitions, which SGLang
and the bundled runtime share): a repetition penalty r divides a positive logit by r and multiplies
a negative one by r, for every token seen (in the prompt and the output before the position:
`repetition_scope` "prompt+output", vLLM's and the runtime's; SGLang's counts the output only);
a frequency penalty f subtracts f times the token's count in the output, a presence penalty p
subtracts p from every token the output holds. A step named `a|b` applies a and b in an order
the engine leaves unspecified (SGLang's penalizers are a set).

The rebuild, per position, from the raw top-k logprobs returned, the prompt's ids and the
sample's own prefix (`Context`): every returned token's processed logit exactly (bias and the
frequency and presence penalties are shifts of its logprob; a repetition penalty needs the raw
logit's sign, its logprob plus the position's log-sum-exp, which the scorer must return); the
unreturned tail as bounds. Sound only where no processor can raise a token the scorer did not
return: a repetition penalty >= 1, frequency and presence >= 0 and a negative bias only lower
logits, so every unreturned token stays at or below the k-th returned one's raw logprob, the
tail's bound; returned tokens the processors push below that bound leave the known prefix and
join the tail with their exact weights, and unreturned tokens they lower are counted out of the
tail's least weight (each at most the bound's raw probability). Where it is not sound (a
positive bias, a repetition penalty < 1 or a negative frequency or presence penalty on a token
the scorer did not return at that position, a repetition penalty without the log-sum-exp, an
order the engine leaves unspecified, a processor the engine's order does not name, any grammar)
the position is `Unrebuilt`, naming the processor: never judged as if it were. Which positions
are unrebuilt depends only on the prefix (never on the token drawn there), so the others' PITs
stay i.i.d. uniform under the null.

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sweeper.config.features import BY_NAME, RequestFeatures, from_columns

#: The cuts after temperature an engine's `order` may name.
STEPS = ("temperature", "top_k", "top_p", "min_p")
#: The logit processors, in vLLM's order (v1/sample/sampler.py: logit bias, then repetition,
#: frequency and presence penalties), the bundled runtime's too: `logit_order`'s default.
LOGIT_STEPS = ("logit_bias", "repetition_penalty", "frequency_penalty", "presence_penalty")
#: The structured-output processors (a grammar's mask): never rebuilt here.
GRAMMARS = ("response_format", "regex")
#: Which tokens a repetition penalty counts.
SCOPES = ("prompt+output", "output")


@dataclass(frozen=True)
class Sampling(RequestFeatures):
    """The processors a sample was drawn with (the request features, frozen, among them), and
    the orders the scorer's engine applies them in (module docstring)."""

    temperature: float
    top_p: float | None = None
    top_k: int | None = None
    order: tuple[str, ...] = ("temperature", "top_k", "top_p", "min_p")
    logit_order: tuple[str, ...] = LOGIT_STEPS
    #: `SCOPES`; None: the engine's is not stated (a repetition penalty then cannot be rebuilt).
    repetition_scope: str | None = "prompt+output"

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Sampling:
        """From a `ScoreRecord` row (or a point row: its request columns). Fail closed: a row
        that states no logit order or repetition scope has none, so a processor it used cannot
        be rebuilt."""
        return cls(
            temperature=float(record["temperature"]),
            top_p=_maybe(record.get("top_p"), float),
            top_k=_maybe(record.get("top_k"), int),
            **from_columns(record),
            order=tuple(record.get("order") or cls.order),
            logit_order=tuple(record.get("logit_order") or ()),
            repetition_scope=_maybe(record.get("repetition_scope"), str),
        )

    def __post_init__(self) -> None:
        steps = list(self.order)
        if not steps or steps[0] != "temperature":
            raise ValueError(f"order {steps}: temperature must come first")
        for step in steps[1:]:
            if any(name not in STEPS[1:] for name in step.split("+")):
                raise ValueError(
                    f"order {steps}: unknown step {step!r} (known: {', '.join(STEPS)})"
                )
        for group in self.logit_order:
            if any(name not in LOGIT_STEPS for name in group.split("|")):
                raise ValueError(
                    f"logit order {list(self.logit_order)}: unknown step {group!r} (known: "
                    f"{', '.join(LOGIT_STEPS)})"
                )
        if self.repetition_scope not in (*SCOPES, None):
            raise ValueError(f"repetition scope {self.repetition_scope!r}: one of {SCOPES}")

    def active(self, step: str) -> bool:
        """Whether `step` changes anything at these parameters."""
        if step == "top_k":
            return self.top_k is not None and self.top_k > 0
        if step == "top_p":
            return self.top_p is not None and self.top_p < 1.0
        if step == "logit_bias":
            return any(bias != 0.0 for _, bias in self.logit_bias or ())
        if step in BY_NAME:
            return BY_NAME[step].acts(getattr(self, step))
        return step == "temperature"

    @property
    def grammar(self) -> str | None:
        """The structured-output processor asked (`GRAMMARS`), None without one."""
        return next((name for name in GRAMMARS if getattr(self, name) is not None), None)

    @cached_property
    def acting(self) -> tuple[str, ...]:
        """The logit processors that act, in the engine's `logit_order` (the ones it does not
        name left out: `logits_of` refuses to rebuild those)."""
        named = [s for group in self.logit_order for s in group.split("|")]
        return tuple(s for s in named if self.active(s))

    @cached_property
    def processes_logits(self) -> bool:
        """Whether a logit processor or a grammar acts (else the raw logprobs are the logits)."""
        return self.grammar is not None or any(self.active(s) for s in LOGIT_STEPS)

    def asked(self) -> dict[str, Any]:
        """What the request asked, each processor None where it changes nothing: the
        distribution's definition, which an AR control must share."""
        values = {
            "temperature": self.temperature,
            **{step: getattr(self, step) for step in (*STEPS[1:], *LOGIT_STEPS)},
            "grammar": self.grammar,
        }
        return {
            name: value if name in ("temperature", "grammar") or self.active(name) else None
            for name, value in values.items()
        }

    def differences(self, asked: Mapping[str, Any]) -> str:
        """How `asked` (another sampling's `asked`) differs from these processors, "" where it
        does not: `repetition_penalty 1.3 here, None there`."""
        mine = self.asked()
        return "; ".join(
            f"{name} {value} here, {mine[name]} there"
            for name, value in asked.items()
            if mine[name] != value
        )

    def contexts(
        self, prompt: Sequence[int] | None, positions: Sequence[Mapping[str, Any]]
    ) -> list[Context | None]:
        """Each scored position's `Context` (a sample's, after `prompt`, the ids its scorer
        recorded), or None at every position where no penalty is asked."""
        if not any(self.active(s) for s in LOGIT_STEPS[1:]):
            return [None] * len(positions)
        ids = None if _missing(prompt) else [int(t) for t in prompt or ()]
        return list(contexts(ids, [int(p["token"]) for p in positions]))


@dataclass(frozen=True)
class Context:
    """The tokens a position's penalties count: the prompt's (None: the scorer recorded no
    prompt ids) and the sample's own before the position, each id's count."""

    prompt: Mapping[int, int] | None
    output: Mapping[int, int]


def contexts(prompt: Sequence[int] | None, tokens: Sequence[int]) -> list[Context]:
    """Each position's `Context` for a sample of `tokens` after `prompt`."""
    counted = Counter(int(t) for t in prompt) if prompt is not None else None
    out: list[Context] = []
    seen: Counter[int] = Counter()
    for token in tokens:
        out.append(Context(counted, dict(seen)))
        seen[int(token)] += 1
    return out


@dataclass(frozen=True)
class Unrebuilt:
    """A position whose processed distribution cannot be rebuilt soundly, and why."""

    processor: str
    why: str

    def text(self) -> str:
        """`logit_bias: +5 on token 42 outside the scorer's top 20: cannot be rebuilt`."""
        return f"{self.processor}: {self.why}: cannot be rebuilt"


@dataclass(frozen=True)
class Logits:
    """A position after the logit processors, as far as the returned tokens tell, in logprob
    units (each a processed logit less one constant): the known prefix, best first, every one at
    or above `bound`, the most any other token can have; the unreturned tokens' raw mass
    (`tail`) and the part of it no processor lowered, at least (`tail_sure`); the returned
    tokens pushed below the bound (`extras`, exact); and the scored token's own (`own`: an
    upper bound unless `own_exact`)."""

    known: list[tuple[int, float]]
    bound: float
    tail: float
    tail_sure: float
    extras: list[float]
    own: float
    own_exact: bool
    #: How many tokens the scorer returned.
    returned: int


def top_of(position: Mapping[str, Any]) -> list[tuple[int, float]]:
    """A position's returned top k as (id, raw logprob), best first (ties: the lower id)."""
    return sorted(((int(t), float(lp)) for t, lp in position["top"]), key=lambda x: (-x[1], x[0]))


def logits_of(
    position: Mapping[str, Any], sampling: Sampling, context: Context | None
) -> Logits | Unrebuilt:
    """One position's `Logits` under `sampling`'s logit processors (module docstring)."""
    top = top_of(position)
    token, own = int(position["token"]), float(position["logprob"])
    raw_tail = max(0.0, 1.0 - sum(math.exp(lp) for _, lp in top))
    bound = top[-1][1]
    if not sampling.processes_logits:
        return Logits(top, bound, raw_tail, raw_tail, [], own, True, len(top))
    lse = position.get("logsumexp")
    problem = _unsound(sampling, context, [t for t, _ in top], None if _missing(lse) else lse)
    if problem is not None:
        return problem
    if context is None:  # no penalty asked (`_unsound` says why a penalty needs one): none count
        context = Context(None, {})
    offset = 0.0 if lse is None or _missing(lse) else float(lse)
    biases = dict(sampling.logit_bias or ())
    seen = _seen(sampling, context)

    penalty = float(sampling.repetition_penalty or 1.0)
    frequency = float(sampling.frequency_penalty or 0.0)
    presence = float(sampling.presence_penalty or 0.0)

    def shifted(t: int, lp: float) -> float:
        x = lp + offset
        for step in sampling.acting:
            if step == "logit_bias":
                x += biases.get(t, 0.0)
            elif step == "repetition_penalty" and t in seen:
                x = x / penalty if x > 0 else x * penalty
            elif step == "frequency_penalty":
                x -= frequency * context.output.get(t, 0)
            elif step == "presence_penalty" and context.output.get(t, 0):
                x -= presence
        return x - offset

    processed = sorted(((t, shifted(t, lp)) for t, lp in top), key=lambda x: (-x[1], x[0]))
    known = [(t, lp) for t, lp in processed if lp >= bound]
    if not known:
        first = next(s for s in LOGIT_STEPS if sampling.active(s))
        return Unrebuilt(first, "it pushes every returned token below the unreturned tail")
    returned = {t for t, _ in top}
    lowered = _lowered(sampling, context, seen, biases) - returned
    sure = max(0.0, raw_tail - len(lowered) * math.exp(bound))
    extras = [lp for _, lp in processed if lp < bound]
    mine = dict(processed)
    if token in mine:
        return Logits(known, bound, raw_tail, sure, extras, mine[token], True, len(top))
    # Outside the returned: lowered or kept, never raised (else unsound above); exact unless a
    # repetition penalty needs the raw logit no log-sum-exp recovers.
    exact = not (_missing(lse) and sampling.active("repetition_penalty") and token in seen)
    own_lp = shifted(token, own) if exact else own
    return Logits(known, bound, raw_tail, sure, extras, own_lp, exact, len(top))


def _seen(sampling: Sampling, context: Context) -> set[int]:
    """The ids a repetition penalty counts (its scope)."""
    seen = {t for t, n in context.output.items() if n}
    if sampling.repetition_scope == "prompt+output" and context.prompt is not None:
        seen |= {t for t, n in context.prompt.items() if n}
    return seen


def _lowered(
    sampling: Sampling, context: Context, seen: set[int], biases: Mapping[int, float]
) -> set[int]:
    """The ids some processor lowers at this position."""
    out = {t for t, b in biases.items() if b < 0.0}
    if sampling.active("repetition_penalty"):
        out |= seen
    if sampling.active("frequency_penalty") or sampling.active("presence_penalty"):
        out |= {t for t, n in context.output.items() if n}
    return out


def _unsound(
    sampling: Sampling, context: Context | None, returned: list[int], lse: Any
) -> Unrebuilt | None:
    """Why this position's rebuild would not be sound (module docstring), else None."""
    if sampling.grammar is not None:
        return Unrebuilt(sampling.grammar, "the grammar's mask is not rebuilt by this judge")
    active = [s for s in LOGIT_STEPS if sampling.active(s)]
    named = {s for group in sampling.logit_order for s in group.split("|")}
    for step in active:
        if step not in named:
            return Unrebuilt(step, f"the scorer's engine states no {step} step")
    for group in sampling.logit_order:
        acting = [s for s in group.split("|") if sampling.active(s)]
        if "repetition_penalty" in acting and len(acting) > 1:
            other = next(s for s in acting if s != "repetition_penalty")
            return Unrebuilt(
                "repetition_penalty", f"applied in an unspecified order with {other} ({group})"
            )
    penalties = [s for s in active if s != "logit_bias"]
    if penalties and context is None:
        return Unrebuilt(penalties[0], "no prompt or prefix was given to count")
    repetition = sampling.active("repetition_penalty")
    if repetition and sampling.repetition_scope is None:
        return Unrebuilt("repetition_penalty", "the scorer's engine states no repetition scope")
    scoped = repetition and sampling.repetition_scope == "prompt+output"
    if scoped and (context is None or context.prompt is None):
        return Unrebuilt("repetition_penalty", "the scorer recorded no prompt token ids")
    ids, k = set(returned), len(returned)
    outside = f"outside the scorer's top {k}"
    for token, bias in sampling.logit_bias or ():
        if bias > 0.0 and token not in ids:
            return Unrebuilt("logit_bias", f"{bias:+g} on token {token} {outside}")
    if context is None:
        return None
    seen = _seen(sampling, context)
    output = {t for t, n in context.output.items() if n}
    rp = float(sampling.repetition_penalty or 1.0)
    raising = [("repetition_penalty", rp, rp < 1.0, "1", seen)]
    for name in ("frequency_penalty", "presence_penalty"):
        value = float(getattr(sampling, name) or 0.0)
        raising.append((name, value, value < 0.0, "0", output))
    for name, value, raises, neutral, tokens in raising:
        missed = sorted(tokens - ids)
        if raises and missed:
            return Unrebuilt(name, f"{value:g} < {neutral} raises token {missed[0]} {outside}")
    if repetition and lse is None:
        hit = next((t for t in returned if t in seen), None)
        if hit is not None:
            return Unrebuilt(
                "repetition_penalty",
                f"{rp:g} scales returned token {hit}'s raw logit by its sign, and the scorer "
                "returned no log-sum-exp to recover it",
            )
    return None


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _maybe(value: Any, kind: Any) -> Any:
    return None if _missing(value) else kind(value)
