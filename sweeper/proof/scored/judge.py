"""A sampled point's scored verdict: every token it sampled, scored by the target's own prefill
(`determinism.sampled: scored`).

Pure: scored sample rows (`scores.jsonl`, `ScoreRecord`) in, a verdict and the point's columns
out. Each token's randomized PIT is `sweeper.proof.scored.processed`'s (V drawn from a generator
seeded by the output: its point, role, prompt and index, so a verdict is reproducible and no two
outputs share their V); under the null the PITs are i.i.d. uniform, whatever
the prefixes, so every token of every sample counts and no AR samples are needed. The verdict:

- `impossible-token` (a violation): a token the processed distribution gives probability 0,
  its raw logprob at least the near-tie margin below the boundary's (the k-th token's, the
  nucleus's last, the min-p threshold; in nats, the scorer's own numerical margin as its record
  states it, `sweeper.proof.scored.catalog`, unless `scored_near_tie_margin` sets one; a record that
  states none has no near ties); its evidence is the first such token (prompt, sample,
  position, token, rank, how far below the boundary, the mass it fell outside). Tokens within
  the margin are near ties, numerics of a prefill against a decode, never a proof: but, as
  greedy near ties are held to the AR-vs-AR control (`calibration`), a point whose near-tie
  rate per token is above the AR server's own (its 95% Wilson upper bound) has them counted as
  impossible tokens. Every verdict states the margin;
- `shifted` (a violation): the tokens' PITs are not uniform at `alpha`. Three parts,
  Bonferroni-split (`HOT_SHARE`, `COLD_SHARE`, `GOF_SHARE`: 0.2, 0.6, 0.2 of alpha), each
  one-sided where it has a side. `hotter` (0.2 alpha): the score for temperature summed over
  the tokens is large (`TemperatureScore`: on each position, the token's tempered logit below
  its mean, as a step function of u; the locally most powerful statistic against a sampler
  hotter than asked at every token, weighing each position by how much temperature moves it
  there, so near-certain positions add no noise; largest in the tail, where a hot sampler
  draws). `colder` (0.6 alpha): the colder ratio summed over the tokens is large
  (`colder_ratio`: each token's likelihood ratio under a sampler `COLDER` times colder, less 1:
  the locally most powerful statistic against one that is that much colder on an unknown few
  positions, such as the drafted ones; it falls with u, so any colder sampler, at any factor
  and positions, raises it; bounded below by -1, so the tail's rare large steps, which make
  the score noisy on its cold side, do not reach it). Colder gets the larger share: it moves
  mass onto tokens the target already favours, where every statistic of u weighs least, while
  a hotter sampler draws the tail, where the score weighs most. Both laws under the null are
  simulated from the same steps on shared uniforms (`sweeper.stats.steps`): rare large tail
  steps skew them. The shape (0.2 alpha): Neyman's components 2 to 4 of u (chi-squared, 3
  degrees of freedom: spread, skew, peaks), for faults that move no temperature. Where u is an
  interval (a top-k scorer) each statistic takes the value least favourable to an alarm (the
  score rises with u, the ratio falls), so the test keeps its level;
- `distribution-ok`: neither, by a test that detects a sampler `scored_max_shift` hotter or
  colder (log of the factor) at every token with 80% power (`ScoredPower`, the weaker side's,
  measured on the point's own positions: a change of temperature moves the summed score by its
  variance, the Fisher information, and the ratio by its covariance with the score, less what
  the intervals cost);
- `unproven` (with why): claimed p and above that are not the ones rebuilt from the scorer's
  raw logprobs (`sweeper.proof.scored.rebuilt`: its processing is not the asked one), no scored
  samples, a failed scorer, no AR control, a control drawn with other processors, a control
  that fails the same test (the scoring path does not match the sampler: wrong order,
  parameters or numerics; an impossible token stands where the control drew none), positions
  whose processors cannot be rebuilt from what the scorer returned
  (`sweeper.proof.scored.processors`: named; the other positions still prove a violation, never
  a pass), no top logprobs to state the power with, or a test too weak to see the shift it must.

The AR server's own samples scored the same way are the control of every run (`control`): their
p-value, impossible tokens and near-tie rate, stored on the AR point.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from sweeper.proof.determinism import SampledVerdict
from sweeper.proof.scored.processed import (
    Impossible,
    TemperatureScore,
    colder_ratio,
    temperature_score,
)
from sweeper.proof.scored.processors import Sampling, Unrebuilt
from sweeper.proof.scored.rebuilt import REBUILD_TOLERANCE, Mismatch, checked_pit
from sweeper.results.rows import is_missing
from sweeper.spec import DeterminismSpec
from sweeper.stats.intervals import wilson_upper
from sweeper.stats.steps import simulated_joint_sums, tail_p_values
from sweeper.stats.uniformity import (
    chi2_sf,
    component_bounds,
    least_square,
)

_NORMAL = NormalDist()
#: The shares of alpha given to the three parts (Bonferroni: they sum to 1). Colder gets the
#: most: a colder sampler moves mass onto tokens the target already favours, where every
#: statistic of u weighs least, while a hotter one draws the tail, where the score weighs most.
HOT_SHARE = 0.2
COLD_SHARE = 0.6
GOF_SHARE = 0.2
#: The colder part's statistic: the likelihood ratio of a sampler this many times colder on some
#: positions (`colder_ratio`; 0.6: the colder fault the issue asks the test to catch).
COLDER = 0.6
#: The shape components (Neyman's 2 to 4).
SHAPE = (2, 3, 4)
#: Power targeted by the stated power.
POWER = 0.8
#: Draws of the hotter and colder statistics' null law at alpha 0.01 (their smallest p-value is
#: 1 / 1000, half the hotter part's level); a smaller alpha draws more (`simulations`).
SIMULATIONS = 999

#: The point columns a scored verdict fills (`PointRecord`).
SCORED_COLUMNS = (
    "scored_p",
    "scored_direction",
    "scored_n_tokens",
    "scored_impossible",
    "scored_impossible_n",
    "scored_near_ties",
    "scored_power",
    "scored_exact_share",
    "scored_control_p",
    "scored_control_tokens",
    "scored_control_impossible",
    "scored_control_near_ties",
)
#: The AR point's columns from its own samples (`control`).
CONTROL_COLUMNS = tuple(c for c in SCORED_COLUMNS if c.startswith("scored_control_"))


@dataclass(frozen=True)
class Found:
    """An impossible (or near-tie) token, one whose claims do not hold, or a position that
    cannot be rebuilt, and where it was."""

    prompt_id: str
    index: int
    position: int
    evidence: Impossible | Mismatch | Unrebuilt

    def text(self) -> str:
        return (
            f"prompt {self.prompt_id} sample {self.index} position {self.position}: "
            f"{self.evidence.text()}"
        )


@dataclass(frozen=True)
class ScoredPower:
    """The smallest change of temperature at every token (log of the factor: 0.1 is a sampler
    1.105x hotter, or 1.105x colder) the direction part detects with `POWER`."""

    shift: float | None
    tokens: int
    alpha: float
    #: What the conservative treatment of interval-valued u costs, in z (0 where u was exact).
    slack: float = 0.0
    basis: str = "measured on this point's tokens"
    #: Why there is no shift, when there is none.
    why: str = ""

    def __str__(self) -> str:
        return self.text()

    def text(self) -> str:
        if self.shift is None:
            return f"{self.tokens} tokens: {self.why or 'too few to detect any shift'}"
        factor = math.exp(self.shift)
        widths = f", {self.slack:.2f} z lost to top-k intervals" if self.slack > 0 else ""
        return (
            f"detects a sampler {factor:.3g}x hotter or colder at every token with {POWER:.0%} "
            f"power over {self.tokens} tokens at alpha {self.alpha:g}{widths} ({self.basis})"
        )


#: The temperature score's variance per token (`TemperatureScore`: the Fisher information for
#: temperature) the plan assumes before any token is scored: measured on the bundled runtime's
#: AR samples of smollm2-135m at temperature 0.7 and top-p 0.9 on sweeps/local-sampled.yaml's
#: four prompts (11,663 tokens; 1.28 at top-p 1.0: a nucleus leaves temperature less to move).
SIGNAL_PER_TOKEN = 0.47
#: The colder ratio's correlation with the score under the null, the share of the score's z a
#: change of temperature at every token moves it by, the plan assumes: measured on the same
#: model's AR samples at temperature 0.7 (`bench/scored_pools.py`: 0.88 at top-p 1.0, 8,869
#: tokens; 0.93 at top-p 0.9), the smaller taken.
RATIO_CORRELATION = 0.88
_BASIS_PLANNED = "expected: smollm2-135m's signal per token at temperature 0.7, top-p 0.9"


def simulations(alpha: float) -> int:
    """Draws of the null laws at `alpha`: enough that the smallest p-value, 1 / (draws + 1), is
    at most half the smaller directional part's level (999 at alpha 0.01)."""
    return max(SIMULATIONS, math.ceil(2 / (alpha * min(HOT_SHARE, COLD_SHARE))) - 1)


def temperature_power(
    norm: float,
    tokens: int,
    alpha: float,
    slack: float = 0.0,
    *,
    basis: str = "",
    colder: tuple[float, float] | None = None,
) -> ScoredPower:
    """The detectable log temperature factor when the summed score's standard deviation under
    the null is `norm`: a factor f moves its z by log(f) * norm to first order (its variance is
    the Fisher information), less `slack` where u is an interval; the hotter side at
    `HOT_SHARE` alpha. `colder`: the colder ratio's z per unit of log(f) and its slack, the
    colder side at `COLD_SHARE` alpha (else the score's norm times `RATIO_CORRELATION`). The
    larger of the two sides' shifts is stated."""
    if norm <= 0:
        why = "every position near-certain: no temperature to see"
        return ScoredPower(None, tokens, alpha, slack, why=why)
    power = _NORMAL.inv_cdf(POWER)
    hot = (_NORMAL.inv_cdf(1 - alpha * HOT_SHARE) + power + slack) / norm
    drift, cold_slack = colder if colder is not None else (norm * RATIO_CORRELATION, slack)
    cold = (_NORMAL.inv_cdf(1 - alpha * COLD_SHARE) + power + cold_slack) / drift
    shift, lost = (hot, slack) if hot >= cold else (cold, cold_slack)
    return ScoredPower(shift, tokens, alpha, lost, basis or "measured on this point's tokens")


def expected_power(tokens: int, policy: DeterminismSpec) -> ScoredPower:
    """What the plan states before the run: the detectable temperature change over `tokens`
    scored tokens of `SIGNAL_PER_TOKEN` each, u exact (a top-k scorer's intervals lower it)."""
    norm = math.sqrt(max(tokens, 0) * SIGNAL_PER_TOKEN)
    return temperature_power(norm, tokens, policy.alpha, basis=_BASIS_PLANNED)


@dataclass
class Scored:
    """A point's tokens (of the roles judged), scored and tested."""

    samples: int = 0
    failed: list[str] = field(default_factory=list)
    lo: np.ndarray = field(default_factory=lambda: np.zeros(0))
    hi: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: Each tested token's position's score for temperature (`TemperatureScore`), or None
    #: where some position has no returned top k (then the direction is the mean of u).
    scores: list[TemperatureScore] | None = None
    #: The same positions' `colder_ratio` (at `COLDER`), where `scores` is not None.
    colder: list[TemperatureScore] | None = None
    exact: int = 0
    #: Seeds the simulations (the point's, so a verdict is reproducible).
    seed: int = 0
    impossible: list[Found] = field(default_factory=list)
    near_ties: list[Found] = field(default_factory=list)
    #: Tokens whose claimed p and above are not the ones rebuilt from the raw logprobs
    #: (`sweeper.proof.scored.rebuilt`): the scoring path's processing is not the asked one.
    mismatched: list[Found] = field(default_factory=list)
    #: Positions whose processed distribution cannot be rebuilt soundly
    #: (`sweeper.proof.scored.processors`): never tested, and never a pass.
    unrebuilt: list[Found] = field(default_factory=list)
    #: The near-tie margins (nats) the records were judged at (`near_tie_margin`).
    margins: set[float] = field(default_factory=set)
    #: What the samples were drawn with (`Sampling.asked`), where a record was read.
    asked: dict[str, Any] | None = None

    def margin_text(self) -> str:
        """The margin as a verdict states it: `near-tie margin 0.001 nats (2 near ties)`."""
        shown = " / ".join(f"{m:g}" for m in sorted(self.margins)) or "none stated"
        return f"near-tie margin {shown} nats ({len(self.near_ties)} near ties)"

    @property
    def tokens(self) -> int:
        return int(self.lo.size)

    @property
    def positions(self) -> int:
        """Every scored position: tested, impossible or near tie."""
        return self.tokens + len(self.impossible) + len(self.near_ties)

    def direction(self) -> tuple[float, float]:
        """The direction statistic's bounds (z): the temperature score summed over the tokens
        at the least and the most u each can be (the score rises with u), else the mean of u
        (Neyman's first component) where no top k was returned."""
        if self.scores is None:
            return component_bounds(1, self.lo, self.hi)
        norm = self.norm()
        if norm <= 0:
            return 0.0, 0.0
        low = sum(score.at(float(u)) for score, u in zip(self.scores, self.lo, strict=True))
        high = sum(score.at(float(u)) for score, u in zip(self.scores, self.hi, strict=True))
        return low / norm, high / norm

    def norm(self) -> float:
        """The direction statistic's standard deviation under the null (unstandardised)."""
        if self.scores is None:
            return math.sqrt(self.tokens)
        return math.sqrt(sum(score.variance for score in self.scores))

    def p_values(self, alpha: float | None = None) -> tuple[float, float, float]:
        """The hotter, colder and shape parts' conservative p-values. Hotter: the temperature
        score's upper tail; colder: the colder ratio's (`colder_ratio`). Their laws are
        simulated (`simulations(alpha)` fresh uniforms per token, seeded, shared by both; 999
        without `alpha`): the score's rare large tail steps skew it. Without a top k: the mean
        of u's two tails (normal)."""
        z_lo, z_hi = self.direction()
        shape = sum(least_square(component_bounds(j, self.lo, self.hi)) for j in SHAPE)
        p_shape = chi2_sf(shape, len(SHAPE))
        if self.scores is None or self.colder is None or self.norm() <= 0:
            return 1 - _NORMAL.cdf(z_lo), _NORMAL.cdf(z_hi), p_shape
        sums = simulated_joint_sums(
            [s.edges for s in self.scores],
            [[s.values for s in self.scores], [c.values for c in self.colder]],
            SIMULATIONS if alpha is None else simulations(alpha),
            np.random.default_rng(self.seed),
        )
        hot, _ = tail_p_values(z_lo * self.norm(), z_hi * self.norm(), sums[:, 0])
        least, _ = self.ratio()
        _, cold = tail_p_values(-least, -least, -sums[:, 1])
        return hot, cold, p_shape

    def ratio(self) -> tuple[float, float]:
        """The colder ratio summed over the tokens, at the least and the most u each can be: it
        falls with u, so its least is at the interval's top (unstandardised)."""
        if self.colder is None:
            return 0.0, 0.0
        least = sum(c.at(float(u)) for c, u in zip(self.colder, self.hi, strict=True))
        most = sum(c.at(float(u)) for c, u in zip(self.colder, self.lo, strict=True))
        return least, most

    def combined(self, alpha: float) -> tuple[float, str]:
        """The Bonferroni-combined p-value, and what rejects at `alpha`: "hotter" or "colder"
        where that part does (the stronger where both do), else "shape" where the shape does,
        else ""."""
        if not self.tokens:
            return 1.0, ""
        hot, cold, shape = self.p_values(alpha)
        parts = {"hotter": hot / HOT_SHARE, "colder": cold / COLD_SHARE}
        way = min(parts, key=lambda k: parts[k])
        by_shape = shape / GOF_SHARE
        label = way if parts[way] <= alpha else "shape" if by_shape <= alpha else ""
        return min(1.0, parts[way], by_shape), label

    def power(self, alpha: float) -> ScoredPower:
        """What the direction can see, on these tokens and intervals: a change of temperature
        by a factor f moves the summed score by log(f) times its variance (the Fisher
        information), and the colder ratio by log(f) times its covariance with the score (each
        position's, exact from the steps), less what the intervals cost."""
        if self.scores is None or self.colder is None:
            why = "no top logprobs returned, so the test's power cannot be stated"
            return ScoredPower(None, self.tokens, alpha, why=why)
        low, high = self.direction()
        spread = math.sqrt(sum(c.variance for c in self.colder))
        moved = -sum(_covariance(s, c) for s, c in zip(self.scores, self.colder, strict=True))
        least, most = self.ratio()
        colder = (moved / spread, (most - least) / spread) if spread > 0 and moved > 0 else None
        slack = max(0.0, high - low)
        return temperature_power(self.norm(), self.tokens, alpha, slack, colder=colder)

    @property
    def exact_share(self) -> float | None:
        return self.exact / self.positions if self.positions else None


def scored(
    rows: Iterable[Mapping[str, Any]], policy: DeterminismSpec, roles: tuple[str, ...]
) -> Scored:
    """The records of one point (`ScoreRecord` rows) of these roles, every token's PIT at its V."""
    records = sorted(
        (r for r in rows if r.get("role") in roles),
        key=lambda r: (str(r.get("prompt_id")), int(r.get("index") or 0)),
    )
    out = Scored()
    if not records:
        return out
    out.seed = zlib.crc32(str(records[0].get("point_id")).encode())
    lo: list[float] = []
    hi: list[float] = []
    scores: list[TemperatureScore | None] = []
    for record in records:
        if not is_missing(record.get("error")) and record.get("error"):
            out.failed.append(str(record["error"]))
            continue
        margin = near_tie_margin(record, policy)
        positions = list(record.get("positions") or [])
        draws = np.random.default_rng(_seed_of(record)).random(len(positions))
        try:
            sampling = Sampling.of(record)
            basis = str(record.get("basis"))
            counted = sampling.contexts(record.get("prompt_token_ids"), positions)
            checked = [
                checked_pit(p, basis, sampling, margin, context=c)
                for p, c in zip(positions, counted, strict=True)
            ]
            steps = [
                temperature_score(p, sampling, c) for p, c in zip(positions, counted, strict=True)
            ]
        except (KeyError, TypeError, ValueError) as exc:  # a record this judge cannot read
            out.failed.append(f"cannot score sample {record.get('index')}: {exc!r}")
            continue
        out.samples += 1
        out.margins.add(margin)
        out.asked = out.asked or sampling.asked()
        for at, ((token, wrong), step, v) in enumerate(zip(checked, steps, draws, strict=True)):
            if token.unrebuilt is not None:
                out.unrebuilt.append(
                    Found(
                        str(record.get("prompt_id")),
                        int(record.get("index") or 0),
                        at,
                        token.unrebuilt,
                    )  # fmt: skip
                )
                continue
            if wrong is not None:
                out.mismatched.append(
                    Found(str(record.get("prompt_id")), int(record.get("index") or 0), at, wrong)
                )
            if token.impossible is not None:
                found = Found(str(record.get("prompt_id")), int(record.get("index") or 0), at,
                              token.impossible)  # fmt: skip
                (out.near_ties if token.near_tie else out.impossible).append(found)
                continue
            low, high = token.bounds(float(v))
            lo.append(low)
            hi.append(high)
            scores.append(step)
            out.exact += token.exact
    out.lo, out.hi = np.array(lo), np.array(hi)
    if scores and all(score is not None for score in scores):
        out.scores = [score for score in scores if score is not None]
        out.colder = [colder_ratio(score, COLDER) for score in out.scores]
    return out


def near_tie_margin(record: Mapping[str, Any], policy: DeterminismSpec) -> float:
    """The near-tie margin (nats) a record is judged at: the policy's where it sets one, else
    the scorer's own as the record states it, else 0 (no near ties without a stated margin)."""
    if policy.scored_near_tie_margin is not None:
        return float(policy.scored_near_tie_margin)
    stated = record.get("near_tie_margin")
    return 0.0 if stated is None or is_missing(stated) else float(stated)


def _covariance(score: TemperatureScore, ratio: TemperatureScore) -> float:
    """The two step functions' covariance at a uniform u (both have mean 0; same edges)."""
    return sum(
        q * a * b for q, a, b in zip(score.widths(), score.values, ratio.values, strict=True)
    )


def _seed_of(record: Mapping[str, Any]) -> int:
    """The seed of one scored output's V: its point, source, role, prompt and index, so a token's
    V is the same whichever other outputs are judged with it, and no two outputs share one."""
    key = "/".join(str(record.get(k)) for k in ("point_id", "source", "role", "prompt_id", "index"))
    return zlib.crc32(key.encode())


def control(rows: Iterable[Mapping[str, Any]], policy: DeterminismSpec) -> dict[str, Any]:
    """The AR point's columns from its own scored samples, whatever their role (`ar`,
    `control`): the false-alarm control's p-value, impossible tokens, near ties and tokens ({}
    with none)."""
    found = scored(rows, policy, ("ar", "control"))
    if not found.positions:
        return {}
    p, _ = found.combined(policy.alpha)
    return {
        "scored_control_p": p,
        "scored_control_tokens": found.positions,
        "scored_control_impossible": len(found.impossible),
        "scored_control_near_ties": len(found.near_ties),
    }


def judge(
    rows: Iterable[Mapping[str, Any]],
    policy: DeterminismSpec,
    role: str = "test",
    *,
    control_point: Mapping[str, Any] | None = None,
) -> tuple[SampledVerdict, dict[str, Any]]:
    """A point's verdict from its `role` samples' scores (module docstring); `control_point`:
    the AR point's columns (`control`), the run's false-alarm control."""
    found = scored(rows, policy, (role,))
    if not found.samples:
        why = "no scored samples" + (
            f": scoring failed ({found.failed[0]})" if found.failed else ""
        )
        return _unproven(why), {}
    p, way = found.combined(policy.alpha)
    power = found.power(policy.alpha)
    own = dict(control_point or {})
    columns = {
        "scored_p": p,
        "scored_direction": way or None,
        "scored_n_tokens": found.tokens,
        "scored_impossible": found.impossible[0].text() if found.impossible else None,
        "scored_impossible_n": len(found.impossible),
        "scored_near_ties": len(found.near_ties),
        "scored_power": power.shift,
        "scored_exact_share": found.exact_share,
        **{c: _number(own.get(c)) for c in CONTROL_COLUMNS},
    }
    return verdict_of(found, p, way, power, own, policy), columns


def verdict_of(
    found: Scored,
    p: float,
    way: str,
    power: ScoredPower,
    control_point: Mapping[str, Any],
    policy: DeterminismSpec,
) -> SampledVerdict:
    """What the scored test's outcome proves, given the run's control (module docstring)."""
    alpha = policy.alpha
    facts = (
        f"{found.positions} tokens of {found.samples} sample(s) scored, "
        f"{_share(found.exact_share)} exact; p = {p:.4g}; {found.margin_text()}"
    )
    if found.mismatched:
        return _unproven(
            f"{facts}; {len(found.mismatched)} token(s)' claimed processed probability and mass "
            "above are not (or cannot be checked to be) the ones rebuilt from its raw logprobs "
            f"at the asked parameters (tolerance {REBUILD_TOLERANCE:g}): the scoring path's "
            f"processing is not shown to be the asked one, first: {found.mismatched[0].text()}"
        )
    control_p = _number(control_point.get("scored_control_p"))
    if control_p is None:
        return _unproven(f"{facts}; no AR control scored the same way, so no false-alarm check")
    other = _other_processors(found, control_point)
    if other:
        return _unproven(
            f"{facts}; the AR control was drawn with other processors ({other}), so no "
            "false-alarm check for these"
        )
    counted = _number(control_point.get("scored_control_impossible"))
    if counted is None:
        return _unproven(f"{facts}; the AR control's impossible-token count is not recorded")
    control_impossible = int(counted)
    # A token of probability 0 needs no statistic: where the AR control, drawn and rebuilt the
    # same way, drew none, the cuts are rebuilt right whatever its score (alarming at alpha) says.
    if (control_p <= alpha and not found.impossible) or control_impossible:
        return _unproven(
            f"{facts}; the AR server's own samples fail the same test (p = {control_p:.4g}, "
            f"{control_impossible} impossible token(s)): the scoring path does not match the "
            "sampler (order, parameters or numerics)"
        )
    ties = _tie_excess(found, control_point)
    if found.impossible or ties:
        shown = (found.impossible or found.near_ties)[0]
        count = len(found.impossible) + (len(found.near_ties) if ties else 0)
        why = f"; {ties}" if ties else ""
        return SampledVerdict(
            "impossible-token", f"{count} impossible token(s), first: {shown.text()}{why}; {facts}"
        )
    if p <= alpha:
        said = {"hotter": "hotter: u pushed up", "colder": "colder: u pushed down"}
        return SampledVerdict(
            "shifted", f"{facts} <= alpha {alpha:g}, {said.get(way, 'the shape of u moved')}"
        )
    if found.unrebuilt:
        return _unproven(
            f"{facts}; {len(found.unrebuilt)} position(s) not tested: the processed distribution "
            f"cannot be rebuilt from what the scorer returned, first: {found.unrebuilt[0].text()}"
        )
    if found.failed:
        return _unproven(
            f"{facts}; {len(found.failed)} sample(s) could not be scored ({found.failed[0]}): a "
            "pass over the others proves nothing of them"
        )
    if power.shift is None or power.shift > policy.scored_max_shift:
        return _unproven(
            f"{facts}; too few tokens to prove anything: {power.text()} (a pass needs "
            f"{policy.scored_max_shift:g} or less; raise determinism.samples)"
        )
    return SampledVerdict("distribution-ok", f"{facts} > alpha {alpha:g}; {power.text()}")


def _other_processors(found: Scored, control_point: Mapping[str, Any]) -> str:
    """How the AR control's request differs from the samples' processors ("" where it does
    not). A control given as its verdict columns alone (no request columns: no temperature)
    states none to compare."""
    if found.asked is None or is_missing(control_point.get("temperature")):
        return ""
    return Sampling.of(control_point).differences(found.asked)


def _tie_excess(found: Scored, control_point: Mapping[str, Any]) -> str:
    """Why the point's near ties count as impossible tokens ("" when they do not): a rate per
    token above the AR control's 95% upper bound."""
    if not found.near_ties:
        return ""
    ties = int(_number(control_point.get("scored_control_near_ties")) or 0)
    tokens = int(_number(control_point.get("scored_control_tokens")) or 0)
    upper = wilson_upper(ties, tokens)
    rate = len(found.near_ties) / found.positions
    if rate <= upper:
        return ""
    return (
        f"{len(found.near_ties)} near ties in {found.positions} tokens ({rate:.2%}), above the "
        f"AR control's {ties} in {tokens} (95% upper bound {upper:.2%}): counted as violations"
    )


def _share(value: float | None) -> str:
    return "no token" if value is None else f"{value:.0%}"


def _unproven(why: str) -> SampledVerdict:
    return SampledVerdict("unproven", why)


def _number(value: Any) -> float | None:
    return None if is_missing(value) else float(value)
