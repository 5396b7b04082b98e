"""How a plan's sampled points (temperature > 0) are proven, and what the proof costs.

`determinism.sampled: auto` resolves per engine from its catalog record (`coupled_sampling`: the
engine's servers are expected to advertise coupled sampling, the bundled runtime's do): coupled
where expected, else `scored` where the engine scores sampled outputs with its own prefill
(`sweeper.proof.scored.catalog`: vLLM, SGLang), else `distribution`. What a server advertises
decides at run time: a server that does not advertise coupling where the plan expected it leaves its
sampled points `unproven`, with what to set instead; one that cannot score is said so too.

Each measured request at temperature > 0 draws its own seed (`measured_seeds`: the same on
its AR twin, so coupling still compares token for token), so every measured output is an
independent draw of the point's distribution. The proof needs `samples` samples of
`sample_length` tokens per prompt (`Provision`: the power the plan states); with `scored`, every
token of every measured output counts toward it (the test's PITs are i.i.d. whatever the
prefix), and seeded samples are drawn beside them only for what the measured tokens lack: a
speculative config its own (role `test`), its AR baseline one set (`control`: scored the same
way, the false-alarm control). `distribution` compares `samples` per prompt from each side,
drawn alike, and counts no measured output: a speculative config draws its own, its AR baseline
two (`ar`, which the test compares with, and `control`, the AR-vs-AR control). Points of one
server config that sample alike (same temperature, top-p, top-k, max tokens, request processors:
`RequestConfig.sampling_key`) at other loads share the first one's samples, as many as the
neediest of them lacks. Where a coupled server scores (the bundled runtime), its measured
sampled requests are scored too: a second proof beside coupling, at no sampling cost.

Who scores: a speculative server its own samples where its engine's prefill never runs the
speculative path and it accepts logprob requests (`Scoring.self_scoring`); otherwise the AR
server, started once more on each host after its speculative configs (`with_scoring_step`).

All of this is resolved once, as the plan is built (`SampledChecks.of`), and each point carries
its part (`SampledChecks.carried`: its check, who scores it, and with `with_samples` the roles
it draws): whoever proves or judges a point reads them from the point, or from the record
columns written from it, never from the spec again.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from sweeper.catalog.records import RECORDS
from sweeper.config import RequestConfig
from sweeper.plan.points import Point, ScoredBy
from sweeper.proof.scored.catalog import SCORING
from sweeper.proof.scored.judge import expected_power
from sweeper.spec import DeterminismSpec, PromptSpec, Spec, WorkloadSpec
from sweeper.spec.model import SampledCheck

#: Sample roles drawn by a speculative point, and by its AR baseline point per check.
SPECULATIVE_ROLES = ("test",)
BASELINE_ROLES = {"scored": ("control",), "distribution": ("ar", "control")}
#: Checks that draw seeded samples.
DRAWING = tuple(BASELINE_ROLES)


@dataclass(frozen=True)
class Provision:
    """What one sampled point's proof needs and where it comes from, per prompt and role:
    `needed` samples of `sample_length` tokens (`determinism.samples`: the power the plan
    states), `provided` of them by its measured requests' tokens (at most: an output that ends
    early gives fewer), `extra` drawn beside them, and `why` (what needs them, what the measured
    requests give). All 0 where the point draws nothing (greedy, coupled, repeats)."""

    needed: int = 0
    provided: int = 0
    extra: int = 0
    why: str = ""


@dataclass(frozen=True)
class SampledChecks:
    """How a plan proves its sampled points (temperature > 0), resolved once from the spec as
    the plan is built (`of`); each point carries its part (`carried`)."""

    #: `determinism.sampled`, `auto` resolved by the engine's catalog records.
    check: SampledCheck = "repeats"
    #: Whether sampled outputs are scored: the scored check, or coupling where the engine
    #: scores too (the second proof beside it).
    scores: bool = False
    #: Whether the AR server scores the speculative points' samples (started once more after
    #: them on each host): the run scores, and the engine's speculative servers do not score
    #: their own (`sweeper.proof.scored.catalog`).
    ar_scores_speculative: bool = False
    #: The roles an AR point draws where sampled points draw seeded samples; () where none
    #: draw.
    baseline_roles: tuple[str, ...] = ()
    #: The workload and policy whose sizes decide how many samples a point needs and its
    #: measured requests give (`provision`).
    workload: WorkloadSpec | None = field(default=None, compare=False)
    policy: DeterminismSpec | None = field(default=None, compare=False)

    @classmethod
    def of(cls, spec: Spec) -> SampledChecks:
        check = _resolved(spec)
        scoring = SCORING.get(spec.runtime.engine)
        scores = check == "scored" or (check == "coupled" and scoring is not None)
        # Samples nothing can be compared with (no AR baseline, no earlier run's) are not
        # drawn for a distribution test; scored samples need none (the AR's are only their
        # control).
        comparable = spec.baseline or bool(spec.runtime.baseline_run)
        draws = check == "scored" or (check == "distribution" and comparable)
        return cls(
            check,
            scores,
            scores and scoring is not None and not scoring.self_scoring,
            BASELINE_ROLES[check] if draws else (),
            spec.workload,
            spec.determinism,
        )

    def provision(self, point: Point, requests: int) -> Provision:
        """How many samples per prompt the point's proof needs, how many its `requests` measured
        requests give and how many it draws beside them (`Provision`). `scored` counts tokens:
        each measured output of a prompt not held (a held one masks EOS where the engine takes
        `min_tokens`, so it does not sample the target's distribution) gives up to its asked
        length; `distribution` counts none (see the module docstring)."""
        rc, policy, workload = point.request_config, self.policy, self.workload
        if rc.temperature <= 0 or self.check not in DRAWING or policy is None or workload is None:
            return Provision()
        n, length = policy.samples, policy.sample_length(rc.max_tokens)
        if self.check == "distribution":
            why = (
                f"distribution: the two-sample test compares {n} samples of {length} tokens per "
                "prompt from each side, drawn alike; measured outputs are not counted"
            )
            return Provision(n, 0, n, why)
        prompts = workload.prompts
        unit = len(prompts) * length
        need, given = n * unit, measured_tokens(prompts, rc, requests)
        extra = max(0, -(-(need - given) // unit))
        why = (
            f"scored: {expected_power(need, policy).text()} needs {n} samples of {length} tokens "
            f"per prompt ({need} tokens); {requests} measured request(s) give up to {given}"
        )
        return Provision(n, min(n, given // unit), extra, why)

    def carried(self, point: Point) -> Point:
        """The point carrying its check: at temperature > 0 the check, and who scores its
        sampled outputs where the run scores them (the AR scoring restart a speculative
        point's, where `ar_scores_speculative`)."""
        if point.request_config.temperature <= 0:
            return point
        scored_by: ScoredBy | None = None
        if self.scores:
            by_ar = point.server_config.mode != "ar" and self.ar_scores_speculative
            scored_by = "ar" if by_ar else "self"
        return replace(point, sampled_check=self.check, scored_by=scored_by)


def _resolved(spec: Spec) -> SampledCheck:
    """The spec's `determinism.sampled`, `auto` resolved by the engine's catalog records."""
    asked = spec.determinism.sampled
    if asked != "auto":
        return asked
    engine = spec.runtime.engine
    if RECORDS[engine].coupled_sampling:
        return "coupled"
    return "scored" if engine in SCORING else "distribution"


def measured_tokens(prompts: Iterable[PromptSpec], rc: RequestConfig, requests: int) -> int:
    """The most tokens `requests` measured requests give as samples: request i carries prompt
    i mod P (`sweeper.measure.drive`), each up to its asked length; a held prompt's none."""
    prompts = list(prompts)
    total = 0
    for number, prompt in enumerate(prompts):
        sent = requests // len(prompts) + (number < requests % len(prompts))
        if not prompt.hold_output:
            total += sent * (prompt.max_tokens or rc.max_tokens)
    return total


#: Where each set of seeds starts: a role's samples, and the measured requests
#: (`measured_seeds`), this far apart.
_STRIDE = 100_000_007
_OFFSETS = {"test": 1, "ar": 2, "control": 3, "measured": 4}
#: A request config's block of measured seeds (of `_MEASURED_BLOCKS`), this many seeds each.
_MEASURED_BLOCK = 100_000
_MEASURED_BLOCKS = 1_000
_SEED_MODULUS = 2**31 - 1


def _start(base: int | None, kind: str) -> int:
    return ((base or 0) % 1_000_003) * 10_007 + _OFFSETS[kind] * _STRIDE


def sample_seeds(base: int | None, role: str, n: int) -> list[int]:
    """N distinct seeds for one role's samples, stable across runs and disjoint between roles
    (a seed shared by two sets would couple them and could hide a shift)."""
    start = _start(base, role)
    return [(start + k) % _SEED_MODULUS for k in range(n)]


def measured_seeds(base: int, rc: RequestConfig, n: int) -> list[int]:
    """The seeds of a point's `n` measured requests at temperature > 0, in request order:
    distinct, `n` choices apart (a request's choice i draws at its seed + i), derived from the
    workload's seed (`base`) and the request config alone, so a resumed run sends the same and
    the AR twin at the same request config the same (the coupled comparison); another request
    config takes another block, and none is a sample's (`sample_seeds`)."""
    per = rc.n or 1
    block = zlib.crc32(rc.id.encode()) % _MEASURED_BLOCKS * _MEASURED_BLOCK
    start = _start(base, "measured") + block
    return [(start + k * per) % _SEED_MODULUS for k in range(n)]


def sampling_notes(
    spec: Spec,
    checks: SampledChecks,
    provisions: Sequence[Provision],
    drawing: int,
    samples: int,
) -> list[str]:
    """What a plan's reader must know about its sampled points: how they are proven (`checks`),
    what that costs, and when they cannot be (`provisions`: what each sampled speculative point
    needs, its measured requests give and it draws beside them; `drawing` of them draw samples,
    `samples` in all)."""
    sampled_points = len(provisions)
    if not sampled_points:
        return []
    check = checks.check
    policy, seed = spec.determinism, spec.workload.seed
    head = f"{sampled_points} sampled speculative point(s) (temperature > 0)"
    if check == "repeats":
        return [
            f"{head}: determinism.sampled: repeats: only their repeats are compared, which "
            "proves determinism only (disagreeing repeats: nondeterministic); whether they "
            "sample from the target's distribution is not checked, so they will be unproven"
        ]
    notes = []
    if not spec.baseline and not spec.runtime.baseline_run:
        if check != "scored":
            notes.append(
                f"{head}: no AR baseline (baseline: false, no runtime.baseline_run): nothing "
                "to compare them with, so they will be unproven"
            )
        elif checks.ar_scores_speculative:
            notes.append(
                f"{head}: no AR baseline (baseline: false): no AR server to score their "
                "samples, so they will be unproven"
            )
        else:
            notes.append(
                f"{head}: no AR baseline (baseline: false): their samples are scored, but no "
                "AR samples are scored beside them as the false-alarm control"
            )
    if check == "coupled" and not RECORDS[spec.runtime.engine].coupled_sampling:
        notes.append(
            f"{head}: determinism.sampled: coupled, but {spec.runtime.engine} servers are not "
            "expected to advertise coupled sampling (rejection sampling): unless a server does, "
            "its sampled points will be unproven; distribution proves them"
        )
    if check == "coupled":
        expected = "the engine's servers advertise" if spec.determinism.sampled == "auto" else ""
        said = f" ({expected} coupled sampling; each server's own advertisement is checked)"
        if seed is None:
            notes.append(
                f"{head}: coupled, but workload.seed is unset: without one seed for both sides "
                "nothing can be compared token for token, so they will be unproven; set "
                "workload.seed"
            )
        else:
            notes.append(
                f"{head}: coupled: each output compared token for token with the AR baseline's "
                f"at the same seed (each sampled measured request draws its own from seed "
                f"{seed}){said if expected else ''}; no samples drawn"
            )
        return notes
    if check == "scored":
        notes.append(scored_note(spec, checks, head, provisions, drawing, samples))
        return notes
    notes.append(
        f"{head}: distribution: {drawing} of them draw {policy.samples} seeded samples per "
        f"prompt (AR baselines twice: the test's and the AR-vs-AR control's), {samples} "
        f"samples of up to {policy.sample_length(spec.workload.max_tokens)} tokens in all, "
        f"{policy.sample_concurrency} in flight; points at other loads share them; measured "
        "outputs are not counted (the two-sample test compares samples drawn alike from each "
        "side)"
    )
    return notes


def _span(values: Iterable[int]) -> str:
    """`7`, or `5 to 7` where the points differ."""
    seen = list(values)
    low, high = min(seen), max(seen)
    return f"{low}" if low == high else f"{low} to {high}"


def scored_note(
    spec: Spec,
    checks: SampledChecks,
    head: str,
    provisions: Sequence[Provision],
    drawing: int,
    samples: int,
) -> str:
    """The scored check's plan note: what the proof needs, what the measured requests give, what
    is drawn beside them, who scores it, what that costs."""
    policy, engine = spec.determinism, spec.runtime.engine
    scoring = SCORING.get(engine)
    if scoring is None:
        return (
            f"{head}: scored, but {engine} has no scoring path (sweeper/proof/scored/catalog.py): "
            "they will be unproven; distribution proves them"
        )
    how = (
        "the processed distribution itself (exact)"
        if scoring.basis == "exact"
        else f"raw logprobs of each token and its top {scoring.top_k}"
    )
    if checks.ar_scores_speculative:
        who = (
            "scored by the AR server, started once more on each host after the speculative "
            f"configs ({scoring.self_scoring_why})"
        )
    else:
        who = "each server scores its own samples; the AR point's are its false-alarm control"
    length = policy.sample_length(spec.workload.max_tokens)
    prompts = len(spec.workload.prompts)
    power = expected_power(prompts * policy.samples * length, policy).text()
    extra = _span(p.extra for p in provisions)
    drawn = (
        f"so {extra} per prompt drawn beside them ({drawing} of them draw, AR baselines once: "
        f"the false-alarm control; points at other loads share them), {samples} samples of up "
        f"to {length} tokens"
        if samples
        else "so none are drawn"
    )
    return (
        f"{head}: scored: each sampled measured request draws its own seed and is scored; the "
        f"proof needs {policy.samples} samples of {length} tokens per prompt (the power the "
        f"point must state: {power}); measured requests give up to "
        f"{_span(p.provided for p in provisions)} per prompt, {drawn}; every output scored by "
        f"one prefill ({how}); {who}; two scorers of the same AR outputs must agree within "
        f"{policy.score_agreement:g} per token"
    )
