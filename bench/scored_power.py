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
not independent experiments. An oracle pool (`bench/scored_pools.py --oracle`, drafted from the
AR pool's samples) is drawn on its AR pool's seeds, so its sample k is coupled to the AR pool's
sample k: its draws' AR samples take none of the test's seeds (`paired`).

    python bench/scored_power.py [--pools DIR] [--n 8,16,32,96] [--draws 30]
        [--alarm-draws 100] [--distribution] [--basis exact,topk] [--outside] [--only TEXT]
        [--rows TEXT]

`--whole K`: each alarm row first judges its whole pool as one point, K randomizations of u.
`--outside`: each cell also says in how many draws a token the request's truncation removes
(p = 0) was drawn, and how many of those were judged `impossible-token`; and, on the alarm rows,
how many near ties the draws held (within the scorer's margin, nats: the catalog's). `--only`
keeps the fault rows whose label holds its text (the alarm rows stay); `--rows` keeps only the
rows, fault or alarm, whose label holds its text (`--rows "min-p 0.1"`: the min-p alarm row).
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sweeper.engines.base import RequestSpec
from sweeper.engines.capabilities import near_tie_margin, scored_under
from sweeper.proof.distribution import two_sample_test
from sweeper.proof.scored.catalog import SCORING
from sweeper.proof.scored.judge import control, judge, scored
from sweeper.proof.verdicts import VIOLATIONS
from sweeper.results.scores import ScoreRecord
from sweeper.spec import DeterminismSpec

#: The engine whose scores these are: the bundled runtime's.
ENGINE = "ddtree_runtime"
#: (row label, pool file stem, its AR pool's key: the fault's pool has its sampling settings)
FAULTS = (
    ("drafted positions 1.6x hotter (`hot_drafts`)", "hot-hot_drafts-t0.7-p1.0-s500000000", "ar1"),
    ("top-p 0.9 ignored on drafted positions (`untruncated_drafts`)",
     "untrunc-untruncated_drafts-t0.7-p0.9-s700000000", "ar09"),
    ("drafted positions 0.6x colder (`cold_drafts`)", "cold-cold_drafts-t0.7-p1.0-s600000000",
     "ar1"),
    ("top-k 20 ignored on drafted positions (`untruncated_drafts`)",
     "utk-untruncated_drafts-t0.7-p1.0-s800000000-tk20", "ark20"),
    ("min-p 0.1 ignored on drafted positions (`min_p_drafts_ignored`)",
     "mpd-min_p_drafts_ignored-t0.7-p1.0-s1100000000-mp0.1", "armp01"),
    ("frequency penalty 0.5 ignored on drafted paths (`penalty_committed_only`)",
     "fpc-penalty_committed_only-t0.7-p1.0-s1200000000-fp0.5", "arfp05"),
    ("frequency penalty 0.5 over the whole tree (`penalty_whole_tree`)",
     "fpw-penalty_whole_tree-t0.7-p1.0-s1300000000-fp0.5", "arfp05"),
    ("repetition penalty 1.3 ignored on drafted paths (`penalty_committed_only`)",
     "rpc-penalty_committed_only-t0.7-p1.0-s1500000000-rp1.3", "arrp13"),
    ("repetition penalty 1.3 ignored on drafted nodes (`penalties_drafts_ignored`)",
     "rpd-penalties_drafts_ignored-t0.7-p1.0-s1700000000-rp1.3", "arrp13"),
    ("logit bias -5 on ',' ignored on drafted positions (`logit_bias_drafts_ignored`)",
     "lbd-logit_bias_drafts_ignored-t0.7-p1.0-s1400000000-lb28=-5.0", "arlb"),
    ("repetition penalty 1.3 ignored on drafted nodes (`penalties_drafts_ignored`), oracle drafts",
     "rpdo-penalties_drafts_ignored-t0.7-p1.0-s1600000000-rp1.3-oracle", "arrp13"),
    ("repetition penalty 1.3 ignored on drafted paths (`penalty_committed_only`), oracle drafts",
     "rpco-penalty_committed_only-t0.7-p1.0-s1600000000-rp1.3-oracle", "arrp13"),
    ("repetition penalty 1.3 over the whole tree (`penalty_whole_tree`), oracle drafts",
     "rpwo-penalty_whole_tree-t0.7-p1.0-s1600000000-rp1.3-oracle", "arrp13"),
    ("repetition penalty 1.3 over the whole batch (`penalty_whole_batch`), oracle drafts",
     "rpbo-penalty_whole_batch-t0.7-p1.0-s1600000000-rp1.3-oracle", "arrp13"),
)  # fmt: skip
#: The logit bias of the logit-bias rows: -5 on ',' (token 28), a token every prompt draws
#: often, so the bias moves the distribution at temperature 0.7.
LOGIT_BIAS = {28: -5.0}


@dataclass(frozen=True)
class Settings:
    """What a pool's samples were drawn with (its spec in `bench/scored_pools.py`)."""

    top_p: float = 1.0
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    logit_bias: dict[int, float] | None = None


#: AR pools: key -> (file stem, settings).
AR = {
    "ar1": ("ar-none-t0.7-p1.0-s0", Settings()),
    "ar09": ("ar-none-t0.7-p0.9-s100000000", Settings(top_p=0.9)),
    "ark20": ("ar-none-t0.7-p1.0-s200000000-tk20", Settings(top_k=20)),
    "armp01": ("ar-none-t0.7-p1.0-s300000000-mp0.1", Settings(min_p=0.1)),
    "arfp05": ("ar-none-t0.7-p1.0-s900000000-fp0.5", Settings(frequency_penalty=0.5)),
    "arlb": ("ar-none-t0.7-p1.0-s1000000000-lb28=-5.0", Settings(logit_bias=LOGIT_BIAS)),
    "arrp13": ("ar-none-t0.7-p1.0-s1600000000-rp1.3", Settings(repetition_penalty=1.3)),
}
#: The alarm rows: (what the AR control's samples were drawn with, its AR pool's key).
ALARMS = (
    ("top-p 1.0", "ar1"),
    ("top-p 0.9", "ar09"),
    ("top-k 20", "ark20"),
    ("min-p 0.1", "armp01"),
    ("frequency penalty 0.5", "arfp05"),
    ("logit bias -5 on ','", "arlb"),
    ("repetition penalty 1.3", "arrp13"),
)


#: The pool arrays that are per prompt, not per sample (the others join along samples).
SHARED = ("prompts", "prompt_ids")


class Pool:
    """One pool's samples and scores, per prompt."""

    def __init__(self, paths: Sequence[Path], temperature: float, settings: Settings) -> None:
        parts = [np.load(path) for path in paths]
        #: The seed base the samples were drawn from (sample k's seed is the base plus k, per
        #: prompt): pools on one base are coupled sample by sample (the runtime's sampler is).
        self.seed = int(re.findall(r"-s(\d+)-", paths[0].name)[0])
        self.data = {
            k: parts[0][k] if k in SHARED else np.concatenate([part[k] for part in parts], axis=1)
            for k in parts[0].files
        }
        self.prompts = [str(p) for p in self.data["prompts"]]
        self.temperature, self.settings = temperature, settings
        #: The runtime's processing order, as the catalog (and its /score) states it.
        self.order = list(SCORING[ENGINE].order(None, settings.min_p))
        self._records: dict[tuple[int, int, str], dict[str, Any]] = {}

    @property
    def size(self) -> int:
        return int(self.data["length"].shape[1])

    def ids(self, prompt: int, sample: int) -> list[int]:
        n = int(self.data["length"][prompt, sample])
        return [int(t) for t in self.data["token"][prompt, sample, :n]]

    def record(self, prompt: int, sample: int, basis: str, role: str, point: str) -> dict[str, Any]:
        """The sample's score as the product records it (`ScoreRecord`, its columns filled by
        the product's own `scored_under`), for `point` and `role`."""
        key = (prompt, sample, basis)
        if key not in self._records:
            self._records[key] = self._scored(prompt, sample, basis)
        return self._records[key] | {"point_id": point, "role": role}

    def _scored(self, prompt: int, sample: int, basis: str) -> dict[str, Any]:
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
                # Pools drawn before the runtime returned `boundary` have none: no near ties.
                boundary = float(d["boundary"][prompt, sample, t]) if "boundary" in d else np.nan
                position |= {
                    "p": float(d["p"][prompt, sample, t]),
                    "above": float(d["above"][prompt, sample, t]),
                    "gap": None if np.isnan(gap) else gap,
                    "boundary": None if np.isnan(boundary) else boundary,
                }
                # The raw logits' log-sum-exp, which only the runtime's exact route returns.
                if "logsumexp" in d:
                    position["logsumexp"] = float(d["logsumexp"][prompt, sample, t])
            positions.append(position)
        ids = d.get("prompt_ids")
        settings = self.settings
        spec = RequestSpec(
            prompt_id=self.prompts[prompt],
            prompt="",
            max_tokens=len(positions),
            temperature=self.temperature,
            top_p=settings.top_p,
            top_k=settings.top_k,
            min_p=settings.min_p,
            repetition_penalty=settings.repetition_penalty,
            frequency_penalty=settings.frequency_penalty,
            presence_penalty=settings.presence_penalty,
            logit_bias=tuple(sorted(settings.logit_bias.items())) if settings.logit_bias else None,
        )
        return ScoreRecord(
            run_id="bench",
            host="local",
            point_id="",
            attempt="0",
            role="",
            prompt_id=spec.prompt_id,
            index=sample,
            scorer="self",
            basis=basis,  # type: ignore[arg-type]
            temperature=spec.temperature,
            top_p=spec.top_p,
            top_k=spec.top_k,
            **scored_under(ENGINE, spec),
            near_tie_margin=near_tie_margin(ENGINE),
            order=self.order,
            k=len(positions[0]["top"]) if positions else None,
            positions=positions,  # type: ignore[arg-type]
            prompt_token_ids=None if ids is None else [int(t) for t in ids[prompt] if t >= 0],
        ).model_dump()

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


def pool_parts(pools: Path, stem: str, suffix: str) -> list[Path]:
    """A pool's files, joined: from sample 0 (the largest file starting there), each next one
    starting where the last ended (`bench/scored_pools.py --first`); [] without one."""
    found: dict[int, list[tuple[int, Path]]] = {}
    for path in pools.glob(f"{stem}-*{suffix}"):
        part = re.fullmatch(re.escape(stem) + r"(?:-from(\d+))?-n(\d+)" + re.escape(suffix),
                            path.name)  # fmt: skip
        if part:
            found.setdefault(int(part[1] or 0), []).append((int(part[2]), path))
    chain: list[Path] = []
    start = 0
    while start in found:
        size, path = max(found[start])
        chain.append(path)
        start += size
    return chain


def picks(pool: Pool, n: int, rng: np.random.Generator, parts: int = 1) -> list[list[np.ndarray]]:
    """`parts` disjoint draws of n samples per prompt."""
    orders = [rng.permutation(pool.size) for _ in pool.prompts]
    return [[o[k * n : (k + 1) * n] for o in orders] for k in range(parts)]


def paired(
    test: Pool, ar: Pool, n: int, rng: np.random.Generator
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """N samples per prompt from `test` and N from `ar`. The AR pool against itself: two
    disjoint draws of it. A pool drawn on the AR pool's seeds (coupled to it sample by sample,
    an oracle pool drafting the AR samples): the AR draw takes none of the test's seeds, so the
    control is independent of the test. Else independent draws."""
    if test is ar:
        mine, theirs = picks(ar, n, rng, parts=2)
        return mine, theirs
    mine = picks(test, n, rng)[0]
    if test.seed != ar.seed:
        return mine, picks(ar, n, rng)[0]
    rest = [np.setdiff1d(np.arange(ar.size), chosen) for chosen in mine]
    return mine, [rng.choice(left, n, replace=False) for left in rest]


def scored_verdict(
    test: Pool, ar: Pool, n: int, basis: str, rng: np.random.Generator, policy: DeterminismSpec
) -> tuple[str, dict[str, Any]]:
    """One draw's scored verdict: N from `test` against the AR control from N of `ar`
    (`paired`)."""
    mine, theirs = paired(test, ar, n, rng)
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
    x, y = paired(test, ar, n, rng)
    found = two_sample_test(test.samples(x), ar.samples(y), seed=seed)
    return found is not None and found.p_value <= alpha


def outside(judged: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """How many draws drew a p = 0 token, how many of those were `impossible-token`, and the
    near ties all the draws held (`--outside`)."""
    drew = [(v, c) for v, c in judged if c.get("scored_impossible_n") or c.get("scored_near_ties")]
    caught = sum(v == "impossible-token" for v, _ in drew)
    ties = sum(int(c.get("scored_near_ties") or 0) for _, c in judged)
    return f" [p = 0 drawn in {len(drew)}, {caught} of them impossible-token; {ties} near ties]"


def whole(pool: Pool, basis: str, policy: DeterminismSpec, ways: int) -> str:
    """The whole pool judged as one point, its parts' p-values under `ways` randomizations of u
    within the tokens' intervals (the point's seed): where a rebuild error or a sampler that
    drew from another distribution would show most, free of the draws' dependence."""
    everything = [np.arange(pool.size)] * len(pool.prompts)
    parts = []
    for way in range(ways):
        found = scored(pool.records(everything, basis, "test", f"whole-{way}"), policy, ("test",))
        hot, cold, shape = found.p_values(policy.alpha)
        parts.append(f"{hot:.3g} / {cold:.3g} / {shape:.3g}")
    tokens = sum(int(n) for n in pool.data["length"].ravel())
    return f"{pool.size} per prompt, {tokens} tokens: hotter / colder / shape p " + ", ".join(parts)


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
    parser.add_argument("--rows", default="", help="only the rows (any) whose label holds this")
    parser.add_argument("--seed", type=int, default=0, help="draws from another seed")
    parser.add_argument("--no-alarms", dest="alarms", action="store_false")
    parser.add_argument("--outside", action="store_true", help="p = 0 draws and near ties too")
    parser.add_argument("--whole", type=int, default=0, help="alarm rows: the whole pool, K ways")
    args = parser.parse_args()
    policy = DeterminismSpec()
    sizes = [int(n) for n in args.n.split(",")]
    bases = args.basis.split(",")

    def load(stem: str, ar: str) -> Pool | None:
        found = pool_parts(args.pools, stem, args.suffix)
        return Pool(found, 0.7, AR[ar][1]) if found else None

    ars = {key: load(stem, key) for key, (stem, *_) in AR.items()}
    rows = [
        (label, load(stem, ar), ars[ar], args.draws)
        for label, stem, ar in FAULTS
        if args.only in label
    ]
    rows += [
        (f"false alarms: AR scored against itself ({what})", ars[key], ars[key], args.alarm_draws)
        for what, key in ALARMS
        if args.alarms
    ]
    rows = [row for row in rows if args.rows in row[0]]
    head = ["shift, temperature 0.7, 4 prompts x 24 tokens"]
    for n in sizes:
        head += [f"N = {n}: {b}" for b in bases] + (["distribution"] if args.distribution else [])
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for label, test, ar, draws in rows:
        if test is None or ar is None:
            print(f"| {label} | (no pool in {args.pools}) |")
            continue
        if test is ar and args.whole:
            print(f"  [{label}: the whole pool, {whole(ar, bases[0], policy, args.whole)}]")
        cells = [label]
        for n in sizes:
            coupled = test is ar or test.seed == ar.seed
            if n > test.size or (coupled and 2 * n > ar.size):
                cells += [""] * (len(bases) + args.distribution)
                continue
            started = time.perf_counter()
            for basis in bases:
                rng = np.random.default_rng(args.seed + n)
                judged = [scored_verdict(test, ar, n, basis, rng, policy) for _ in range(draws)]
                verdicts = [v for v, _ in judged]
                hits = sum(v in VIOLATIONS for v in verdicts)
                unproven = sum(v == "unproven" for v in verdicts)
                cell = f"{hits}/{draws}" + (f" ({unproven} unproven)" if unproven else "")
                cells.append(cell + (outside(judged) if args.outside else ""))
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
