"""One label recipe: the plan's id part and the report's label are two spellings of the same
parts, from a config or from the record columns it wrote."""

from __future__ import annotations

import pandas as pd

from sweeper.config import SPEED_BASELINE, ServerConfig, label_parts, point_label
from sweeper.config.labels import spoken_label

TREE = ("budget", "topk", "block_size")


def test_ids_and_people_read_the_same_parts() -> None:
    cases = {
        ServerConfig.of({"cuda_graph": True}, {"budget": 16, "topk": 4, "block_size": 8}): (
            "b16-k4-bs8-cg1",
            "b16 k4 bs8 cg",
        ),
        ServerConfig.of({"cuda_graph": False}, {"budget": 0, "topk": 1, "block_size": 8}): (
            "ar-cg0",
            "AR",
        ),
        ServerConfig.make("ar", {"cuda_graph": True, SPEED_BASELINE: True}): (
            "ar-speed-cg1",
            "AR speed cg",
        ),
        ServerConfig.of({}, {"budget": 4}): ("b4", "b4"),  # vLLM n-gram: no topk, no block
        ServerConfig.of({"attn": "sdpa"}, {"budget": 4, "topk": 2, "block_size": 4}): (
            "b4-k2-bs4-attnsdpa-",
            "b4 k2 bs4 attn=sdpa",
        ),
    }
    for config, (label, spoken) in cases.items():
        assert config.label.startswith(label), config.label
        # The record columns the config writes, read back as a DataFrame row (NaN for None).
        (row,) = pd.DataFrame([config.columns("ddtree_runtime")]).to_dict("records")
        assert row["server_label"] == config.label
        assert point_label(row) == spoken
        assert spoken_label(label_parts(config.mode, config.params, config.extra_params)) == spoken


def test_restarts_are_in_the_id_only() -> None:
    config = ServerConfig.of({"attn": "sdpa"}, {"budget": 4, "topk": 2, "block_size": 4})
    again = config.again(2)
    assert again.label.endswith("-rs2") and again.id != config.id
    assert (
        point_label(again.columns("x")) == point_label(config.columns("x")) == "b4 k2 bs4 attn=sdpa"
    )


def test_configs_that_differ_only_in_an_extra_flag_read_apart() -> None:
    """A grid over `dtype` (or any server flag beyond the named keys): each config's label names
    its value, read back from its record columns as a DataFrame gives them."""
    tree = {"budget": 16, "topk": 4, "block_size": 8}
    configs = [
        ServerConfig.of({"cuda_graph": True, "dtype": d}, tree) for d in ("bfloat16", "float32")
    ]
    rows = pd.DataFrame([c.columns("ddtree_runtime") for c in configs]).to_dict("records")
    assert [point_label(r) for r in rows] == [
        "b16 k4 bs8 cg dtype=bfloat16",
        "b16 k4 bs8 cg dtype=float32",
    ]
    # the id keeps its spelling: the flag, then a hash of the exact values
    assert configs[0].label.startswith("b16-k4-bs8-cg1-dtypebfloat16-")
