"""The seed's case end to end, small: a copy of the real runtime whose real rows see padding
columns (`pad_visible`, planted as mask.py's recipe says) is the run's runtime, proven by its
source hash; the sweep catches it and the diagnosis puts the violations on the padded rounds.

tiny-random keeps it fast. On this CPU the runtime's verify equals AR bit for bit in float32 (no
divergence on smollm2 or tiny-random in float32, bfloat16 or float16 at any width measured), so
any divergence is the fault and the near-tie margin is 0: tiny-random's top-2 margins are so
small that the default margin would call the fault a near-tie.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweeper.diagnosis.runs import diagnose_run
from sweeper.diagnosis.text import sentence
from sweeper.results.reader import read_run
from sweeper.services.runtime_package import runtime_source_hash
from tests.sweeper.planted import plant_fault

pytestmark = pytest.mark.slow


def _spec(tmp: Path, port: int, package: Path) -> Path:
    spec = {
        "name": "planted",
        "hosts": ["local"],
        "runtime": {
            "model": "tiny-random",
            "port": port,
            "ready_timeout_s": 120,
            "package": str(package),
        },
        "grid": {"budget": [8], "topk": [1], "block_size": [4], "cuda_graph": [True, False]},
        "workload": {
            "api": "completions",
            "prompts": [
                {"id": "abc", "text": "abcabcabcabc"},
                {"id": "count", "text": "1, 2, 3, 4, 5, 6,"},
            ],
            "max_tokens": 12,
            "repeats": 2,
            "concurrency": [1, 2],
            "seed": 1,
        },
        "determinism": {"near_tie_margin": 0.0},
    }
    path = tmp / "planted.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_planted_padding_fault_is_caught_and_put_on_the_padded_rounds(
    tmp_path: Path, port: int
) -> None:
    package = plant_fault(tmp_path / "pad_visible", "pad_visible")
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(_spec(tmp_path, port, package))]
    done = subprocess.run(
        [*argv, "--results", str(tmp_path / "results"), "--plain"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 4, done.stderr[-3000:]
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    planted = runtime_source_hash(package / "ddtree_runtime")
    assert manifest["runtime_source_hash"] == planted != runtime_source_hash()
    assert {h["reported_source_hash"] for h in manifest["hosts"].values()} == {planted}

    diagnosis = diagnose_run(read_run(run_dir))
    assert diagnosis is not None
    print(sentence(diagnosis))
    rule = {c.key() for t in diagnosis.rule for c in (t.condition, *t.together)}
    assert ("padded_rounds", ">", "0") in rule
    assert diagnosis.outside == 0  # every violation had padded rounds
