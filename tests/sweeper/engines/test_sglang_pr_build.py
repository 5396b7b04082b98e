"""End to end: `sweeper run` with engine sglang + preset sglang-ddtree against a fake server that
behaves as sgl-project/sglang PR #29907's build (tests/sweeper/fake_sglang.py), launched by the
sweeper as `python -m sglang.launch_server` through a shim package. Every point is ok and exact
at temperature 0, with ids from the native `/generate` path and acceptance per request; the two
labels the PR's rules make one server (b7-k1, b7-k4: a chain, topk unused) are measured once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from sweeper.results.manifest import PROMPT_CHAT_ROUTE, PROMPT_PLAIN_CHAT, PROMPT_TEXT
from sweeper.results.store import RunStore
from tests.sweeper.fake_sglang import render_chat, shim_env, tokenize

#: Each test runs whole sweeps through the CLI as processes, the fake build started by the sweeper.
pytestmark = pytest.mark.slow

#: The preset's flags without its effective-config rules (a fork's own mapping): the plan then
#: measures b7-k1 and b7-k4 apart, and only the run can tell they were one server.
OWN_MAPPING = {
    "speculative_args": ["--speculative-algorithm", "DDTREE"],
    "draft": {"flag": "--speculative-draft-model-path"},
    "params": {
        "budget": {"flag": "--speculative-ddtree-budget"},
        "block_size": {"flag": "--speculative-num-draft-tokens"},
        "topk": {"env": "SGLANG_DDTREE_MAX_TOPK"},
    },
}


def _sweeper(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "sweeper.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600)


def _run(spec: Path, results: Path) -> tuple[Path, pd.DataFrame]:
    done = _sweeper("run", str(spec), "--plain", "--results", str(results))
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    points = pd.read_parquet(run_dir / "points.parquet").set_index("point_id")
    columns = ["status", "reason", "determinism", "token_ids_source", "acceptance_source"]
    assert done.returncode == 0, (points[columns].to_string(), done.stderr[-3000:])
    return run_dir, points


def _spec(
    tmp: Path,
    port: int,
    api: str,
    mapping: dict | None = None,
    runtime: dict | None = None,
    **overrides: Any,
) -> Path:
    spec: dict[str, Any] = {
        "name": "prbuild",
        "hosts": ["local"],
        "runtime": {
            "engine": "sglang",
            **({"mapping": mapping} if mapping else {"preset": "sglang-ddtree"}),
            "model": "fake-target",
            "draft": "fake-draft",
            "port": port,
            "ready_timeout_s": 60,
            "env": {**shim_env(tmp), "FAKE_START_DELAY": "0.3"},
            "extra_args": ["--page-size", "1"],
            **(runtime or {}),
        },
        "grid": {
            "budget": [7, 16],
            "topk": [1, 4],
            "block_size": [8],
            "cuda_graph": [False],
            "temperature": [0],
        },
        "baseline": True,
        "workload": {
            "api": api,
            "prompts": [
                {"id": f"p{i}", "text": f"prompt number {i} about the sea"} for i in range(2)
            ],
            "max_tokens": 12,
            "repeats": 2,
            "concurrency": [1],
            "warmup": 1,
            "seed": 7,
        },
    }
    for key, value in overrides.items():  # grid or workload keys
        spec["grid" if key in spec["grid"] else "workload"][key] = value
    path = tmp / f"prbuild-{api}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_a_sweep_of_the_pr_29907_build(tmp_path: Path, port: int, api: str) -> None:
    """A chat workload too: its prompt ids come from the build's /tokenize (messages rendered
    as for a chat completion), since the build's chat stream carries no ids."""
    spec = _spec(tmp_path, port, api)
    plan = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "plan", str(spec)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert "b7-k4-bs8-cg0 is b7-k1-bs8-cg0" in " ".join(plan.stdout.split())
    run_dir, points = _run(spec, tmp_path / "results")
    requests = pd.read_parquet(run_dir / "requests.parquet")
    # AR + one per behaviour: b7 (k1 covering k4), b16-k1 (width 1), b16-k4 (width 3).
    assert sorted(points.index) == [
        "local-ar-cg0-t0-c1",
        "local-b16-k1-bs8-cg0-t0-c1",
        "local-b16-k4-bs8-cg0-t0-c1",
        "local-b7-k1-bs8-cg0-t0-c1",
    ]
    assert list(points.loc["local-b7-k1-bs8-cg0-t0-c1", "covers_labels"]) == ["b7-k4-bs8-cg0"]
    assert (points.status == "ok").all()
    speculative = points[points["mode"] == "speculative"]
    assert (speculative.determinism == "exact").all()
    assert (points.token_ids_source == "native").all()
    assert (requests.token_ids_source == "native").all() and (requests.output_tokens == 12).all()
    assert (speculative.acceptance_source == "requests").all() and speculative.tau.gt(1).all()
    assert (speculative.margin_source == "baseline").all()
    assert points.loc["local-ar-cg0-t0-c1", "margin_source"] == "logprobs"
    # Every request of every config was sent the same prompt ids and got the same output.
    by_prompt = requests.groupby(["prompt_id"])["sha256"].nunique()
    assert (by_prompt == 1).all()
    # Two caps of topk are two servers: the fingerprint hashes SGLANG_DDTREE_MAX_TOPK.
    assert points.fingerprint.nunique() == 4
    manifest = RunStore.open(run_dir).manifest
    for label in ("ar-cg0", "b7-k1-bs8-cg0", "b16-k4-bs8-cg0"):
        caps = manifest.identities[f"local/{label}"].capabilities
        assert caps is not None and caps["token_ids"] == "native", caps
        assert any("no ids" in line for line in caps["evidence"])


def test_labels_no_rule_merged_are_flagged_indistinguishable_by_the_run(
    tmp_path: Path, port: int
) -> None:
    """Without the preset's rules both b7 labels run; their outputs and per-request acceptance
    are identical on every request, and the report and compare say so. So is b16-k1's: a tree of
    width 1 at block 8 drafts the same 7-token spine as the b7 chain (only its verify is padded
    to 17 rows: the plan keeps it apart, the run shows it accepts alike); b16-k4 (width 3) is
    not flagged."""
    spec = _spec(tmp_path, port, "completions", OWN_MAPPING)
    run_dir, points = _run(spec, tmp_path / "results")
    assert len(points) == 5 and (points.status == "ok").all()
    report = _sweeper("report", str(run_dir))
    assert report.returncode == 0, report.stderr
    html = Path(report.stdout.strip().splitlines()[-1]).read_text()
    flagged = "indistinguishable: b16 k1 bs8 = b7 k1 bs8 = b7 k4 bs8 gave identical outputs"
    assert flagged in html and "b16 k4" not in html.split("indistinguishable:")[1][:200]
    compare = _sweeper("compare", str(run_dir), str(run_dir))
    assert flagged in " ".join(compare.stdout.split())


def test_a_speed_baseline_apart_from_the_exactness_baseline(tmp_path: Path, port: int) -> None:
    """The spec names the production attention backend as the speed baseline: every
    speculative point is judged against the AR with its own flags and carries a speedup
    against each; the report says which is which."""
    runtime = {
        "extra_args": ["--page-size", "1", "--attention-backend", "triton"],
        "speed_baseline": {"attention_backend": "fa3"},
    }
    spec = _spec(tmp_path, port, "completions", runtime=runtime)
    run_dir, points = _run(spec, tmp_path / "results")
    assert {"local-ar-cg0-t0-c1", "local-ar-speed-cg0-t0-c1"} <= set(points.index)
    speculative = points[points["mode"] == "speculative"]
    assert (speculative.determinism == "exact").all()
    for _, row in speculative.iterrows():
        # A client-bound point (a loaded machine) has no speedup of either kind.
        if row.client_bound:
            assert pd.isna(row.speedup) and pd.isna(row.speed_speedup)
        else:
            assert row.speedup > 0 and row.speed_speedup > 0, row
    manifest = RunStore.open(run_dir).manifest
    assert manifest.identities["local/ar-speed-cg0"].proven  # proven like any config
    report = _sweeper("report", str(run_dir))
    html = Path(report.stdout.strip().splitlines()[-1]).read_text()
    assert "vs speed baseline" in html and "the exactness baseline" in html


#: A chat workload with a system message and a text prompt (one user message).
CHAT_PROMPTS: list[dict[str, Any]] = [
    {
        "id": "sys",
        "messages": [
            {"role": "system", "content": "answer in one line"},
            {"role": "user", "content": "why is the sea salty"},
        ],
    },
    {"id": "txt", "text": "tell me about tides"},
]
#: Builds without /tokenize: (api, the fake's switches, the prompt source negotiated).
NO_TOKENIZE = {
    "completions": ("completions", {}, PROMPT_TEXT),
    "chat": ("chat", {}, PROMPT_CHAT_ROUTE),
    "chat without prompt ids": ("chat", {"FAKE_NO_PROMPT_IDS": "1"}, PROMPT_PLAIN_CHAT),
}


@pytest.mark.parametrize("case", list(NO_TOKENIZE))
def test_a_sweep_of_a_build_without_tokenize(tmp_path: Path, port: int, case: str) -> None:
    """Issue 32: a build without /tokenize. Every point is ok with token-id verdicts; every
    config and the AR baseline were sent the same prompt in every /generate body (ids from the
    chat route, or the same text: a chat prompt as plain lines); the manifest and the report
    name the prompt source, and the report says plain chat text is not the chat template."""
    api, switches, source = NO_TOKENIZE[case]
    log = tmp_path / "requests.jsonl"
    env = {**shim_env(tmp_path), "FAKE_START_DELAY": "0.3", "FAKE_NO_TOKENIZE": "1"}
    env.update(FAKE_REQUEST_LOG=str(log), **switches)
    prompts = CHAT_PROMPTS if api == "chat" else CHAT_PROMPTS[1:]
    spec = _spec(tmp_path, port, api, runtime={"env": env}, budget=[16], topk=[4], prompts=prompts)
    run_dir, points = _run(spec, tmp_path / "results")
    assert sorted(points.index) == ["local-ar-cg0-t0-c1", "local-b16-k4-bs8-cg0-t0-c1"]
    assert (points.status == "ok").all() and (points.token_ids_source == "native").all()
    assert points.loc["local-b16-k4-bs8-cg0-t0-c1", "determinism"] == "exact"
    requests = pd.read_parquet(run_dir / "requests.parquet")
    assert (requests.token_ids_source == "native").all() and (requests.output_tokens == 12).all()
    assert (requests.groupby("prompt_id")["sha256"].nunique() == 1).all()
    manifest = RunStore.open(run_dir).manifest
    for label in ("ar-cg0", "b16-k4-bs8-cg0"):
        caps = manifest.identities[f"local/{label}"].capabilities
        assert caps is not None and caps["token_ids"] == "native", caps
        assert caps["details"]["prompt"] == source and "/tokenize: no ids" in caps["evidence"]
    # What every /generate body carried as its prompt, per server (probes and warm-up too); a
    # scoring request (input-token logprobs from a start >= 0: its scoring probe) is no prompt.
    sent: dict[str, set[str]] = {"ar": set(), "speculative": set()}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        body = entry.get("body") or {}
        if entry["path"] == "/generate" and body.get("logprob_start_len", -1) < 0:
            prompt = {k: body[k] for k in ("text", "input_ids") if k in body}
            sent["speculative" if entry["algorithm"] else "ar"].add(json.dumps(prompt))
    assert sent["ar"] == sent["speculative"], sent
    messages = [p.get("messages") or [{"role": "user", "content": p["text"]}] for p in prompts]
    want: list[dict[str, Any]]
    if source == PROMPT_CHAT_ROUTE:  # the ids the chat route renders with the model's template
        want = [{"input_ids": tokenize(render_chat(m))} for m in messages]
    elif source == PROMPT_PLAIN_CHAT:
        want = [{"text": "".join(f"{m['role']}: {m['content']}\n" for m in ms) + "assistant:"}
                for ms in messages]  # fmt: skip
    else:
        want = [{"text": p["text"]} for p in prompts]
    assert sent["ar"] == {json.dumps(w) for w in want}
    report = _sweeper("report", str(run_dir))
    assert report.returncode == 0, report.stderr
    html = Path(report.stdout.strip().splitlines()[-1]).read_text()
    assert "prompts sent as" in html and source in html
    assert ("not the model&#39;s chat" in html) == (source == PROMPT_PLAIN_CHAT)


def test_the_ar_server_scores_the_builds_samples_and_a_killed_scorer_resumes(
    tmp_path: Path, port: int
) -> None:
    """At temperature 0.7 `auto` is `scored`: the DDTREE server refuses logprobs, so the AR
    server, started once more after it, scores its samples (every scoring request goes to an
    AR server) and settles its verdict. The scorer dies mid-way: the point stays pending and
    says why; the resumed run scores only what has no score yet, then settles."""
    die = tmp_path / "die"
    die.write_text("5")  # each server answers 5 scoring requests, then exits
    log = tmp_path / "requests.log"
    env = {**shim_env(tmp_path), "FAKE_START_DELAY": "0.3", "FAKE_REQUEST_LOG": str(log)}
    spec = _spec(
        tmp_path, port, "completions", runtime={"env": {**env, "FAKE_DIE_AFTER_SCORES": str(die)}},
        budget=[16], topk=[4], temperature=[0.7], repeats=1,
    )  # fmt: skip
    data = yaml.safe_load(spec.read_text())
    data["determinism"] = {"samples": 4, "sample_tokens": 6, "sample_concurrency": 1}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    plan = _sweeper("plan", str(spec))
    assert "scores the samples of 1 point(s)" in " ".join(plan.stdout.split()), plan.stdout
    steps = json.loads(_sweeper("plan", str(spec), "--json").stdout)["hosts"][0]["steps"]
    assert [s["label"] for s in steps] == ["ar-cg0", "b16-k4-bs8-cg0", "ar-cg0-rs1"]
    assert steps[-1]["scoring"] is True and steps[-1]["request_configs"] == []
    first = _sweeper("run", str(spec), "--plain", "--results", str(tmp_path / "results"))
    assert first.returncode == 3, first.stderr[-2000:]  # a scorer died: a point is pending
    run_dir = Path(first.stdout.strip().splitlines()[-1])
    point = "local-b16-k4-bs8-cg0-t0.7-c1"
    pending = RunStore.open(run_dir).points()[point]
    assert pending["scored_pending"] is True and pending["determinism"] == "unproven"
    assert "could not be scored yet" in pending["unproven_reason"], first.stderr[-2000:]
    die.unlink()
    results = str(tmp_path / "results")
    resumed = _sweeper("run", str(spec), "--plain", "--results", results, "--resume", str(run_dir))
    assert resumed.returncode in (0, 4, 6), resumed.stderr[-3000:]  # 6: too few tokens to prove
    store = RunStore.open(run_dir)
    settled = store.points()[point]
    assert settled["scored_pending"] is False and settled["scored_by"] == "ar-cg0-rs1"
    # Settled by the judge on all of its tokens, whatever it says: the proof rides on the 2
    # measured requests (12 tokens each, their own seeds), and 2 samples per prompt of 6 tokens
    # are drawn beside them for the 4 x 6 per prompt it needs (2 x 12 + 2 x 2 x 6 = 48).
    assert settled["scored_n_tokens"] == 48 and "settled then" not in settled["sampled_detail"]
    assert settled["score_agreement"] == 0.0 and settled["score_agreement_n"] > 0
    lines = [json.loads(line) for line in (run_dir / "scores.jsonl").read_text().splitlines()]
    scorer = store.manifest.identities["local/ar-cg0-rs1"]
    assert scorer.capabilities is not None and scorer.capabilities["scoring"] == "topk"
    tests = [r for r in lines if r["point_id"] == point]
    scored = [(r["source"], r["prompt_id"], r["index"]) for r in tests if r["error"] is None]
    samples = [("sample", f"p{i}", n) for i in range(2) for n in range(2)]
    measured = [("request", "p0", 0), ("request", "p1", 1)]  # request i carries prompt i mod 2
    assert sorted(scored) == sorted(samples + measured)  # each once
    assert {r["scorer"] for r in tests} == {steps[-1]["server_config"]["id"]}
    assert any(r["error"] for r in tests)  # the scorer's death is recorded, never dropped
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    asked = [r for r in logged if r["path"] == "/generate" and r["body"].get("return_logprob")]
    assert asked and all(r["algorithm"] is None for r in asked)
