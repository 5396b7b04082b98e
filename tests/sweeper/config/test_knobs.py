"""Each knob's range is checked once in the controller (at the spec), and the runtime's server
refuses the same values with the same words: the two packages never import each other, so this
test holds their two tables together, value by value and word by word."""

from __future__ import annotations

from typing import Any

import pytest

from ddtree_runtime import knobs as runtime_knobs
from ddtree_runtime.params import EngineConfig
from ddtree_runtime.server.serve import main as serve_main
from sweeper.config import mode_of
from sweeper.config.knobs import TREE_KNOBS, knob_problem
from sweeper.spec import SpecError, parse_spec


def test_the_tables_are_one_table() -> None:
    assert {k: tuple(v) for k, v in TREE_KNOBS.items()} == {
        k: tuple(v) for k, v in runtime_knobs.TREE_KNOBS.items()
    }


def _spec_error(knob: str, value: int) -> str:
    text = f"name: t\ngrid:\n  {knob}: [{value}]\nworkload:\n  prompts: [{{id: a, text: hi}}]\n"
    with pytest.raises(SpecError) as caught:
        parse_spec(text, source="s.yaml")
    (issue,) = caught.value.issues
    return issue.message


def _runtime_error(knob: str, value: int, capsys: pytest.CaptureFixture[str]) -> str:
    # The server's own entry point: it refuses the flag before it loads any model.
    with pytest.raises(SystemExit) as caught:
        serve_main(["--model", "/nonexistent", f"--{knob.replace('_', '-')}", str(value)])
    assert caught.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("knob", sorted(TREE_KNOBS))
def test_spec_and_runtime_server_refuse_one_range_in_one_wording(
    knob: str, capsys: pytest.CaptureFixture[str]
) -> None:
    low = TREE_KNOBS[knob].low
    for value in (low - 1, low - 5):
        words = _spec_error(knob, value)
        assert words == knob_problem(knob, value) == runtime_knobs.knob_problem(knob, value)
        assert words.startswith(f"{knob} must be an integer >= {low} (")
        assert words in _runtime_error(knob, value, capsys)
    # The lowest value is valid on both sides.
    assert parse_spec(
        f"name: t\ngrid:\n  {knob}: [{low}]\nworkload:\n  prompts: [{{id: a, text: hi}}]\n"
    )
    lowest: dict[str, Any] = {knob: low}
    assert getattr(EngineConfig(**lowest), knob) == low


def test_budget_zero_is_autoregressive_once() -> None:
    # The one rule: budget 0 makes a server config AR whatever else it sets; an engine whose
    # mapping has no budget knob is always speculative.
    assert mode_of({"budget": 0, "topk": 4, "block_size": 8}) == "ar"
    assert mode_of({"budget": 1, "topk": 1}) == "speculative"
    assert mode_of({"block_size": 8}) == "speculative"
