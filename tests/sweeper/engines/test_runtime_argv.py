"""The command line of a server config: argv elements for the bundled runtime and for SGLang."""

from __future__ import annotations

from sweeper.engines.argv import runtime_flags, serve_argv, sglang_flags
from sweeper.plan import build_plan
from sweeper.spec import parse_spec

WORKLOAD = "workload:\n  prompts: [{id: a, text: hi}]\n"


def test_runtime_flags_are_argv_elements() -> None:
    spec = parse_spec(
        "name: t\n"
        "runtime:\n"
        "  device: cpu\n"
        "  dtype: float32\n"
        "  max_batch: 4\n"
        "  extra_args: ['--served-model-name', '\"; touch /tmp/pwned #\"']\n"
        "grid: {budget: [16], topk: [4], cuda_graph: [false], tp: [2], eager: [true]}\n" + WORKLOAD
    )
    plan = build_plan(spec)
    ar, ddtree = (step.server_config for step in plan.hosts[0].steps)
    assert runtime_flags(ddtree, spec.runtime) == [
        "--model", "smollm2-135m", "--draft", "ngram",
        "--speculative", "ddtree", "--budget", "16", "--topk", "4", "--block-size", "8",
        "--disable-cuda-graph",
        "--device", "cpu", "--dtype", "float32", "--max-batch", "4",
        "--tp", "2", "--eager",
        "--served-model-name", '"; touch /tmp/pwned #"',
    ]  # fmt: skip
    assert runtime_flags(ar, spec.runtime)[:7] == [
        "--model", "smollm2-135m", "--draft", "ngram", "--speculative", "none",
        "--disable-cuda-graph",
    ]  # fmt: skip
    argv = serve_argv(ddtree, spec.runtime, python="py", host="127.0.0.1", port=9, launch_id="L")
    assert argv[:4] == ["py", "-m", "ddtree_runtime", "serve"]
    assert argv[-6:] == ["--host", "127.0.0.1", "--port", "9", "--launch-id", "L"]


def test_grid_flag_overrides_runtime_setting() -> None:
    spec = parse_spec(
        "name: t\nruntime: {dtype: float32}\ngrid: {budget: [8], topk: [1], dtype: [bfloat16]}\n"
        + WORKLOAD
    )
    flags = runtime_flags(build_plan(spec).hosts[0].steps[1].server_config, spec.runtime)
    assert flags.count("--dtype") == 1
    assert flags[flags.index("--dtype") + 1] == "bfloat16"


def test_sglang_command_uses_its_own_flags() -> None:
    spec = parse_spec(
        "name: t\n"
        "runtime:\n"
        "  engine: sglang\n"
        "  model: /models/big-moe\n"
        "  draft: /models/dflash-drafter\n"
        "  speculative_algorithm: EAGLE3\n"
        "  max_batch: 64\n"
        "grid: {budget: [16], topk: [4], block_size: [8], cuda_graph: [false], tp_size: [8]}\n"
        + WORKLOAD
    )
    ar, ddtree = (step.server_config for step in build_plan(spec).hosts[0].steps)
    assert sglang_flags(ddtree, spec.runtime) == [
        "--model-path", "/models/big-moe",
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "/models/dflash-drafter",
        "--speculative-num-draft-tokens", "16",
        "--speculative-eagle-topk", "4",
        "--speculative-num-steps", "8",
        "--disable-cuda-graph",
        "--max-running-requests", "64",
        "--tp-size", "8",
    ]  # fmt: skip
    assert sglang_flags(ar, spec.runtime) == [
        "--model-path", "/models/big-moe", "--disable-cuda-graph",
        "--max-running-requests", "64", "--tp-size", "8",
    ]  # fmt: skip
    argv = serve_argv(ar, spec.runtime, python="python3", host="0.0.0.0", port=30000, launch_id="x")
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
    assert argv[-4:] == ["--host", "0.0.0.0", "--port", "30000"]
