"""A switch's body -> the config after it (`config.switched`): pure, the words of every refusal."""

from __future__ import annotations

from typing import Any

import pytest

from ddtree_runtime.server.config import SWITCHABLE, ServeConfig, SwitchRefused, switched

BASE = ServeConfig(budget=16, topk=4, block_size=8, launch_id="L")


def test_given_fields_replace_the_current_ones_and_the_rest_stay() -> None:
    changes = {"budget": 8, "accept_threshold": 0.5, "cuda_graph": True}
    assert switched(BASE, changes) == BASE.model_copy(update=changes)
    assert switched(BASE, {}) == BASE
    assert switched(BASE, {"speculative": "none"}).speculative == "none"  # AR is a config too


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"budget": -1}, "budget", "budget must be an integer >= 0 (tree nodes per verify"),
        ({"topk": 0}, "topk", "topk must be an integer >= 1"),
        ({"block_size": 1}, "block_size", "block_size must be an integer >= 2"),
        ({"budget": "8"}, "budget", "budget must be an integer"),
        ({"accept_threshold": 0}, "accept_threshold", "must be a number in (0, 1]"),
        ({"accept_threshold": 1.5}, "accept_threshold", "got 1.5"),
        ({"accept_threshold": True}, "accept_threshold", "accept_threshold must be a number"),
        ({"speculative": "maybe"}, "speculative", "speculative must be 'ddtree' or 'none'"),
        ({"cuda_graph": "yes"}, "cuda_graph", "cuda_graph must be true or false"),
        ({"draft": 3}, "draft", "draft must be a string"),
        ({"max_batch": 4}, "max_batch", "needs a restart"),
        ({"model": "tiny-random"}, "model", "needs a restart"),
        ({"dtype": "bfloat16"}, "dtype", "needs a restart"),
        ({"device": "cuda"}, "device", "needs a restart"),
        ({"colour": "red"}, "colour", "unknown field 'colour'"),
    ],
)
def test_a_bad_field_is_refused_naming_it(body: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(SwitchRefused) as refused:
        switched(BASE, body)
    assert refused.value.field == field
    assert words in str(refused.value)


def test_a_body_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(SwitchRefused, match="a JSON object"):
        switched(BASE, [1, 2])


def test_switchable_fields_are_serve_config_fields_and_fingerprinted() -> None:
    from ddtree_runtime.server.config import FINGERPRINT_KEYS

    assert set(SWITCHABLE) <= set(FINGERPRINT_KEYS) <= set(ServeConfig.model_fields)
