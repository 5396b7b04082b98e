"""The vllm engine against vLLM itself: its own argument parser and config resolution (the
offline oracle, tests/engines_oracles), and a real vLLM (CPU) swept end to end.

The sweep is `sweeps/vllm-cpu.yaml` as shipped but for its grid, cut to one speculative config
(each costs a vLLM start, ~35 CPU-seconds): an AR baseline and n-gram speculation with 4 tokens at
temperature 0, every restart proven from /proc (the n-gram server's own speculative config read
back, so a server left over from the AR step cannot pass), verdicts against vLLM's own AR,
acceptance from /metrics deltas after warm-up. Then `engine: openai` judges two vLLMs started by
hand (n-gram, and AR as its baseline endpoint), and both score a sampled output through their
prompt logprobs, agreeing with each other and with the sample's own logprobs. Without vLLM's
venv these skip with how to get it (fail under SWEEPER_REQUIRE_VLLM=1, as CI sets).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import httpx
import pandas as pd
import pytest
import yaml

from ddtree_runtime.export import export_model
from sweeper.catalog.records import PRESETS
from sweeper.config.features import BY_NAME
from sweeper.engines.base import Capabilities, RequestSpec
from sweeper.engines.vllm import VLLM, read_counters
from sweeper.plan import build_plan
from sweeper.poll import wait_until
from sweeper.spec import load_spec
from tests.engines_oracles.vllm_oracle import require_vllm, run_vllm_oracle
from tests.exported_model import SMOLLM2_HF, smollm2_hf
from tests.sweeper.conftest import free_port

ROOT = Path(__file__).resolve().parents[3]
SPEC = ROOT / "sweeps" / "vllm-cpu.yaml"
METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 6.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 24.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 5.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 3.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 4.0
vllm:num_requests_running{engine="0",model_name="m"} 0.0
"""


def test_acceptance_counters_are_read_from_the_metrics_page() -> None:
    assert read_counters(METRICS) == {
        "drafts": 6.0,
        "draft_tokens": 24.0,
        "accepted_tokens": 8.0,
        "accepted_at_0": 4.0,
    }
    assert read_counters("vllm:num_requests_running 0.0\n") is None  # an AR server has none


@pytest.mark.slow  # runs the engine's own code (seconds to import)
def test_every_shipped_config_and_preset_resolves_with_vllms_own_code(
    tmp_path: Path,
) -> None:
    require_vllm()
    model = str(export_model("tiny-random", tmp_path / "tiny"))
    spec = load_spec(SPEC)
    spec = spec.model_copy(update={"runtime": spec.runtime.model_copy(update={"model": model})})
    engine = VLLM(spec.runtime)
    configs = [step.server_config for step in build_plan(spec).hosts[0].steps]
    cases = [{"name": sc.label, "argv": engine.command(sc)[0]} for sc in configs]
    answer = run_vllm_oracle(cases)
    by_name = {r["name"]: r for r in answer["results"]}
    for sc in configs:
        result = by_name[sc.label]
        assert result["ok"], (sc.label, result.get("error"))
        resolved = result["resolved"]
        assert resolved["enforce_eager"] is True and resolved["dtype"] == "float32"
        want = engine.speculative_config(sc)
        got = resolved.get("speculative") or {}
        if want is None:
            assert not got, sc.label
        else:  # vLLM took every key as given: nothing it filled in or changed
            assert {k: got.get(k) for k in want} == want, (sc.label, got)
    # The presets' methods and keys are vLLM's own (ddtree is PR #42910's, not in 0.32).
    for name, (owner, mapping) in PRESETS.items():
        if owner != "vllm":
            continue
        blob = mapping.speculative_json["--speculative-config"]
        keys = {*blob, *(t.json_key for t in mapping.params.values()), "model"}
        assert keys <= set(answer["speculative_fields"]), (name, keys)
        method = blob["method"]
        assert (method in answer["speculative_methods"]) == (name != "vllm-ddtree"), name


@pytest.fixture(scope="module")
def vllm_model() -> str:
    """smollm2-135m as vLLM loads it (`make vllm-model`), exported once if absent."""
    require_vllm()
    smollm2_hf()
    return str(SMOLLM2_HF)


def _run(spec: Path, results: Path) -> tuple[int, Path, str]:
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(spec), "--results", str(results)]
    done = subprocess.run([*argv, "--plain"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.stdout.strip(), done.stderr[-4000:]
    return done.returncode, Path(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.slow
# A unit of its own (tests/lanes.py): it shares nothing with the hand-started server below.
@pytest.mark.xdist_group("vllm-sweep")
def test_a_real_vllm_sweep(vllm_model: str, tmp_path: Path) -> None:
    spec = yaml.safe_load(SPEC.read_text())
    assert 4 in spec["grid"]["budget"]
    spec["grid"]["budget"] = [4]
    path = tmp_path / "vllm-cpu.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    code, run, stderr = _run(path, tmp_path / "results")
    points = pd.read_parquet(run / "points.parquet").set_index("point_id")
    assert code == 0, (points[["status", "reason", "determinism"]], stderr[-3000:])
    assert (points.status == "ok").all() and set(points.engine) == {"vllm"}
    ar = points[points["mode"] == "ar"]
    speculative = points[points["mode"] == "speculative"]
    assert len(ar) == 1 and list(speculative.budget) == [4]
    # Judged against vLLM's own AR: exact, or a near tie the baseline's margins explain.
    assert set(speculative.determinism) <= {"exact", "near-tie"}
    # Acceptance from /metrics deltas over the measured requests (after warm-up).
    assert (speculative.acceptance_source == "metrics").all()
    assert (speculative.accepted_tokens <= speculative.draft_tokens).all()
    assert (speculative.tau > 1).any()
    # Exposure: a point's accepted-length histogram from vLLM's per-position counters (one
    # entry per drafted position, plus 0), agreeing with its accepted-token counter; padding,
    # graphs, batching and trees vLLM does not report: unknown, and said so.
    for _, row in speculative.iterrows():
        hist = list(row.accepted_hist)
        assert len(hist) == row.budget + 1
        assert sum(a * n for a, n in enumerate(hist)) == row.accepted_tokens
        assert pd.isna(row.padded_rounds) and "padded_rounds" in row.exposure_note
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(manifest["identities"]) == 2
    for label, proof in manifest["identities"].items():
        assert any("runs the requested argv and environment" in p for p in proof["proven"])
        assert any("only its process tree listens" in p for p in proof["proven"])
        # Dev mode (the spec's env): vLLM's resolved speculative config matched the request.
        assert "/server_info reports the requested speculative config" in proof["proven"], label
    report = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "report", str(run)], capture_output=True, text=True
    )
    assert report.returncode == 0 and (run / "report.html").exists(), report.stderr


@pytest.fixture(scope="module")
def hand_started(
    vllm_model: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """An n-gram vLLM and an AR vLLM started by hand, as someone else's servers would be."""
    tmp_path = tmp_path_factory.mktemp("vllm")
    spec = load_spec(SPEC)
    engine = VLLM(spec.runtime)
    configs = [step.server_config for step in build_plan(spec).hosts[0].steps]
    servers = []
    urls = []
    for sc in (configs[-1], configs[0]):  # n-gram k=4, then AR
        port = free_port()
        argv = [spec.runtime.python or "", "-m", "vllm.entrypoints.openai.api_server"]
        argv += [*engine.command(sc)[0], "--host", "127.0.0.1", "--port", str(port)]
        env = {**os.environ, **spec.runtime.env}
        log = open(tmp_path / f"vllm-{port}.log", "wb")  # noqa: SIM115 - closed below
        servers.append(
            (
                subprocess.Popen(
                    argv, cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True
                ),
                log,
            )
        )
        urls.append(f"http://127.0.0.1:{port}")
    try:
        yield urls[0], urls[1]
    finally:
        for proc, log in servers:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()


@pytest.mark.slow
def test_the_openai_engine_judges_vllms_nobody_here_started(
    hand_started: tuple[str, str], tmp_path: Path
) -> None:
    ngram_url, ar_url = hand_started
    spec = yaml.safe_load(SPEC.read_text())
    spec["name"] = "vllm-endpoint"
    spec["runtime"] = {
        "engine": "openai",
        "base_url": ngram_url,
        "baseline_url": ar_url,
        "ready_timeout_s": 300,
    }
    spec["grid"] = {"temperature": [0]}
    path = tmp_path / "endpoint.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    code, run, stderr = _run(path, tmp_path / "results")
    points = pd.read_parquet(run / "points.parquet").set_index("mode")
    requests = pd.read_parquet(run / "requests.parquet")
    assert code == 0, (points[["status", "reason"]], stderr[-3000:])
    assert (points.status == "ok").all()
    assert points.loc["speculative", "determinism"] in ("exact", "near-tie")
    assert set(requests.token_ids_source) == {"engine"}  # vLLM was recognised: real ids
    manifest = json.loads((run / "manifest.json").read_text())
    identity = manifest["identities"]["local/spec"]
    assert any(p.startswith("the server reports itself as vllm 0.32") for p in identity["proven"])
    assert any("did not start it" in u for u in identity["unproven"])


@pytest.mark.slow
def test_both_vllms_score_a_sampled_output_through_prompt_logprobs(
    hand_started: tuple[str, str],
) -> None:
    """The scored check's route on vLLM 0.32 itself: launched as the engine renders it
    (`--max-logprobs 64`), each server negotiates top-64 prompt logprobs (the n-gram one too:
    its prefill is the target's); an AR sample at temperature 0.7 scored by either gives each
    token the raw logprob the sample itself reported (vLLM's logprobs are raw), and the two
    scorers agree within the spec's tolerance."""
    ngram_url, ar_url = hand_started
    spec = load_spec(SPEC)
    engine = VLLM(spec.runtime)
    steps = build_plan(spec).hosts[0].steps
    ar_config, ngram_config = steps[0].server_config, steps[-1].server_config
    model = spec.runtime.model
    with httpx.Client(timeout=300) as client:
        for url in (ngram_url, ar_url):
            wait_until(partial(_healthy, client, url), timeout_s=300, interval_s=2.0)
        prompt = "Continue the sequence: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"
        body = {"model": model, "prompt": prompt, "max_tokens": 16, "temperature": 0.7}
        body.update(seed=5, logprobs=1, return_token_ids=True)
        choice = client.post(f"{ar_url}/v1/completions", json=body).json()["choices"][0]
        tokens, reported = choice["token_ids"], choice["logprobs"]["token_logprobs"]
        request = RequestSpec("count", prompt, 16, 0.7, seed=5)
        scored = {}
        for url, config in ((ar_url, ar_config), (ngram_url, ngram_config)):
            basis, k, order, said = engine.negotiate_scoring(
                client, url, config, request, model, "0.32.0"
            )
            assert (basis, k) == ("topk", 64), said
            assert order == ("temperature", "min_p", "top_k", "top_p")
            caps = Capabilities("openai", "metrics", "logprobs", scoring=basis, scoring_k=k)
            scored[url] = engine.bind(caps).score(client, url, request, tokens, model).positions
    for positions in scored.values():
        assert [p["token"] for p in positions] == tokens
        assert [p["logprob"] for p in positions] == pytest.approx(reported, abs=1e-3)
        assert all(len(p["top"]) == 64 and p["rank"] >= 1 for p in positions)
        assert all(p["top"][0][1] >= p["top"][-1][1] for p in positions)
    ar_probs = [math.exp(p["logprob"]) for p in scored[ar_url]]
    ngram_probs = [math.exp(p["logprob"]) for p in scored[ngram_url]]
    assert max(abs(a - b) for a, b in zip(ar_probs, ngram_probs, strict=True)) <= 0.01


def _healthy(client: httpx.Client, url: str) -> bool:
    try:
        return client.get(f"{url}/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


#: One value per request feature, as a workload or grid would ask them (frozen).
FEATURE_VALUES = {
    name: BY_NAME[name].freeze(value)
    for name, value in {
        "min_p": 0.1,
        "repetition_penalty": 1.3,
        "frequency_penalty": 0.5,
        "presence_penalty": 0.5,
        "logit_bias": {21285: 5.0},  # " banana"
        "stop": ["apple"],
        "response_format": {"type": "json_object"},
        "regex": "[0-9]+",
        "n": 2,
        "logprobs": 5,
    }.items()
}
#: What vLLM 0.32.0 answers a speculative request with min-p > 0 or a logit bias (streamed: in
#: an error event; HTTP 400 unstreamed).
SPEC_GUARD = (
    "an error event: The min_p and logit_bias sampling parameters are not yet supported with "
    "speculative decoding."
)


@pytest.mark.slow
def test_every_request_feature_is_probed_on_both_real_vllms(
    hand_started: tuple[str, str],
) -> None:
    """Negotiation on vLLM 0.32.0 itself: the AR server honours every feature, each body (in
    vLLM's spelling: `structured_outputs.regex`) answered 200 and each probe's effect seen
    (logit bias +100 forces its token, min-p 1 samples the greedy ids, ...); the n-gram server
    honours the same except min-p and logit bias, which its input processor refuses (#31982's
    guard: what keeps #42744 from reaching the rejection sampler), named in one line."""
    ngram_url, ar_url = hand_started
    spec = load_spec(SPEC)
    engine = VLLM(spec.runtime)
    steps = build_plan(spec).hosts[0].steps
    ar_config, ngram_config = steps[0].server_config, steps[-1].server_config
    model = spec.runtime.model
    probe = RequestSpec("count", "Continue the sequence: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,", 8, 0.0)
    with httpx.Client(timeout=300) as client:
        for url in (ngram_url, ar_url):
            wait_until(partial(_healthy, client, url), timeout_s=300, interval_s=2.0)
        answers = {}
        for url, config in ((ar_url, ar_config), (ngram_url, ngram_config)):
            bound = engine.bind(engine.negotiate(client, url, config, probe, model))
            answers[config.mode] = {
                name: bound.negotiate_features(
                    client, url, config, probe, {name: value}, model, "0.32.0"
                )
                for name, value in FEATURE_VALUES.items()
            }
    assert {name: refused for name, (refused, _) in answers["ar"].items()} == dict.fromkeys(
        FEATURE_VALUES
    )
    assert all(len(said) == 1 and "honoured" in said[0] for _, said in answers["ar"].values())
    refused = {name: why for name, (why, _) in answers["speculative"].items() if why}
    assert refused == {
        "min_p": f"vllm 0.32.0 (speculative) refuses min_p: {SPEC_GUARD}",
        "logit_bias": f"vllm 0.32.0 (speculative) refuses logit_bias: {SPEC_GUARD}",
    }
