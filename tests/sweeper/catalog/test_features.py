"""The feature table (issue 47): one row per engine x feature, the one check that refuses a
feature an engine or build would drop in one line naming engine, build and parameter, and the
build conditions judged again against the build a server reports."""

from __future__ import annotations

from sweeper.catalog.features import (
    FEATURE_NAMES,
    FEATURE_TABLE,
    RUNTIME_PROCESSORS_SINCE,
    Support,
    Table,
)
from sweeper.config.features import FEATURES

PLANTED = Table(
    (
        Support("vllm", "min_p", "min_p", speculative="ignored", issue="vllm#42744"),
        Support("vllm", "regex", "structured_outputs.regex", since="0.10.2"),
        Support(
            "sglang",
            "logit_bias",
            "logit_bias",
            speculative="rejected",
            fixed_in="2026-08-01",
            issue="sglang#10617",
        ),
    )
)


def test_the_table_names_the_config_rooms_features() -> None:
    assert tuple(f.name for f in FEATURES) == FEATURE_NAMES
    assert {row.feature for row in FEATURE_TABLE.rows.values()} == set(FEATURE_NAMES)


def test_the_bundled_runtime_takes_every_feature_under_its_own_name() -> None:
    for name in FEATURE_NAMES:
        assert FEATURE_TABLE.body_field("ddtree_runtime", name) == name
        for speculative in (False, True):
            assert FEATURE_TABLE.refusal("ddtree_runtime", name, speculative=speculative) is None
            assert (
                FEATURE_TABLE.refusal(
                    "ddtree_runtime", name, speculative=speculative, build=RUNTIME_PROCESSORS_SINCE
                )
                is None
            )
    # A runtime before the processors ignores their fields: it would drop them silently.
    assert FEATURE_TABLE.refusal("ddtree_runtime", "min_p", speculative=True, build="0.1.0") is None
    assert FEATURE_TABLE.refusal("ddtree_runtime", "regex", speculative=True, build="0.1.0") == (
        "ddtree_runtime 0.1.0: regex is honoured only since 0.2.0"
    )


def test_an_openai_endpoint_takes_openais_documented_fields_only() -> None:
    taken = [
        n for n in FEATURE_NAMES if FEATURE_TABLE.refusal("openai", n, speculative=True) is None
    ]
    assert taken == [
        "frequency_penalty",
        "presence_penalty",
        "logit_bias",
        "stop",
        "response_format",
        "n",
        "logprobs",
    ]
    assert FEATURE_TABLE.refusal("openai", "min_p", speculative=False) == (
        "openai (any build) does not take min_p (not in OpenAI's API)"
    )


def test_a_feature_without_a_row_is_refused_never_sent_unchecked() -> None:
    assert FEATURE_TABLE.refusal("sglang", "min_p", speculative=False, build="0.5.15") == (
        "sglang 0.5.15: min_p has no row in the feature table (sweeper/catalog/features.py): "
        "refused, never sent unchecked"
    )


def test_a_speculative_path_known_to_drop_a_feature_is_refused_on_speculative_servers() -> None:
    assert PLANTED.refusal("vllm", "min_p", speculative=False) is None
    assert PLANTED.refusal("vllm", "min_p", speculative=True, build="0.32.0") == (
        "vllm 0.32.0: its speculative path ignores min_p (vllm#42744)"
    )
    # Fixed in a later build: refused before it, not from it on; undecided before a build.
    assert PLANTED.refusal("sglang", "logit_bias", speculative=True) is None
    assert PLANTED.build_condition("sglang", "logit_bias", speculative=True) == (
        "sglang: logit_bias needs a build >= 2026-08-01 (sglang#10617)"
    )
    assert PLANTED.refusal("sglang", "logit_bias", speculative=True, build="2026-07-31") == (
        "sglang 2026-07-31: its speculative path rejects logit_bias (sglang#10617), "
        "fixed in 2026-08-01"
    )
    assert PLANTED.refusal("sglang", "logit_bias", speculative=True, build="2026-08-01") is None
    # A version is no date: which came first cannot be told, so it is refused.
    assert PLANTED.refusal("sglang", "logit_bias", speculative=True, build="0.5.15") is not None


def test_a_feature_honoured_since_a_build_is_judged_against_the_build_reported() -> None:
    assert PLANTED.refusal("vllm", "regex", speculative=False) is None
    assert PLANTED.build_condition("vllm", "regex", speculative=False) == (
        "vllm: regex needs a build >= 0.10.2"
    )
    assert PLANTED.refusal("vllm", "regex", speculative=False, build="0.9.1") == (
        "vllm 0.9.1: regex is honoured only since 0.10.2"
    )
    for build in ("0.10.2", "0.32.0", "v0.11.0rc1"):
        assert PLANTED.refusal("vllm", "regex", speculative=False, build=build) is None
    assert PLANTED.refusal("vllm", "regex", speculative=False, build="(build not reported)")
    assert PLANTED.body_field("vllm", "regex") == "structured_outputs.regex"
