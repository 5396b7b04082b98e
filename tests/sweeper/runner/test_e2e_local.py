"""End to end: `sweeper run` on a small sweep against the real bundled runtime (tiny-random model):
AR baseline + 2 speculative configs, greedy and sampled (temperature 0.7, seed 7), 2 prompts x 2
repeats, 16 tokens; one load, the two speculative configs switched in place; every point
proven (after each switch: the same process, reporting the new config), measured, recorded, and
exact (or a near tie) against the baseline: the sampled ones token for token at the same seed,
since the runtime advertises coupled sampling. The config the answer names, measured only after
a switch, is measured again on a fresh process before the run ends: token for token its twin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis.best import served_rows, to_confirm
from sweeper.proof.scored.catalog import SCORING
from sweeper.results.store import RunStore
from sweeper.runner.start import CARRIED
from sweeper.services.runtime_package import runtime_source_hash
from tests.sweeper.sweep_fixtures import write_spec

pytestmark = pytest.mark.slow


def test_small_sweep_against_real_runtime(tmp_path: Path, port: int) -> None:
    spec = write_spec(
        tmp_path,
        port,
        fake_env=None,
        max_tokens=16,
        repeats=2,
        ready_timeout_s=240,
        temperature=(0.0, 0.7),
        extra_runtime={"device": "cpu"},
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeper.cli",
            "run",
            str(spec),
            "--plain",
            "--results",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    points = pd.read_parquet(run_dir / "points.parquet")
    assert done.returncode == 0, done.stderr[-3000:] + "\n" + points.to_string()
    requests = pd.read_parquet(run_dir / "requests.parquet")
    # The plan's six points, then each config the answer names at a level (it was only
    # switched to) measured at that level again on a fresh process (restart 1, or 2 for a
    # config named at its other level only after its first confirmation): both levels have
    # one, or two where the first confirmation moved the other config to first there.
    plan, again = points[points.restart == 0], points[points.restart > 0]
    assert list(plan["mode"]) == ["ar"] * 2 + ["speculative"] * 4
    levels = ["temperature", "concurrency"]
    per_level = again.groupby(levels).budget.size()
    assert len(per_level) == 2 and set(per_level) <= {1, 2}, again
    assert len(points) == 6 + len(again)
    assert (points.status == "ok").all()
    assert set(points.determinism[2:]) <= {"exact", "near-tie"}
    sampled = points[points["temperature"] > 0]
    assert list(sampled["sampled_check"]) == ["coupled"] * len(sampled)
    assert len(sampled) == 3 + (again["temperature"] > 0).sum()
    assert points.fingerprint.nunique() == 3  # three distinct configs, each proven
    assert len(requests) == 4 * len(points) and (requests.output_tokens > 0).all()
    # Nothing the answer names is left unconfirmed.
    manifest = RunStore.open(run_dir).manifest
    identities = {k: v.model_dump() for k, v in manifest.identities.items()}
    assert to_confirm(served_rows(points.to_dict("records"), identities)) == {}

    # Each fresh process's outputs are its switched twin's, token for token (T 0 and 0.7).
    def ids(point_ids: pd.Series) -> list[list[int]]:
        chosen = requests[requests.point_id.isin(point_ids)]
        order = chosen.sort_values(["temperature", "prompt_id", "repeat"])
        return [list(t) for t in order.token_ids]

    twin = ["budget", "topk", "block_size", *levels]
    for _, fresh in again.iterrows():
        switched = plan[(plan[twin] == fresh[twin]).all(axis=1)]
        assert len(switched) == 1
        confirming = ids(pd.Series([fresh.point_id]))
        assert ids(switched.point_id) == confirming and len(confirming) == 4
    # Beside coupling, an output token-identical to its AR twin's takes the twin's own score
    # instead of being scored again; a point whose every output is its twin's scores nothing
    # itself, not even the agreement (no scoring path of its own to show).
    scores = pd.read_json(run_dir / "scores.jsonl", lines=True)
    ar_twin = plan[(plan["mode"] == "ar") & (plan["temperature"] > 0)].iloc[0]
    exact = sampled[(sampled["mode"] == "speculative") & (sampled["determinism"] == "exact")]
    assert len(exact) > 0
    for _, point in exact.iterrows():
        mine = scores[scores.point_id == point.point_id]
        assert len(mine) == 4 and set(mine.twin_of) == {ar_twin.point_id}
        assert set(mine.scorer) == {ar_twin.server_config_id}
        twin = scores[(scores.point_id == ar_twin.point_id) & (scores.scorer == "self")]
        twin = twin.set_index(["prompt_id", "index"])
        for _, row in mine.iterrows():
            assert row.positions == twin.loc[(row.prompt_id, row["index"]), "positions"]
        assert not (scores.scorer == point.server_config_id).any()
        assert "4 of 4 outputs identical to their AR twin's" in point.scored_detail
        assert point.scored_verdict != "unproven" or "agreement" not in point.scored_detail
    # The engine's calibrated near-tie margin on every request: what the greedy judge reads.
    assert set(requests.near_tie_margin) == {SCORING["ddtree_runtime"].near_tie_margin}
    ar_sampled = requests[(requests["mode"] == "ar") & (requests["temperature"] > 0)]
    # The AR's sample margins: what tells a sampled near-tie from a divergence.
    margins = zip(ar_sampled.sample_margins, ar_sampled.output_tokens, strict=True)
    assert all(len(m) == n for m, n in margins)
    # The speculative outputs' own: each token their own draw (>= 0), as a lossless one's are.
    spec_sampled = requests[(requests["mode"] == "speculative") & (requests["temperature"] > 0)]
    assert len(spec_sampled) > 0
    own = zip(spec_sampled.sample_margins, spec_sampled.output_tokens, strict=True)
    assert all(len(m) == n and min(m) >= -1e-6 for m, n in own)  # up to float rounding
    assert (requests.output_tokens <= 16).all()
    assert requests[requests["mode"] == "speculative"].tau.ge(1).all()
    assert manifest.status == "complete"
    # One load; the speculative configs are switched in place, each proven on the same process.
    timings = manifest.timings
    confirmed = again.server_config_id.nunique()  # one load each
    assert (timings["local.loads"], timings["local.switches"]) == (1 + confirmed, 2)
    assert 0 < timings["local.switch_s"] < timings["local.ready_s"]
    served = list(manifest.identities.values())
    assert [i.served_by for i in served] == ["load", "switch", "switch"] + ["load"] * confirmed
    assert len({i.pid for i in served}) == 1 + confirmed
    # The AR -> speculative switch negotiates the new mode's paths; the speculative ->
    # speculative one keeps them (same build, same mode), saying so.
    kept = [CARRIED in (i.capabilities or {}).get("evidence", ()) for i in served]
    assert kept == [False, False, True] + [False] * confirmed
    assert served[2].capabilities == {
        **(served[1].capabilities or {}),
        "evidence": [*(served[1].capabilities or {})["evidence"], CARRIED],
    }
    assert manifest.points_total == manifest.points_done == len(points)
    assert all(i.switch_refused is None for i in served)
    # The runtime reports the source hash the controller computed from the package files at the
    # start of the run (a tree edited during the run would differ, and the manifest shows it).
    assert manifest.hosts["local"].reported_source_hash == manifest.runtime_source_hash
    assert len(runtime_source_hash()) == 64
