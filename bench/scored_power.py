"""The scored test's power table: detection rates of planted faults and false alarms of the AR
server scored against itself, beside the distribution test at the same N.

Pools come from `bench/scored_pools.py` (the bundled runtime in process, smollm2-135m,
temperature 0.7, n-gram drafts, DDTree b16 k4, faults planted on drafted positions; every sample
scored by the target's own prefill). A draw takes N samples per prompt at random from a pool
(without replacement within the draw); the scored verdict is the product's own
(`sweeper.proof.scored.judge`, the AR control from another draw of the AR pool through
`control`), on the exact basis (as the runtime's route scores) and on the top-k basis (what a
vLLM or SGLang scorer returning 20 logprobs gives). The distribution test
(`sweeper.proof.distribution.two_sample_test`) gets N from the fault's pool against N from the
AR pool at the same sampling parameters. Draws reuse their pools, so the rates are estimates,
not independent experiments.

    python bench/scored_power.py [--pools DIR] [--n 8,16,32,96] [--draws 30]
        [--alarm-draws 100] [--distribution] [--basis exact,topk]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sweeper.proof.distribution import two_sample_test
from sweeper.proof.scored import control, judge
from sweeper.proof.verdicts import VIOLATIONS
from sweeper.spec import DeterminismSpec

ORDER = ["temperature", "top_k", "top_p"]  # the runtime's (`processed_probs`)
#: (row label, pool file stem, its AR pool's stem)
FAULTS = (
    ("drafted positions 1.6x hotter (`hot_drafts`)", "hot-hot_drafts-t0.7-p1.0-s500000000", "ar1"),
    ("top-p 0.9 ignored on drafted positions (`untruncated_drafts`)",
     "untrunc-untruncated_drafts-t0.7-p0.9-s700000000", "ar09"),
    ("drafted positions 0.6x colder (`cold_drafts`)", "cold-cold_drafts-t0.7-p1.0-s600000000",
     "ar1"),
)  # fmt: skip
AR = {"ar1": "ar-none-t0.7-p1.0-s0", "ar09": "ar-none-t0.7-p0.9-s100000000"}


class Pool:
    """One pool's samples and scores, per prompt."""

    def __init__(self, path: Path, temperature: float, top_p: float) -> None:
        data = np.load(path)
        self.data = {k: data[k] for k in data.files}
        self.prompts = [str(p) for p in self.data["prompts"]]
        self.temperature, self.top_p = temperature, top_p

    @property
    def size(self) -> int:
        return int(self.data["length"].shape[1])

    def ids(self, prompt: int, sample: int) -> list[int]:
        n = int(self.data["length"][prompt, sample])
        return [int(t) for t in self.data["token"][prompt, sample, :n]]

    def record(self, prompt: int, sample: int, basis: str, role: str, point: str) -> dict[str, Any]:
        d = self.data
        positions = []
        for t in range(int(d["length"][prompt, sample])):
            top = list(zip(d["top_ids"][prompt, sample, t].tolist(),
                           d["top_lp"][prompt, sample, t].tolist(), strict=True))  # fmt: skip
            position: dict[str, Any] = {
                "token": int(d["token"][prompt, sample, t]),
                "logprob": float(d["logprob"][prompt, sample, t]),
                "rank": int(d["rank"][prompt, sample, t]),
                "top": top,
            }
            if basis == "exact":
                gap = float(d["gap"][prompt, sample, t])
                position |= {
                    "p": float(d["p"][prompt, sample, t]),
                    "above": float(d["above"][prompt, sample, t]),
                    "gap": None if np.isnan(gap) else gap,
                }
            positions.append(position)
        return {
            "point_id": point,
            "role": role,
            "prompt_id": self.prompts[prompt],
            "index": sample,
            "scorer": "self",
            "basis": basis,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": None,
            "min_p": None,
            "order": ORDER,
            "k": len(positions[0]["top"]) if positions else None,
            "positions": positions,
            "error": None,
        }

    def records(
        self, picks: Sequence[np.ndarray], basis: str, role: str, point: str
    ) -> list[dict[str, Any]]:
        return [
            self.record(prompt, int(s), basis, role, point)
            for prompt, chosen in enumerate(picks)
            for s in chosen
        ]

    def samples(self, picks: Sequence[np.ndarray]) -> dict[str, list[list[int]]]:
        return {
            self.prompts[prompt]: [self.ids(prompt, int(s)) for s in chosen]
            for prompt, chosen in enumerate(picks)
        }


def picks(pool: Pool, n: int, rng: np.random.Generator, parts: int = 1) -> list[list[np.ndarray]]:
    """`parts` disjoint draws of n samples per prompt."""
    orders = [rng.permutation(pool.size) for _ in pool.prompts]
    return [[o[k * n : (k + 1) * n] for o in orders] for k in range(parts)]


def scored_verdict(
    test: Pool, ar: Pool, n: int, basis: str, rng: np.random.Generator, policy: DeterminismSpec
) -> tuple[str, dict[str, Any]]:
    """One draw's scored verdict: N from `test` against the AR control from N of `ar` (when the
    test is the AR pool itself, two disjoint draws of it)."""
    if test is ar:
        mine, theirs = picks(ar, n, rng, parts=2)
    else:
        mine, theirs = picks(test, n, rng)[0], picks(ar, n, rng)[0]
    control_point = control(ar.records(theirs, basis, "ar", "ar"), policy)
    verdict, columns = judge(
        test.records(mine, basis, "test", f"draw-{rng.integers(1 << 30)}"),
        policy,
        control_point=control_point,
    )
    return verdict.verdict, columns


def distribution_found(
    test: Pool, ar: Pool, n: int, rng: np.random.Generator, alpha: float, seed: int
) -> bool:
    if test is ar:
        x, y = picks(ar, n, rng, parts=2)
    else:
        x, y = picks(test, n, rng)[0], picks(ar, n, rng)[0]
    found = two_sample_test(test.samples(x), ar.samples(y), seed=seed)
    return found is not None and found.p_value <= alpha


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=Path, default=Path(".cache/scored-power"))
    parser.add_argument("--suffix", default="-l24-k20.npz")
    parser.add_argument("--n", default="8,16,32,96")
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--alarm-draws", type=int, default=100)
    parser.add_argument("--basis", default="exact,topk")
    parser.add_argument("--distribution", action="store_true", help="also today's test")
    parser.add_argument("--only", default="", help="only the fault rows whose label holds this")
    parser.add_argument("--seed", type=int, default=0, help="draws from another seed")
    parser.add_argument("--no-alarms", dest="alarms", action="store_false")
    args = parser.parse_args()
    policy = DeterminismSpec()
    sizes = [int(n) for n in args.n.split(",")]
    bases = args.basis.split(",")

    def load(stem: str, top_p: float) -> Pool | None:
        found = sorted(args.pools.glob(f"{stem}-n*{args.suffix}"))
        return Pool(found[-1], 0.7, top_p) if found else None

    ars = {"ar1": load(AR["ar1"], 1.0), "ar09": load(AR["ar09"], 0.9)}
    rows = [
        (label, load(stem, 0.9 if ar == "ar09" else 1.0), ars[ar], args.draws)
        for label, stem, ar in FAULTS
        if args.only in label
    ]
    rows += [
        ("false alarms: AR scored against itself (top-p 1.0)", ars["ar1"], ars["ar1"],
         args.alarm_draws),
        ("false alarms: AR scored against itself (top-p 0.9)", ars["ar09"], ars["ar09"],
         args.alarm_draws),
    ] if args.alarms else []  # fmt: skip
    head = ["shift, temperature 0.7, 4 prompts x 24 tokens"]
    for n in sizes:
        head += [f"N = {n}: {b}" for b in bases] + (["distribution"] if args.distribution else [])
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for label, test, ar, draws in rows:
        if test is None or ar is None:
            print(f"| {label} | (no pool in {args.pools}) |")
            continue
        cells = [label]
        for n in sizes:
            if n > test.size or (test is ar and 2 * n > ar.size):
                cells += [""] * (len(bases) + args.distribution)
                continue
            started = time.perf_counter()
            for basis in bases:
                rng = np.random.default_rng(args.seed + n)
                verdicts = [
                    scored_verdict(test, ar, n, basis, rng, policy)[0] for _ in range(draws)
                ]
                hits = sum(v in VIOLATIONS for v in verdicts)
                unproven = sum(v == "unproven" for v in verdicts)
                cells.append(f"{hits}/{draws}" + (f" ({unproven} unproven)" if unproven else ""))
            if args.distribution:
                rng = np.random.default_rng(args.seed + 1000 + n)
                hits = sum(
                    distribution_found(test, ar, n, rng, policy.alpha, seed)
                    for seed in range(draws)
                )
                cells.append(f"{hits}/{draws}")
            print(f"  [{label} N={n}: {time.perf_counter() - started:.0f} s]", flush=True)
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
