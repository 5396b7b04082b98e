"""How a plan's sampled points (temperature > 0) are proven, and what the proof costs.

`determinism.sampled: auto` resolves per engine from its catalog record (`coupled_sampling`: the
engine's servers are expected to advertise coupled sampling, the bundled runtime's do): coupled
where expected, else `scored` where the engine scores sampled outputs with its own prefill
(`sweeper.proof.scored.catalog`: vLLM, SGLang), else `distribution`. What a server advertises
decides at run time: a server that does not advertise coupling where the plan expected it leaves its
sampled points `unproven`, with what to set instead; one that cannot score is said so too.

With `scored` or `distribution`, a point draws seeded samples (`samples` per prompt): a
speculative config its own (role `test`); its AR baseline, for `scored`, one set (`control`:
scored the same way, the false-alarm control), for `distribution` two (`ar`, which the test
compares with, and `control`, the AR-vs-AR control). Points of one server config that sample
alike (same temperature, top-p, top-k, max tokens, request processors:
`RequestConfig.sampling_key`) at other loads share the first one's samples. Where a coupled
server scores (the bundled runtime), its measured sampled requests are scored too: a second
proof beside coupling, at no sampling cost.

Who scores: a speculative server its own samples where its engine's prefill never runs the
speculative path and it accepts logprob requests (`Scoring.self_scoring`); otherwise the AR
server, started once more on each host after its speculative configs (`with_scoring_step`).

All of this is resolved once, as the plan is built (`SampledChecks.of`), and each point carries
its part (`SampledChecks.carried`: its check, who scores it, and with `with_samples` the roles
it draws): whoever proves or judges a point reads them from the point, or from the record
columns written from it, never from the spec again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sweeper.catalog.records import RECORDS
from sweeper.plan.points import Point, ScoredBy
from sweeper.proof.scored.catalog import SCORING
from sweeper.spec import Spec
from sweeper.spec.model import SampledCheck

#: Sample roles drawn by a speculative point, and by its AR baseline point per check.
SPECULATIVE_ROLES = ("test",)
BASELINE_ROLES = {"scored": ("control",), "distribution": ("ar", "control")}
#: Checks that draw seeded samples.
DRAWING = tuple(BASELINE_ROLES)


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
        )

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


def sample_seeds(base: int | None, role: str, n: int) -> list[int]:
    """N distinct seeds for one role's samples, stable across runs and disjoint between roles
    (a seed shared by two sets would couple them and could hide a shift)."""
    offset = {"test": 1, "ar": 2, "control": 3}[role]
    start = ((base or 0) % 1_000_003) * 10_007 + offset * 100_000_007
    return [(start + k) % (2**31 - 1) for k in range(n)]


def sampling_notes(
    spec: Spec, checks: SampledChecks, sampled_points: int, drawing: int, samples: int
) -> list[str]:
    """What a plan's reader must know about its sampled points: how they are proven (`checks`),
    what that costs, and when they cannot be (`sampled_points` at temperature > 0, `drawing` of
    them draw samples, `samples` in all)."""
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
                f"at seed {seed}{said if expected else ''}"
            )
        return notes
    if check == "scored":
        notes.append(scored_note(spec, checks, head, drawing, samples))
        return notes
    notes.append(
        f"{head}: distribution: {drawing} of them draw {policy.samples} seeded samples per "
        f"prompt (AR baselines twice: the test's and the AR-vs-AR control's), {samples} "
        f"samples of up to {policy.sample_length(spec.workload.max_tokens)} tokens in all, "
        f"{policy.sample_concurrency} in flight; points at other loads share them"
    )
    return notes


def scored_note(spec: Spec, checks: SampledChecks, head: str, drawing: int, samples: int) -> str:
    """The scored check's plan note: what is drawn, who scores it, what that costs."""
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
    return (
        f"{head}: scored: {drawing} of them draw {policy.samples} seeded samples per prompt "
        f"(AR baselines once: the false-alarm control), {samples} samples of up to "
        f"{policy.sample_length(spec.workload.max_tokens)} tokens, each scored by one prefill "
        f"({how}); {who}; two scorers of the same AR samples must agree within "
        f"{policy.score_agreement:g} per token"
    )
