"""The sglang engine checked against SGLang's own code, never only our idea of it.

- Every server config of every shipped stock-SGLang spec goes through SGLang 0.5.23's own parser
  and resolver (`tests/engines_oracles`): it parses, no value is overridden, and the engine's
  identity proof accepts the /server_info SGLang builds from it. A config whose value SGLang
  overrides fails that proof.
- The DDTREE preset's flags and environment names exist in sgl-project/sglang PR #29907's own
  `server_args.py` / `environ.py` (extracted data pinned to commit 93e9850e).
- Every request body the engine writes is accepted by SGLang's real OpenAI routes and streaming
  checks, and our stream reader reads the chunks SGLang's own serving code emits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from sweeper.config import ServerConfig
from sweeper.config.features import BY_NAME
from sweeper.engines.base import EngineError, RequestSpec
from sweeper.engines.sglang import SGLang
from sweeper.engines.sglang_stream import generate_body
from sweeper.plan import build_plan
from sweeper.spec import RuntimeSpec, Spec, parse_spec
from tests.engines_oracles.oracle_process import sglang_resolve, sglang_serve, sse_events
from tests.sweeper.json_server import serve
from tests.sweeper.shipped_specs import load_shipped

ROOT = Path(__file__).resolve().parents[3]
PR_DATA = ROOT / "tests" / "engines_oracles" / "data" / "sglang_pr29907.json"
SPECS = sorted((ROOT / "sweeps").glob("*.yaml"))


def _specs(preset: str) -> list[Spec]:
    found = [load_shipped(path) for path in SPECS]
    return [s for s in found if s.runtime.engine == "sglang" and s.runtime.preset == preset]


def _configs(spec: Spec) -> list[ServerConfig]:
    return [step.server_config for host in build_plan(spec).hosts for step in host.steps]


def _for_oracle(spec: Spec) -> tuple[SGLang, dict[str, str]]:
    """The engine with the oracle's model placeholders (it has local configs for them)."""
    runtime = spec.runtime.model_copy(update={"model": "{target}", "draft": "{draft}"})
    return SGLang(runtime), {"{target}": spec.runtime.model, "{draft}": spec.runtime.draft}


def _stock_cases() -> tuple[list[dict[str, Any]], dict[str, tuple[SGLang, ServerConfig]]]:
    """Every server config of every shipped stock-SGLang spec, as an oracle case."""
    specs = _specs("sglang-dflash")
    assert specs, "no shipped stock-SGLang spec"
    cases, expected = [], {}
    for spec in specs:
        engine, _ = _for_oracle(spec)
        for sc in _configs(spec):
            flags, env = engine.command(sc)
            name = f"{spec.name}/{sc.label}"
            # The oracle machine has no GPU; SGLang's DFLASH checks the device, so say cuda.
            cases.append({"name": name, "argv": [*flags, "--device", "cuda"], "env": env})
            expected[name] = (engine, sc)
    return cases, expected


FORK = parse_spec(
    "name: fork\n"
    "runtime:\n"
    "  engine: sglang\n"
    "  model: m\n"
    "  draft: d\n"
    "  mapping:\n"
    "    speculative_args: [--speculative-algorithm, DFLASH]\n"
    "    draft: {flag: --speculative-draft-model-path}\n"
    "    params:\n"
    "      topk: {flag: --speculative-eagle-topk}\n"
    "      block_size: {flag: --speculative-num-draft-tokens}\n"
    "grid: {topk: [4], block_size: [16]}\n"
    "workload: {prompts: [{id: a, text: hi}]}\n"
)


def _fork_case() -> dict[str, Any]:
    engine, _ = _for_oracle(FORK)
    flags, env = engine.command(_configs(FORK)[-1])
    return {"name": "fork", "argv": [*flags, "--device", "cuda"], "env": env}


def _baseline_cases() -> list[dict[str, Any]]:
    """The AR configs of the shipped DDTREE specs, extra_args included."""
    cases = []
    for spec in _specs("sglang-ddtree"):
        engine, _ = _for_oracle(spec)
        for sc in _configs(spec):
            if sc.mode == "ar":
                flags, env = engine.command(sc)
                cases.append(
                    {
                        "name": f"{spec.name}/{sc.label}",
                        "argv": [*flags, "--device", "cuda"],
                        "env": env,
                    }
                )
    assert cases
    return cases


@pytest.fixture(scope="module")
def resolved() -> dict[str, dict[str, Any]]:
    """SGLang 0.5.23's resolution of every case the tests below ask about, by case name: one
    oracle call, so SGLang is imported once for them all."""
    unique: dict[str, dict[str, Any]] = {}
    for case in [*_stock_cases()[0], _fork_case(), *_baseline_cases()]:
        # A spec's hosts share its configs: one name, one command.
        assert unique.setdefault(case["name"], case) == case, case["name"]
    return {answer["name"]: answer for answer in sglang_resolve(list(unique.values()))}


@pytest.mark.slow  # runs the engine's own code (seconds to import)
def test_every_stock_sglang_config_parses_resolves_unchanged_and_proves(
    resolved: dict[str, dict[str, Any]],
) -> None:
    cases, expected = _stock_cases()
    for answer in (resolved[case["name"]] for case in cases):
        name = answer["name"]
        assert answer["ok"], (name, answer.get("error"))
        assert answer["overridden"] == {}, (name, answer["overridden"], answer["warnings"])
        engine, sc = expected[name]
        info = {**answer["server_info"], "model_path": "{target}"}
        if sc.mode == "speculative":
            info["speculative_draft_model_path"] = "{draft}"
        _prove(engine, sc, info)  # raises if anything we asked for is not what SGLang runs


def _prove(engine: SGLang, sc: ServerConfig, info: dict[str, Any]) -> None:
    launch = engine.launch(sc, python="py", listen_host="127.0.0.1", workdir=None, secrets={})
    with serve({"/server_info": info}) as url, httpx.Client() as client:
        proof = engine.prove(client, url, launch, sc)
    assert proof.fingerprint and proof.proven[0].startswith("/server_info reports every requested")


@pytest.mark.slow  # runs the engine's own code (seconds to import)
def test_a_value_sglang_overrides_fails_the_identity_proof(
    resolved: dict[str, dict[str, Any]],
) -> None:
    """A fork mapping that puts topk on --speculative-eagle-topk under DFLASH: SGLang resolves
    it to 1 with only a warning, and the proof refuses to measure that server as topk 4."""
    engine, _ = _for_oracle(FORK)
    sc = _configs(FORK)[-1]
    answer = resolved["fork"]
    assert answer["ok"] and "speculative_eagle_topk" in answer["overridden"]
    info = {
        **answer["server_info"],
        "model_path": "{target}",
        "speculative_draft_model_path": "{draft}",
    }
    with pytest.raises(EngineError, match="speculative_eagle_topk: requested 4, server runs 1"):
        _prove(engine, sc, info)


def test_the_ddtree_preset_speaks_pr_29907() -> None:
    """What the preset and the engine emit (not the spec's own extra_args) against the PR's
    own declarations; the rest of each spec's command through 0.5.23's parser below."""
    data = json.loads(PR_DATA.read_text())
    assert data["provenance"]["commit"] == "93e9850e430035f8a363fd881a6a0c5436b95108"
    flags = {name for entry in data["flags"] for name in entry["flags"] or ()}
    choices = {name: entry["choices"] for entry in data["flags"] for name in entry["flags"] or ()}
    envs = {entry["name"] for entry in data["env"]}
    specs = _specs("sglang-ddtree")
    assert {s.name for s in specs} >= {"b300", "rtx6000"}
    for spec in specs:
        engine = SGLang(spec.runtime.model_copy(update={"extra_args": []}))
        for sc in _configs(spec):
            argv, env = engine.command(sc)
            used = [a for a in argv if a.startswith("--")]
            assert set(used) <= flags, (spec.name, sc.label, set(used) - flags)
            assert set(env) - set(spec.runtime.env) <= envs
            if sc.mode == "speculative":
                algorithm = argv[argv.index("--speculative-algorithm") + 1]
                assert algorithm in data["speculative_algorithms"]["names"]
                assert "SGLANG_DDTREE_MAX_TOPK" in env
        full = SGLang(spec.runtime).command(_configs(spec)[-1])[0]
        for flag, choice in choices.items():
            if flag in full and choice:
                assert full[full.index(flag) + 1] in choice, (flag, choice)


@pytest.mark.slow  # runs the engine's own code (seconds to import)
def test_the_ddtree_specs_baselines_parse_with_stock_sglang(
    resolved: dict[str, dict[str, Any]],
) -> None:
    """Their AR configs carry no DDTREE flag: the whole command, extra_args included, goes
    through 0.5.23's parser and resolver unchanged."""
    for answer in (resolved[case["name"]] for case in _baseline_cases()):
        assert answer["ok"], (answer["name"], answer.get("error"))
        assert answer["overridden"] == {}, (answer["name"], answer["overridden"])


MESSAGES = [{"role": "user", "content": "the sea"}]
STEPS = [
    {"text": "the", "ids": [6], "logprobs": [-0.1], "top_logprobs": [[-0.1, -2.5]],
     "top_ids": [[6, 7]], "verify_ct": 1, "correct_drafts": 0},
    {"text": " tide comes", "ids": [7, 8], "logprobs": [-0.2, -0.3],
     "top_logprobs": [[-0.2, -1.9], [-0.3, -1.0]], "top_ids": [[7, 9], [8, 9]],
     "verify_ct": 2, "correct_drafts": 1},
]  # fmt: skip
IDS = [6, 7, 8]
REQUESTS = {
    f"{api}-t{temperature:g}": RequestSpec(
        prompt_id="p",
        prompt="the sea",
        max_tokens=3,
        temperature=temperature,
        seed=7,
        top_p=0.9 if temperature else None,
        chat=api == "chat",
        messages=tuple(MESSAGES) if api == "chat" else None,
    )
    for api in ("chat", "completions")
    for temperature in (0.0, 0.7)
}


@pytest.mark.slow  # runs the engine's own code (seconds to import)
def test_request_bodies_pass_sglang_and_its_streams_read_back() -> None:
    engine = SGLang(_specs("sglang-dflash")[0].runtime)
    argv = ["--model-path", "{target}", "--device", "cuda", "--speculative-algorithm", "DFLASH"]
    argv += ["--speculative-draft-model-path", "{draft}", "--speculative-num-draft-tokens", "16"]
    payload: dict[str, Any] = {"argv": argv, "ready": True}
    payload["requests"] = []
    for name, spec in REQUESTS.items():
        request = engine.request(spec, "m")
        payload["requests"].append(
            {"name": name, "path": request.path, "body": request.body,
             "headers": request.headers, "steps": STEPS}
        )  # fmt: skip
    served = sglang_serve(payload)
    for name, spec in REQUESTS.items():
        response = served[name]
        assert response["status"] == 200 and response["reached_scheduler"], response["body"]
        reader = engine.reader(spec)
        for _, data in sse_events(response["body"]):
            if isinstance(data, dict):
                reader.feed(data)
        fields = reader.fields()
        assert fields["token_ids"] == IDS, name
        assert fields["text"] == "the tide comes"
        assert reader.usage_mismatch() is None
        assert (fields["tau"], fields["verify_rounds"]) == (1.5, 2)
        if spec.temperature == 0:
            assert fields["top2_margins"] == pytest.approx([2.4, 1.7, 0.7])


@pytest.mark.parametrize(
    ("runtime", "gpu"),
    [
        ({}, True),
        ({"device": "cpu"}, False),
        ({"extra_args": ["--device", "cpu"]}, False),
        ({"extra_args": ["--device=cpu"]}, False),
        ({"extra_args": ["--device", "cuda"]}, True),
    ],
)
def test_a_cpu_sglang_needs_no_gpu(runtime: dict[str, Any], gpu: bool) -> None:
    spec = RuntimeSpec.model_validate(
        {"engine": "sglang", "preset": "sglang-ddtree", "model": "m", **runtime}
    )
    assert SGLang(spec).requirements().gpu is gpu  # what `sweeper doctor` checks a host for


def test_the_native_body_carries_every_feature_in_sglangs_spelling() -> None:
    """/generate's `sampling_params` take the OpenAI names (bias keys as strings), a response
    format as `json_schema` text and the workload's logprobs as `top_logprobs_num` (merged with
    the margins, the larger); n > 1 raises: the native stream is read as one choice."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    values = {
        "min_p": 0.1,
        "repetition_penalty": 1.3,
        "frequency_penalty": 0.5,
        "presence_penalty": 0.25,
        "logit_bias": {21285: 5.0},
        "stop": ["apple"],
        "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
        "logprobs": 5,
    }
    frozen = {name: BY_NAME[name].freeze(value) for name, value in values.items()}
    body = generate_body(RequestSpec("p", "x", 8, 0.0, **frozen), [1, 2], margins=True)
    sampling = dict(body["sampling_params"])
    assert json.loads(sampling.pop("json_schema")) == schema
    assert sampling == {
        "max_new_tokens": 8,
        "temperature": 0.0,
        "min_p": 0.1,
        "repetition_penalty": 1.3,
        "frequency_penalty": 0.5,
        "presence_penalty": 0.25,
        "logit_bias": {"21285": 5.0},
        "stop": ["apple"],
    }
    assert (body["return_logprob"], body["top_logprobs_num"]) == (True, 5)
    json_object = BY_NAME["response_format"].freeze({"type": "json_object"})
    plain = generate_body(
        RequestSpec("p", "x", 8, 0.0, response_format=json_object), "x", margins=False
    )
    assert plain["sampling_params"]["json_schema"] == '{"type": "object"}'
    regex = generate_body(RequestSpec("p", "x", 8, 0.0, regex="[0-9]+"), "x", margins=False)
    assert regex["sampling_params"]["regex"] == "[0-9]+" and "return_logprob" not in regex
    with pytest.raises(LookupError, match="no n > 1"):
        generate_body(RequestSpec("p", "x", 8, 0.7, n=2), "x", margins=False)
