"""A real SGLang (0.5.15, CPU) serving smollm2-135m: swept end to end, and asked for the same
output through its native and its OpenAI routes.

The sweep is `sweeps/sglang-cpu.yaml` (on a free port) with its `--schedule-policy lpm` AR
server config, at temperature {0, 0.7} x concurrency {1, 4}; the start is proven from /proc and
from SGLang's /server_info. 0.5.15 has no OpenAI token-id extension, so the
engine must negotiate the native `/generate` path. Then one server started by hand answers the
same greedy prompts through `/generate` (ids) and `/v1/completions` (text only on this release:
its ids are the text re-tokenized by the server's own `/tokenize`): the two must agree; and it
scores a sampled output through its input-token logprobs, as the scored check asks. And why
not 0.5.23: its CPU engine cannot start without SGLang's source-built CPU kernels (last test).
Without `make sglang-0.5.15-venv` these skip (fail under SWEEPER_REQUIRE_SGLANG=1, as CI sets).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pandas as pd
import pytest
import yaml

from sweeper.config import ServerConfig
from sweeper.config.features import BY_NAME
from sweeper.engines.base import Capabilities, EngineError, RequestSpec
from sweeper.engines.sglang import SGLang
from sweeper.engines.sglang_switch import SWITCH_KEYS, SWITCHABLE
from sweeper.engines.sglang_switch import switch as switch_knobs
from sweeper.plan import build_plan
from sweeper.poll import wait_until
from sweeper.spec import load_spec
from tests.engines_oracles.oracle_process import (
    OLD_SGLANG_VERSION,
    ORACLE_ENV,
    REPO,
    SGLANG_VERSION,
    require_sglang,
)
from tests.exported_model import SMOLLM2_HF, smollm2_hf
from tests.sweeper.conftest import free_port

SPEC = REPO / "sweeps" / "sglang-cpu.yaml"
THRESHOLD = "speculative_accept_threshold_single"


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped spec on a free port, with its model exported once if absent."""
    python = require_sglang(OLD_SGLANG_VERSION)
    data = yaml.safe_load(SPEC.read_text())
    assert data["runtime"]["python"] == str(python.relative_to(REPO))
    assert data["runtime"]["model"] == str(SMOLLM2_HF)
    smollm2_hf()  # what `make sglang-model` does
    data["runtime"]["port"] = _sglang_port()
    path = tmp_path_factory.mktemp("spec") / "sglang-cpu.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _sglang_port() -> int:
    """A free port SGLang 0.5.15 takes: it refuses to start on one above 55535, whose derived
    gRPC port (port + 10000, server_args._handle_deprecated_args) would pass 65535. A free
    port from the kernel's ephemeral range (32768-60999) failed CI that way."""
    while (port := free_port()) > 65535 - 10000:
        pass
    return port


@pytest.mark.slow
# A unit of its own (tests/lanes.py): it shares nothing with the hand-started server below.
@pytest.mark.xdist_group("sglang-cpu-sweep")
def test_a_real_sglang_sweep(spec_file: Path, tmp_path: Path) -> None:
    # The shipped spec's non-default server config alone: a real SGLang start is a minute of
    # this machine's two cores, and a load after another config's is the runner's, engine-blind
    # (the runtime's and vLLM's real sweeps load two). `lpm` is not SGLang's default, so the
    # identity proof's /server_info check sees the flag taken.
    data = yaml.safe_load(spec_file.read_text())
    assert data["grid"]["schedule_policy"] == ["fcfs", "lpm"]
    data["grid"]["schedule_policy"] = ["lpm"]
    spec_file = tmp_path / "sglang-cpu.yaml"
    spec_file.write_text(yaml.safe_dump(data, sort_keys=False))
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(spec_file), "--plain"]
    argv += ["--results", str(tmp_path / "results")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1200, cwd=REPO)
    assert done.stdout.strip(), done.stderr[-4000:]
    run = Path(done.stdout.strip().splitlines()[-1])
    points = pd.read_parquet(run / "points.parquet").set_index("point_id")
    logs = "".join(p.read_text()[-3000:] for p in sorted(run.glob("service/*/runtime-*.log")))
    # Every point ok; but AR servers only (baseline: false): nothing was compared, so nothing
    # is proven (exit 6, never "all well").
    assert done.returncode == 6, (points[["status", "reason"]], done.stderr[-2000:], logs)
    assert "nothing compared: 4 point(s), all AR references (n/a)" in done.stderr
    assert (points.status == "ok").all() and set(points.engine) == {"sglang"}
    assert len(points) == 4 and set(points["mode"]) == {"ar"}
    assert sorted(set(points.temperature)) == [0.0, 0.7]
    assert sorted(set(points.concurrency)) == [1, 4]
    # No OpenAI id extension in 0.5.15: every point's ids came from the native /generate.
    assert set(points.token_ids_source) == {"native"}, points.token_ids_source
    # An AR server is asked for margins: top-2 logprobs on the same native stream.
    assert set(points.margin_source) == {"logprobs"}, points.margin_source
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(manifest["identities"]) == 1
    for label, proof in manifest["identities"].items():
        proven = proof["proven"]
        assert any("runs the requested argv and environment" in p for p in proven), label
        assert any("only its process tree listens" in p for p in proven), label
        assert any(p.startswith("/server_info reports every requested flag") for p in proven)
        # Negotiated after the proof: the OpenAI probe carried no ids, /generate did, for the
        # prompt's ids from the server's own /tokenize (the same ids for every config).
        caps = proof["capabilities"]
        assert caps["token_ids"] == "native", caps
        assert caps["details"]["prompt"] == "input_ids from /tokenize", caps


@pytest.fixture(scope="module")
def hand_started(spec_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The sweep's first server config, started by hand as its plan prints it."""
    spec = load_spec(spec_file)
    engine = SGLang(spec.runtime)
    config = build_plan(spec).hosts[0].steps[0].server_config
    argv = [spec.runtime.python or "", "-m", "sglang.launch_server", *engine.command(config)[0]]
    argv += ["--host", "127.0.0.1", "--port", str(spec.runtime.port)]
    log_path = tmp_path_factory.mktemp("sglang") / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env={**os.environ, **spec.runtime.env},
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{spec.runtime.port}"

    def up() -> bool:
        assert proc.poll() is None, log_path.read_text()[-4000:]
        try:
            return httpx.get(url + "/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, timeout_s=spec.runtime.ready_timeout_s, interval_s=1.0)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # SGLang's launcher, scheduler and detokenizer
        proc.wait(30)


@pytest.mark.slow
def test_generate_and_openai_completions_give_the_same_ids(hand_started: str) -> None:
    url = hand_started
    prompts = [p["text"] for p in yaml.safe_load(SPEC.read_text())["workload"]["prompts"]]
    with httpx.Client(timeout=300) as client:
        info = client.get(url + "/server_info").json()
        assert info["version"] == OLD_SGLANG_VERSION and info["device"] == "cpu"
        for prompt in prompts:
            native = client.post(
                url + "/generate",
                json={"text": prompt, "sampling_params": {"max_new_tokens": 8, "temperature": 0}},
            ).json()
            completion = client.post(
                url + "/v1/completions",
                json={"model": "m", "prompt": prompt, "max_tokens": 8, "temperature": 0,
                      "return_token_ids": True},
            ).json()  # fmt: skip
            choice = completion["choices"][0]
            assert "token_ids" not in choice  # 0.5.15 ignores the extension
            assert choice["text"] == native["text"], (prompt, choice, native)
            tokens = client.post(
                url + "/tokenize",
                json={"model": "m", "prompt": choice["text"], "add_special_tokens": False},
            ).json()["tokens"]
            assert tokens == native["output_ids"], (prompt, tokens, native["output_ids"])
            assert completion["usage"]["completion_tokens"] == len(native["output_ids"])


@pytest.mark.slow
def test_the_ar_server_scores_a_sample_through_its_input_token_logprobs(
    hand_started: str, spec_file: Path
) -> None:
    """The scored check's route on 0.5.15 itself: the AR server negotiates top-64 input-token
    logprobs, and a seeded sample drawn at temperature 1 (where 0.5.15's output logprobs, divided
    by the temperature, are raw too) scores, token for token, the logprob the sample reported:
    the start offset is right (SGLang's entry at logprob_start_len is None) and the values are
    the raw log-softmax. The order is the catalog's for SGLang (joint top-k / top-p)."""
    url = hand_started
    spec = load_spec(spec_file)
    engine = SGLang(spec.runtime)
    config = build_plan(spec).hosts[0].steps[0].server_config
    text = "Continue the sequence: 1, 2, 3, 4,"
    with httpx.Client(timeout=300) as client:
        basis, k, order, said = engine.negotiate_scoring(
            client, url, config, RequestSpec("probe", text, 1, 0.0), None, OLD_SGLANG_VERSION
        )
        assert (basis, k, order) == ("topk", 64, ("temperature", "top_k+top_p", "min_p")), said
        prompt = client.post(url + "/tokenize", json={"prompt": text}).json()["tokens"]
        sampling = {"max_new_tokens": 12, "temperature": 1.0, "sampling_seed": 9}
        body = {"input_ids": prompt, "sampling_params": sampling, "return_logprob": True}
        drawn = client.post(url + "/generate", json=body).json()
        tokens = drawn["output_ids"]
        reported = [entry[0] for entry in drawn["meta_info"]["output_token_logprobs"]]
        caps = Capabilities("native", "not needed", "logprobs", scoring=basis, scoring_k=k)
        request = RequestSpec("count", text, 12, 1.0, prompt_token_ids=tuple(prompt))
        positions = engine.bind(caps).score(client, url, request, tokens, None).positions
    assert [p["token"] for p in positions] == tokens
    assert [p["logprob"] for p in positions] == pytest.approx(reported, abs=1e-4)
    assert all(len(p["top"]) == 64 for p in positions)
    assert all(p["rank"] is None or p["top"][p["rank"] - 1][0] == p["token"] for p in positions)


@pytest.mark.slow  # runs the engine's own code (seconds to import)
def test_sglang_0523_cannot_serve_on_a_cpu_from_pypi_alone() -> None:
    """Why the CPU sweep runs 0.5.15: 0.5.23's CPU engine imports sgl_kernel's CPU ops when its
    KV cache module loads, on any CPU (AMX or not). PyPI's sglang-kernel is a CUDA build (its
    ops need libcuda.so.1 to import) and SGLang's CPU kernels are built from source only, so the
    server dies at start; 0.5.15 imports them only on AMX CPUs and falls back to torch here
    (the same module under 0.5.15 is what the sweep above serves with)."""
    module = "sglang.srt.mem_cache.memory_pool"
    failed = subprocess.run(
        [str(require_sglang(SGLANG_VERSION)), "-c", f"import {module}"],
        env={**os.environ, **ORACLE_ENV, "SGLANG_USE_CPU_ENGINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert failed.returncode != 0
    assert "kernels/ops/kvcache/cache_move.py" in failed.stderr
    assert "No module named 'sgl_kernel'" in failed.stderr.splitlines()[-1]


@pytest.mark.slow
def test_request_features_are_probed_on_the_real_sglang(hand_started: str, spec_file: Path) -> None:
    """Negotiation on SGLang 0.5.15 itself, on its native /generate path: min-p, the
    penalties, logit bias, stop strings and logprobs go in `sampling_params` and are proven
    honoured (logit bias +100 forces its token, min-p 1 at T=1 gives the greedy ids, ...); a
    grammar is refused from /server_info without being sent (its xgrammar mask has no CPU path
    and would kill the scheduler: the server is still healthy after), and n > 1, which the
    native stream cannot carry as separate choices, is refused by name."""
    url = hand_started
    spec = load_spec(spec_file)
    engine = SGLang(spec.runtime)
    config = build_plan(spec).hosts[0].steps[0].server_config
    probe = RequestSpec("count", "Continue the sequence: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,", 8, 0.0)
    values = {
        "min_p": 0.1,
        "repetition_penalty": 1.3,
        "frequency_penalty": 0.5,
        "presence_penalty": 0.5,
        "logit_bias": {21285: 5.0},
        "stop": ["apple"],
        "logprobs": 5,
        "regex": "[0-9]+",
        "response_format": {"type": "json_object"},
        "n": 2,
    }
    with httpx.Client(timeout=300) as client:
        bound = engine.bind(engine.negotiate(client, url, config, probe, None))
        assert bound.capabilities.token_ids == "native"
        answers = {
            name: bound.negotiate_features(
                client, url, config, probe, {name: BY_NAME[name].freeze(value)}, None, "0.5.15"
            )
            for name, value in values.items()
        }
        assert client.get(url + "/health").status_code == 200
    refused = {name: why for name, (why, _) in answers.items() if why}
    grammar = (
        "its xgrammar mask has no CPU path (a grammar request kills the scheduler: "
        "'Unsupported device: cpu')"
    )
    assert refused == {
        "regex": f"sglang 0.5.15 (ar) refuses regex: {grammar}",
        "response_format": f"sglang 0.5.15 (ar) refuses response_format: {grammar}",
        "n": (
            "sglang 0.5.15 (ar) refuses n on its negotiated path: SGLang's native /generate "
            "stream is read as one choice: no n > 1"
        ),
    }
    assert all("honoured" in said[0] for name, (_, said) in answers.items() if name not in refused)


@pytest.mark.slow
def test_the_accept_threshold_switches_in_place_through_the_real_handler(
    hand_started: str, spec_file: Path
) -> None:
    """SGLang 0.5.15's own `/set_internal_state` (scheduler.py:3788) on a real server: the
    engine negotiates both accept thresholds as switchable (each set to its value and read
    back), switches `speculative_accept_threshold_single` to 0.5 and back, and the identity
    proof reads the threshold in effect from the schedulers (`internal_states`: the top-level
    field stays the launch's 1.0), so the relaxed server is never proven as the exact config.
    0.5.15 takes the thresholds on an AR server too (its handler checks neither the value nor
    the algorithm). A key its handler lacks is refused by the handler itself, in one line
    naming build and key; one negotiation did not find switchable is refused unsent."""
    url = hand_started
    spec = load_spec(spec_file)
    engine = SGLang(spec.runtime)
    exact = build_plan(spec).hosts[0].steps[0].server_config
    relaxed = ServerConfig.make("ar", {**exact.params, THRESHOLD: 0.5})
    launch = engine.launch(
        exact, python="python", listen_host="127.0.0.1", workdir=None, secrets={}
    )
    probe = RequestSpec("capital", "The capital of France is", 8, 0.0)
    with httpx.Client(timeout=300) as client:
        caps = engine.negotiate(client, url, exact, probe, None)
        bound = engine.bind(caps)
        assert bound.switchable(caps) == frozenset(SWITCH_KEYS), caps.evidence
        before = bound.prove(client, url, launch, exact)
        bound.switch(client, url, relaxed)
        info = client.get(url + "/server_info").json()
        assert [s[THRESHOLD] for s in info["internal_states"]] == [0.5]
        assert info[THRESHOLD] == 1.0  # the HTTP process's copy of the launch's args
        after = bound.prove(client, url, launch, relaxed)
        assert after.info["server_args"][THRESHOLD] == 0.5
        assert after.fingerprint != before.fingerprint
        with pytest.raises(
            EngineError, match=f"{THRESHOLD}: requested 1.0, its schedulers run 0.5"
        ):
            bound.prove(client, url, launch, exact)
        bound.switch(client, url, exact)  # a config naming none gets the launch's value back
        assert bound.prove(client, url, launch, exact).fingerprint == before.fingerprint
        with pytest.raises(EngineError) as handler_refused:
            switch_knobs(
                client,
                url,
                lambda: client.get(url + "/server_info").json(),
                {"speculative_eagle_topk": 4},
                frozenset({"speculative_eagle_topk"}),
                "sglang 0.5.15 (ar)",
            )
        unswitchable = engine.bind(replace(caps, details={**caps.details, SWITCHABLE: []}))
        with pytest.raises(EngineError) as not_negotiated:
            unswitchable.switch(client, url, relaxed)
        assert client.get(url + "/server_info").json()["internal_states"][0][THRESHOLD] == 1.0
    assert str(handler_refused.value) == (
        "sglang 0.5.15 (ar) refused to switch speculative_eagle_topk: its /set_internal_state "
        "handler refused it (answered [False])"
    )
    assert str(not_negotiated.value) == (
        f"sglang 0.5.15 (ar) cannot switch {THRESHOLD} in place: negotiation found it not "
        "switchable (a load is needed)"
    )
