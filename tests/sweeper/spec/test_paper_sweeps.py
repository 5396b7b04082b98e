"""The papers' sweeps as shipped: sweeps/ddtree-paper.yaml (bundled runtime) and its SGLang twin
run the DDTree paper's setup (Qwen3-8B + its DFlash drafter, block 16, the paper's budgets, six
datasets at the paper's counts, 2048 tokens, T 0 and 1) against the paper's own figures, and
sweeps/local-paper.yaml, the CPU twin, loads here with its measured reference."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.plan import build_plan
from sweeper.report.paper_layout import method_of
from sweeper.spec import load_spec
from tests.sweeper.shipped_specs import load_shipped

ROOT = Path(__file__).resolve().parents[3]
PAPER_BUDGETS = [16, 32, 64, 128, 256, 512, 1024]
#: The paper's samples (run_benchmark.sh) of the six datasets; MT-Bench's 80 have two turns.
PAPER_ITEMS = {"gsm8k": 128, "math500": 128, "humaneval": 164, "mbpp": 128, "mt-bench": 80}
PAPER_ITEMS["alpaca"] = 128


@pytest.mark.parametrize("name", ["ddtree-paper.yaml", "ddtree-paper-sglang.yaml"])
def test_the_paper_sweeps_are_the_papers_setup(name: str) -> None:
    spec = load_shipped(ROOT / "sweeps" / name)
    assert spec.runtime.draft.endswith("Qwen3-8B-DFlash-b16")
    assert spec.runtime.model.endswith("Qwen3-8B")
    assert spec.grid.block_size == [16] and spec.workload.max_tokens == 2048
    assert spec.grid.temperature == [0, 1]
    assert spec.reference is not None and spec.reference.table is not None
    assert spec.reference.table.name == "ddtree-paper-qwen3-8b"
    labels = [d.label for d in spec.workload.datasets]
    assert labels == list(PAPER_ITEMS) and set(labels) <= set(spec.reference.table.datasets)
    # Each recipe at the paper's count (the local copies of the hub's sets hold only 4 rows).
    counts = {d.label: d.limit for d in spec.workload.datasets}
    assert counts["humaneval"] == 164 and counts["mt-bench"] == 80 and counts["gsm8k"] == 128
    turns = [p for p in spec.workload.prompts if p.dataset == "mt-bench"]
    assert len(turns) == 160
    # The configs measured (not the AR start that scores SGLang's sampled points after them).
    steps = [s for h in build_plan(spec).hosts for s in h.steps if not s.scoring]
    configs = [s.server_config for s in steps]
    methods: dict[str, list[int]] = {}
    for config in configs:
        row = {"mode": config.mode, **config.params}
        methods.setdefault(method_of(row), []).append(int(config.params.get("budget", 0)))
    assert sorted(methods["tree"]) == PAPER_BUDGETS
    assert len(methods["chain"]) == 1 and methods["ar"] == [0]


def test_offline_without_the_hub_sets_validate_names_each_missing_one(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "validate", str(ROOT / "sweeps/ddtree-paper.yaml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    hub = ["openai/gsm8k", "HuggingFaceH4/MATH-500", "google-research-datasets/mbpp"]
    hub.append("tatsu-lab/alpaca")
    assert len(lines) == 4 and all(f"hf:{n}" in line for n, line in zip(hub, lines, strict=True))
    assert all("offline mode is on" in line for line in lines)


def test_the_cpu_twin_loads_with_its_measured_reference() -> None:
    spec = load_spec(ROOT / "sweeps" / "local-paper.yaml")
    assert spec.reference is not None and spec.reference.table is not None
    assert spec.reference.table.name == "local-paper-smollm2"
    labels = [d.label for d in spec.workload.datasets]
    assert labels == ["humaneval", "mt-bench", "handwritten"]
    assert set(labels) == set(spec.reference.table.datasets)
    configs = [s.server_config for h in build_plan(spec).hosts for s in h.steps]
    methods = sorted(method_of({"mode": c.mode, **c.params}) for c in configs)
    assert methods == ["ar", "chain", "tree", "tree"]
