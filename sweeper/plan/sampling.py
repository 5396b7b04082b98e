"""How a plan's sampled points (temperature > 0) are proven, and what the proof costs.

`determinism.sampled: auto` resolves per engine from its catalog record (`coupled_sampling`: the
engine's servers are expected to advertise coupled sampling, the bundled runtime's do): coupled
where expected, else `distribution`. What a server advertises decides at run time: a server
that does not advertise coupling where the plan expected it leaves its sampled points
`unproven`, with what to set instead.

With `distribution`, a point draws seeded samples (`samples` per prompt): a speculative config
its own (role `test`), its AR baseline two sets (`ar`, which the test compares with, and
`control`, the AR-vs-AR control). Points of one server config that sample alike (same
temperature, top-p, top-k, max tokens: `RequestConfig.sampling_key`) at other loads share the
first one's samples.
"""

from __future__ import annotations

from sweeper.catalog.records import RECORDS
from sweeper.spec import Spec
from sweeper.spec.model import SampledCheck

#: Sample roles drawn by a speculative point and by its AR baseline point.
SPECULATIVE_ROLES = ("test",)
BASELINE_ROLES = ("ar", "control")


def sampled_check(spec: Spec) -> SampledCheck:
    """The spec's `determinism.sampled`, `auto` resolved by the engine's catalog record."""
    asked = spec.determinism.sampled
    if asked != "auto":
        return asked
    return "coupled" if RECORDS[spec.runtime.engine].coupled_sampling else "distribution"


def sample_seeds(base: int | None, role: str, n: int) -> list[int]:
    """N distinct seeds for one role's samples, stable across runs and disjoint between roles
    (a seed shared by two sets would couple them and could hide a shift)."""
    offset = {"test": 1, "ar": 2, "control": 3}[role]
    start = ((base or 0) % 1_000_003) * 10_007 + offset * 100_000_007
    return [(start + k) % (2**31 - 1) for k in range(n)]


def sampling_notes(spec: Spec, sampled_points: int, drawing: int, samples: int) -> list[str]:
    """What a plan's reader must know about its sampled points: how they are proven, what that
    costs, and when they cannot be (`sampled_points` at temperature > 0, `drawing` of them
    draw samples, `samples` in all)."""
    if not sampled_points:
        return []
    check = sampled_check(spec)
    policy, seed = spec.determinism, spec.workload.seed
    head = f"{sampled_points} sampled speculative point(s) (temperature > 0)"
    if check == "repeats":
        return [
            f"{head}: determinism.sampled: repeats: only their repeats are compared; whether "
            "they sample from the target's distribution is not checked"
        ]
    notes = []
    if not spec.baseline and not spec.runtime.baseline_run:
        notes.append(
            f"{head}: no AR baseline (baseline: false, no runtime.baseline_run): nothing to "
            "compare them with, so they will be unproven"
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
    notes.append(
        f"{head}: distribution: {drawing} of them draw {policy.samples} seeded samples per "
        f"prompt (AR baselines twice: the test's and the AR-vs-AR control's), {samples} "
        f"samples of up to {policy.sample_length(spec.workload.max_tokens)} tokens in all, "
        f"{policy.sample_concurrency} in flight; points at other loads share them"
    )
    return notes
