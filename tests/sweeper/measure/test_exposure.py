"""Exposure into the records: read from each engine's stream as it gives it, aggregated per point,
and what an engine does not report stays None with a note (never 0)."""

from __future__ import annotations

from sweeper.engines.ddtree_runtime import DDTreeReader
from sweeper.engines.sglang import SGLangReader
from sweeper.engines.stream import ChunkReader
from sweeper.engines.vllm import read_counters
from sweeper.measure.exposure import histogram_from_positions, point_exposure
from sweeper.results.records import EXPOSURE_COLUMNS

DDTREE = {
    "verify_rounds": 5,
    "tau": 2.0,
    "padded_rounds": 3,
    "padding_rows": 20,
    "fixed_shape_rounds": 5,
    "cuda_graph_rounds": 0,
    "batched_rounds": 2,
    "max_tree_depth": 4,
    "max_tree_width": 2,
    "max_tree_nodes": 9,
    "max_verify_width": 17,
    "accepted_hist": [1, 2, 2, 0],
}


def test_the_runtime_stream_carries_every_exposure_column() -> None:
    reader = DDTreeReader(chat=False)
    reader.feed({"choices": [{"text": "a", "token_ids": [1]}]})
    reader.feed({"choices": [], "usage": {"completion_tokens": 1}, "ddtree": DDTREE})
    fields = reader.fields()
    assert {k: fields[k] for k in EXPOSURE_COLUMNS} == {k: DDTREE[k] for k in EXPOSURE_COLUMNS}


def test_sglang_gives_its_histogram_and_nothing_else() -> None:
    reader = SGLangReader(chat=False)
    details = {
        "spec_accept_length": 2.5,
        "spec_verify_ct": 4,
        "spec_correct_drafts_histogram": [1, 0, 3],
    }
    reader.feed({"choices": [{"text": "a", "token_ids": [1]}], "sglext": {}})
    reader.feed({"choices": [], "sglext": {"spec_tokens_details": details}})
    fields = reader.fields()
    assert fields["accepted_hist"] == [1, 0, 3] and fields["verify_rounds"] == 4
    assert all(fields[k] is None for k in EXPOSURE_COLUMNS if k != "accepted_hist")


def test_a_plain_stream_reports_no_exposure() -> None:
    fields = ChunkReader(chat=True).fields()
    assert all(fields[k] is None for k in EXPOSURE_COLUMNS)


def test_point_sums_counts_maxes_sizes_adds_histograms_and_skips_failed_requests() -> None:
    other = {**DDTREE, "padded_rounds": 0, "max_tree_nodes": 12, "accepted_hist": [0, 1]}
    failed = {**dict.fromkeys(EXPOSURE_COLUMNS), "error": "HTTP 500: boom"}
    point = point_exposure([DDTREE, other, failed], None, "ddtree_runtime")
    assert point["padded_rounds"] == 3 and point["padding_rows"] == 40
    assert point["fixed_shape_rounds"] == 10 and point["batched_rounds"] == 4
    assert point["max_tree_nodes"] == 12 and point["max_verify_width"] == 17
    assert point["accepted_hist"] == [1, 3, 2, 0]
    assert point["exposure_note"] == ""


def test_unknown_stays_none_and_is_named() -> None:
    rows = [{**dict.fromkeys(EXPOSURE_COLUMNS), "accepted_hist": [2, 1]}]
    point = point_exposure(rows, None, "sglang")
    assert point["padded_rounds"] is None and point["accepted_hist"] == [2, 1]
    assert point["exposure_note"].startswith("not reported by engine sglang (unknown, not 0): ")
    assert "padded_rounds" in point["exposure_note"]
    assert "accepted_hist" not in point["exposure_note"]
    # One request without a value makes the point's value unknown, not a partial sum.
    partial = point_exposure([DDTREE, {**DDTREE, "padded_rounds": None}], None, "x")
    assert partial["padded_rounds"] is None and "padded_rounds" in partial["exposure_note"]


def test_vllm_per_position_counters_give_the_point_histogram() -> None:
    # 10 drafts: 6 accepted >= 1 token, 3 >= 2, 1 all 3.
    page = "\n".join(
        [
            'vllm:spec_decode_num_drafts_total{engine="0"} 10.0',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 6.0',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 3.0',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="2"} 1.0',
        ]
    )
    counters = read_counters(page)
    assert counters is not None
    assert histogram_from_positions(counters) == [4, 3, 2, 1]
    rows = [dict.fromkeys(EXPOSURE_COLUMNS)]
    point = point_exposure(rows, counters, "vllm")
    assert point["accepted_hist"] == [4, 3, 2, 1] and point["padded_rounds"] is None
    assert histogram_from_positions({"drafts": 3.0}) is None
