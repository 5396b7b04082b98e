"""The real runtime with a planted fault that changes only the sampled distribution on drafted
positions (`hot_drafts`: temperature x 1.6 at tree depth >= 1; greedy untouched, repeats
identical): caught as `diverged` against AR at the same seed, exit 4, while its greedy points stay
exact. smollm2-135m with the n-gram drafter on prompts it continues from their own text, so
drafts are accepted and the fault acts (tiny-random's drafts are rarely accepted). Beside the
coupled verdict, every sampled request is scored by its own server's prefill (`POST /score`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sweeper.proof.scored.catalog import SCORING
from tests.sweeper.planted import plant_fault

pytestmark = pytest.mark.slow


def test_a_sampling_only_fault_in_the_runtime_is_diverged_at_the_same_seed(
    tmp_path: Path, port: int
) -> None:
    package = plant_fault(tmp_path / "hot", "hot_drafts")
    spec = {
        "name": "hot",
        "hosts": ["local"],
        "runtime": {
            "model": "smollm2-135m",
            "draft": "ngram",
            "device": "cpu",
            "port": port,
            "ready_timeout_s": 240,
            "package": str(package),
        },
        "grid": {"budget": [8], "topk": [1], "block_size": [8], "temperature": [0, 0.7]},
        "workload": {
            "api": "chat",
            "prompts": [
                {"id": "count", "text": "Continue the sequence: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"},
                {
                    "id": "repeat-list",
                    "text": "Repeat this list exactly, one item per line: apple, banana, "
                    "cherry, apple, banana, cherry.",
                },
            ],
            "max_tokens": 24,
            "repeats": 2,
            "seed": 1234,
        },
    }
    path = tmp_path / "hot.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    done = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "run", str(path), "--plain"]
        + ["--results", str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 4, done.stderr[-3000:]
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    points = pd.read_parquet(run_dir / "points.parquet").set_index("point_id")
    assert points.loc["local-b8-k1-bs8-cg0-t0-c1", "determinism"] == "exact"
    sampled = points.loc["local-b8-k1-bs8-cg0-t0.7-c1"]
    assert (sampled["determinism"], sampled["sampled_check"]) == ("diverged", "coupled")
    requests = pd.read_parquet(run_dir / "requests.parquet")
    spec_sampled = requests[(requests["mode"] != "ar") & (requests["temperature"] > 0)]
    # Repeats agree (the uniform is still a function of seed and position): diverged, never
    # nondeterministic; and never called a near-tie (the AR's margins there are not tiny).
    assert set(spec_sampled["verdict"]) <= {"exact", "diverged"}
    assert "diverged" in set(spec_sampled["verdict"])
    # Scored beside coupling: each server rated its own sampled requests exactly (POST /score),
    # the AR's as the control; the speculative server also rated AR's outputs, identically.
    ar = points.loc["local-ar-cg0-t0.7-c1"]
    assert ar["scored_by"] == "self" and ar["scored_control_tokens"] > 0
    assert ar["scored_control_impossible"] == 0 and pd.isna(ar.get("scored_verdict"))
    assert sampled["scored_exact_share"] == 1.0
    # Each position's top k came back with its score: the power is stated, never unknown.
    assert sampled["scored_power"] > 0
    assert sampled["scored_control_tokens"] == ar["scored_control_tokens"]
    # Every sampled measured request drew its own seed and was scored (2 prompts x 2 repeats);
    # its verdict is decided where its tokens can state the power, else unproven for that.
    measured = spec_sampled[spec_sampled["seed"].notna()]
    assert measured["seed"].nunique() == len(measured) == 4
    assert sampled["scored_n_tokens"] == sum(len(ids) for ids in measured["token_ids"])
    assert sampled["scored_by"] == "self" and "of 4 sample(s) scored" in sampled["scored_detail"]
    decided = sampled["scored_verdict"] in ("shifted", "distribution-ok")
    assert decided or "too few tokens to prove anything" in sampled["scored_detail"]
    assert (sampled["score_agreement"], sampled["score_agreement_n"] > 0) == (0.0, True)
    scores = pd.read_json(run_dir / "scores.jsonl", lines=True)
    assert set(scores["basis"]) == {"exact"} and set(scores["source"]) == {"request"}
    assert set(scores["role"]) == {"test", "control"} and scores["error"].isna().all()
    # An output that is token-identical to its AR twin's carries the twin's own score; the
    # diverged ones (one at least) were scored by the speculative server itself.
    mine = scores[scores.point_id == sampled.name]
    twins, own = mine[mine.twin_of.notna()], mine[mine.scorer == "self"]
    assert len(own) >= 1 and len(own) + len(twins) == 4
    control = scores[(scores.point_id == ar.name) & (scores.scorer == "self")]
    control = control.set_index(["prompt_id", "index"])
    for _, row in twins.iterrows():
        assert row.positions == control.loc[(row.prompt_id, row["index"]), "positions"]
    # Each score states its scorer's near-tie margin (nats), the catalog's for the runtime.
    assert set(scores["near_tie_margin"]) == {SCORING["ddtree_runtime"].near_tie_margin}
