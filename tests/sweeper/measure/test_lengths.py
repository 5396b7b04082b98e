"""Asked lengths on records: what each request asked and got, and a point's note when answers
ended before the length they were to hold (an engine without ignore_eos/min_tokens)."""

from __future__ import annotations

from sweeper.config import RequestConfig
from sweeper.engines.base import RequestSpec
from sweeper.engines.common import openai_body
from sweeper.measure.lengths import point_lengths, request_columns
from sweeper.measure.workload import expand_requests
from sweeper.spec import PromptSpec

HELD = PromptSpec(id="s0", tokens=4, max_tokens=6, hold_output=True, dataset="synthetic", turn=1)
FREE = PromptSpec(id="he", text="def f():", dataset="humaneval", turn=1)
IDS = {"s0": {"token_ids": [5, 6, 7, 8]}}


def _requests(length_control: tuple[str, ...]) -> list[RequestSpec]:
    return expand_requests(
        [HELD, FREE],
        RequestConfig.make(0.0, 16, 1, seed=1),
        repeats=1,
        chat=True,
        length_control=length_control,
        inputs=IDS,
    )


def test_a_held_prompt_asks_the_engine_for_its_length_where_the_engine_takes_it() -> None:
    held, free = _requests(("ignore_eos", "min_tokens"))
    body = openai_body(held, "m")
    # Token ids go to completions (no chat template), with its own max_tokens, held.
    assert not held.chat and body["prompt"] == [5, 6, 7, 8]
    assert (body["max_tokens"], body["min_tokens"], body["ignore_eos"]) == (6, 6, True)
    assert free.chat and "min_tokens" not in openai_body(free, "m") and free.max_tokens == 16
    plain = openai_body(_requests(())[0], "m")
    assert "min_tokens" not in plain and "ignore_eos" not in plain


def test_answers_that_end_early_are_counted_and_explained() -> None:
    held, free = _requests(())
    records = [(held, {"output_tokens": 3}), (free, {"output_tokens": 2})]
    columns = request_columns(held, records[0][1])
    assert columns["asked_input_tokens"] == 4 and columns["asked_output_tokens"] == 6
    assert columns["length_held"] is False and request_columns(free, {})["length_held"] is None
    lengths = point_lengths(records)
    assert lengths["lengths_not_held"] == 1
    assert lengths["length_note"] == (
        "1 of 1 answers ended before their asked length: the engine takes neither ignore_eos "
        "nor min_tokens"
    )
    sent, _ = _requests(("ignore_eos", "min_tokens"))
    assert (
        "stopped early all the same" in point_lengths([(sent, {"output_tokens": 3})])["length_note"]
    )
    assert point_lengths([(sent, {"output_tokens": 6})]) == {
        "lengths_not_held": 0,
        "length_note": "",
    }
