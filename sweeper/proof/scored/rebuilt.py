"""An exact scorer's claims checked: the processed probability p and mass above it that a
scorer of basis `exact` (the bundled runtime) returns for each token, rebuilt from the raw
logprobs it returns beside them (the token's own and the position's top k, and its log-sum-exp
where a repetition penalty needs the raw logit) under every processor asked, in the engine's
order (`sweeper.proof.scored.processors` for logit bias and the penalties, counted over the prompt
and the sample's prefix; `sweeper.proof.scored.processed`'s top-k machinery for temperature and the
cuts: an interval where the unreturned tail could matter, a point where it cannot), and compared.
Where the processors cannot be rebuilt soundly the position is unrebuilt, naming the processor: its
claims are not checked, so never used. Where processors act, a token claimed removed is judged
by the rebuild's evidence alone (the scorer's boundary is on its processed log-softmax, the
token's logprob raw).

A claim outside the rebuilt interval by more than `REBUILD_TOLERANCE` is a `Mismatch`: the
scoring path's processing is not the asked one (a sampler fault it shares would hide behind it:
the same hot processing in the sampler and the scorer makes the claimed PITs uniform). Its PIT is
then the rebuilt one, so even unflagged, a hot scorer could not hide a hot sampler. Where the
claim holds, the PIT takes the rebuilt values where they are a point, the claim (inside the
rebuilt interval) where the returned top k cannot pin it. A row without top logprobs cannot be
checked: a mismatch too (fail closed).

Pure: numbers in, numbers out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sweeper.proof.scored.processed import (
    VOCAB_BOUND,
    Processed,
    TokenPit,
    pit,
    pit_of,
    processed,
    unrebuilt_pit,
)
from sweeper.proof.scored.processors import Context, Sampling, Unrebuilt

#: How far (in probability) a claimed p or above may lie outside the rebuilt interval: the
#: runtime computes both from the same float64 logits, which differ from the rebuild by rounding
#: (~1e-15); a scorer processing at another temperature, order or cut moves them by far more.
REBUILD_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Rebuilt:
    """A token's processed probability and mass above rebuilt from the raw logprobs at the
    asked parameters, each an interval (a point where the returned top k pins it)."""

    p: tuple[float, float]
    above: tuple[float, float]

    @property
    def exact(self) -> bool:
        return self.p[0] == self.p[1] and self.above[0] == self.above[1]

    def holds(self, p: float, above: float) -> bool:
        """Whether a claimed p and above lie within `REBUILD_TOLERANCE` of these (above only
        where p > 0: a removed token's mass above is the scorer's convention, all of it)."""

        def near(value: float, bounds: tuple[float, float]) -> bool:
            return bounds[0] - REBUILD_TOLERANCE <= value <= bounds[1] + REBUILD_TOLERANCE

        return near(p, self.p) and (p <= 0.0 or near(above, self.above))

    def text(self) -> str:
        return f"p {_span(self.p)} above {_span(self.above)}"


@dataclass(frozen=True)
class Mismatch:
    """A token whose claimed p and above are not the rebuilt ones (`rebuilt` None: no top
    logprobs were returned to rebuild them from)."""

    token: int
    #: The claimed (p, above).
    claimed: tuple[float, float]
    rebuilt: Rebuilt | None = None

    def text(self) -> str:
        """`token 17 claimed p 0.213 above 0.431, rebuilt p 0.15 above 0.51`."""
        p, above = self.claimed
        said = f"token {self.token} claimed p {p:.6g} above {above:.6g}"
        if self.rebuilt is None:
            return f"{said}, no top logprobs returned to rebuild them from"
        return f"{said}, rebuilt {self.rebuilt.text()}"


def checked_pit(
    position: Mapping[str, Any],
    basis: str,
    sampling: Sampling,
    margin: float,
    vocab: int = 0,
    context: Context | None = None,
) -> tuple[TokenPit, Mismatch | None]:
    """`sweeper.proof.scored.processed.pit` of one `PositionScore` row (`context`: what its
    penalties count), an exact scorer's claims checked against the rebuilt values and the PIT taken
    from those (module docstring)."""
    claimed = pit(position, basis, sampling, margin, vocab, context)
    if basis != "exact":
        return claimed, None
    p, above = float(position["p"]), float(position["above"])
    token = int(position["token"])
    if not position.get("top"):
        return claimed, Mismatch(token, (p, above))
    found = processed(position, sampling, vocab or VOCAB_BOUND, context)
    if isinstance(found, Unrebuilt):
        return unrebuilt_pit(found), None
    values = rebuilt(found)
    if not values.holds(p, above):
        return pit_of(found, margin), Mismatch(token, (p, above), values)
    if p > 0.0 and values.exact:
        u, width = values.above[0], values.p[0]
        return TokenPit(u, width, u, width, exact=True), None
    if p <= 0.0 and sampling.processes_logits:
        # The scorer's boundary is on its processed log-softmax, the token's logprob raw: their
        # distance is no distance; the rebuild's evidence is on one scale (or proves nothing).
        return pit_of(found, margin), None
    return claimed, None


def rebuilt(found: Processed) -> Rebuilt:
    """The token's p and above as the steps left them: a removed token p 0 and above 1 (all
    the kept mass, the runtime's convention); a kept one its weight and the weight above it
    over the kept total; one the tail decides, p from 0 and above up to 1. A token outside the
    known prefix is kept only with all of it (each step keeps a prefix), so the kept total then
    holds them and it; it is certainly kept only where nothing truncates (its weight an upper
    bound where a penalty's amount on it is unknown: then it may be 0)."""
    if found.removed is not None:
        return Rebuilt((0.0, 0.0), (1.0, 1.0))
    top, state, rank = found.top, found.state, found.rank
    z_lo, z_hi = found.z
    if rank is not None:
        above, weight = top.cumulative[rank - 1], top.weights[rank - 1]
        if rank <= state.j_lo:
            return Rebuilt((weight / z_hi, weight / z_lo), (above / z_hi, above / z_lo))
        least = max(z_lo, top.cumulative[rank])
        return Rebuilt((0.0, weight / least), (above / z_hi, 1.0))
    own, known = found.own, top.cumulative[-1]
    least = max(z_lo, known + own)
    kept = 0.0 if found.truncated else found.own_lo / z_hi
    return Rebuilt((kept, own / least), (known / z_hi, 1.0))


def _span(bounds: tuple[float, float]) -> str:
    low, high = bounds
    return f"{low:.6g}" if low == high else f"in [{low:.6g}, {high:.6g}]"
