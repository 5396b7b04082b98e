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
    # min-p, stop strings, n (= 1) and logprobs since 0.1.0, the others since 0.2.0.
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
    *(Support("openai", name, name, speculative="unknown") for name in _OPENAI_DOCUMENTED),
    Support("openai", "min_p", None, note="not in OpenAI's API"),
    Support("openai", "repetition_penalty", None, note="not in OpenAI's API"),
    Support("openai", "regex", None, note="not in OpenAI's API (use response_format)"),
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
