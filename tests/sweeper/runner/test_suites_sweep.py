"""Datasets end to end against the fake runtime on loopback: MT-Bench's two turns, HumanEval and
synthetic prompts in one sweep; later turns carry the first server's answers, the same for every
config; a fault that shows only with history is diagnosed to turn 2; asked lengths are served.

The fake stands in for the runtime where the runtime cannot misbehave on demand
(`FAKE_WRONG_LATER_TURNS`); the real runtime's token counts are checked in
`tests/sweeper/measure/test_suites_runtime.py`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper.analysis.compare import compare_loaded
from sweeper.diagnosis.followup import plan_followup
from sweeper.diagnosis.runs import diagnose_run, run_requests
from sweeper.diagnosis.text import sentence
from sweeper.report.assemble import build_view
from sweeper.report.render import render_html
from sweeper.results.reader import read_run
from sweeper.spec import load_spec
from tests.sweeper.runner.test_runner import _run

pytestmark = pytest.mark.slow

DATASETS = [
    {"suite": "mt-bench", "sample": 8},
    {"suite": "humaneval", "sample": 2},
    {"synthetic": {"count": 3, "input_tokens": {"dist": "uniform", "min": 16, "max": 64}}},
]


def test_a_fault_in_later_turns_only_is_diagnosed_to_turn_2(tmp_path: Path, port: int) -> None:
    env = {"FAKE_WRONG_LATER_TURNS": "1", "FAKE_WHEN": "topk=4"}
    workload = {"api": "chat", "prompts": [], "datasets": DATASETS, "concurrency": [2]}
    code, store, points, requests = _run(tmp_path, port, env, extra_workload=workload)
    assert code == 4  # a determinism violation
    # One MT-Bench question per category (stratified), two turns each; 2 + 3 single prompts.
    mt = requests[requests.dataset == "mt-bench"]
    assert mt.category.nunique() == 8 and set(mt.turn) == {1, 2}
    assert len(requests) == 3 * (16 + 2 + 3) * 2  # 3 configs x prompts x 2 repeats
    # Turn 2's history is the AR baseline's greedy turn-1 answer, asked once for the run.
    inputs = json.loads((store.dir / "inputs.json").read_text())
    ar_turn1 = mt[(mt["mode"] == "ar") & (mt.turn == 1) & (mt.repeat == 0)]
    assert dict(zip(ar_turn1.prompt_id, ar_turn1.text, strict=True)) == inputs["answers"]
    for prompt_id, resolved in inputs["prompts"].items():
        if prompt_id.startswith("mt-bench"):
            assert resolved["messages"][1]["content"] == inputs["answers"][prompt_id[:-1] + "1"]
    # Exactness per turn: the broken config diverges on turn 2 only.
    verdicts = requests.groupby(["topk", "turn"], dropna=False).verdict.agg(set).to_dict()
    assert verdicts[(4.0, 2)] == {"diverged"} and verdicts[(4.0, 1)] == {"exact"}
    assert verdicts[(1.0, 2)] == {"exact"}
    diagnosis = diagnose_run(read_run(store.dir))
    assert diagnosis is not None
    print(sentence(diagnosis))
    rule = {c.key() for t in diagnosis.rule for c in (t.condition, *t.together)}
    assert ("turn", "=", "2") in rule and ("topk", "=", "4") in rule
    # Synthetic prompts: sent as token ids, charged exactly as asked, answers held.
    synthetic = requests[requests.dataset == "synthetic"]
    assert (synthetic.prompt_tokens == synthetic.asked_input_tokens).all()
    assert synthetic.asked_input_tokens.between(16, 64).all()
    assert synthetic.length_held.all() and (points.lengths_not_held == 0).all()
    # A follow-up keeps a failing turn 2 with the turn its history is answered from.
    rows, _kinds = run_requests([read_run(store.dir)])
    followup = plan_followup(load_spec(tmp_path / "t.yaml"), diagnosis, rows)
    (spec,) = followup.specs
    kept = {p.id: p for p in spec.workload.prompts}
    assert all(p.turn == 1 or set(p.answers_from) <= set(kept) for p in kept.values())
    assert any(p.turn == 2 for p in kept.values()) and not spec.workload.datasets
    # The report's per-dataset table: one row per (config, dataset); compare matches per dataset.
    html = render_html(build_view(read_run(store.dir)))
    section = html[html.index("<h2>Per dataset</h2>") : html.index('<h2 id="figures">Figures</h2>')]
    assert section.count('<td class="l">mt-bench</td>') == 2  # two speculative configs
    assert "humaneval" in section and "synthetic" in section and "T=0" in section
    labels = {
        row.label for row in compare_loaded(read_run(store.dir), read_run(store.dir), 0.05).rows
    }
    assert "b8 k4 bs4 T=0 c=2 [mt-bench]" in labels and len(labels) == 9
