"""Reading one streamed OpenAI-style response, chunk by chunk: per choice (`n` > 1: every choice,
told apart by its `index`) text, token ids, top-2 margins and finish reason; per request usage,
acceptance and exposure.

`ChunkReader` reads what every OpenAI-compatible server sends; an engine subclasses it where its
stream differs (where token ids live, what acceptance extension it adds). A margin is the top-1
minus top-2 logprob of a token (NaN when fewer than two alternatives came back: the legacy
completions format keys `top_logprobs` by token text, so two tokens that decode alike collapse).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from sweeper.results.records import EXPOSURE_COLUMNS

#: Where a record's token ids came from: the engine's own ids through its OpenAI extension,
#: through its native API (SGLang's `/generate`), ids recovered from logprobs, a
#: re-tokenization of the text (only approximately the ids the engine generated), or none (the
#: stream carried text but no ids: the point then fails on its usage count).
IdsSource = Literal["engine", "native", "logprobs", "approximate", "none"]
#: Point-level precedence: a point says the least exact source any of its requests had.
SOURCE_ORDER: tuple[str, ...] = ("none", "approximate", "logprobs", "native", "engine")


def margins_of(choice: Mapping[str, Any], chat: bool) -> list[float]:
    """Top-1 minus top-2 logprob for each token of a choice's delta (NaN when one is given)."""
    logprobs = choice.get("logprobs") or {}
    tops: list[list[float]] = []
    if chat:
        for entry in logprobs.get("content") or []:
            tops.append([t["logprob"] for t in entry.get("top_logprobs") or []])
    else:
        for entry in logprobs.get("top_logprobs") or []:
            tops.append(list((entry or {}).values()))
    out = []
    for values in tops:
        ranked = sorted(values, reverse=True)
        out.append(ranked[0] - ranked[1] if len(ranked) >= 2 else math.nan)
    return out


def sample_margins_of(choice: Mapping[str, Any], chat: bool) -> list[float]:
    """A coupled server's sample margin for each token of a choice's delta (NaN where it gave
    none): chat `logprobs.content[i].sample_margin`, completions `logprobs.sample_margins`."""
    logprobs = choice.get("logprobs") or {}
    if chat:
        values = [entry.get("sample_margin") for entry in logprobs.get("content") or []]
    else:
        tokens = len(logprobs.get("tokens") or [])
        values = list(logprobs.get("sample_margins") or [None] * tokens)
    return [math.nan if v is None else float(v) for v in values]


@dataclass
class ChoiceOutput:
    """What one choice of a response streamed: its ids, text pieces, margins, finish reason."""

    token_ids: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    margins: list[float] = field(default_factory=list)
    sample_margins: list[float] = field(default_factory=list)
    finish_reason: str | None = None

    def fields(self) -> dict[str, Any]:
        """The record's per-choice fields."""
        return {
            "token_ids": list(map(int, self.token_ids)),
            "text": "".join(self.texts),
            "top2_margins": list(self.margins),
            # Only a coupled server gives them: none at all is no column value, not NaNs.
            "sample_margins": (
                list(self.sample_margins) if any(m == m for m in self.sample_margins) else []
            ),
            "finish_reason": self.finish_reason,
        }


class ChunkReader:
    """Collects one response's stream; `feed` each parsed chunk, then read `fields()`.

    Each choice's output is kept apart by its `index` (`outputs`); `token_ids`, `texts`,
    `margins` and `finish_reason` are choice 0's, where a reader of one choice keeps them."""

    ids_source: IdsSource = "engine"

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.outputs: dict[int, ChoiceOutput] = {0: ChoiceOutput()}
        self.usage: dict[str, Any] = {}
        self.acceptance: dict[str, Any] = {}
        #: Whether any chunk carried token ids (until then, text chunks time the stream).
        self.saw_ids = False

    @property
    def token_ids(self) -> list[int]:
        return self.outputs[0].token_ids

    @token_ids.setter
    def token_ids(self, ids: list[int]) -> None:
        self.outputs[0].token_ids = ids

    @property
    def texts(self) -> list[str]:
        return self.outputs[0].texts

    @texts.setter
    def texts(self, texts: list[str]) -> None:
        self.outputs[0].texts = texts

    @property
    def margins(self) -> list[float]:
        return self.outputs[0].margins

    @margins.setter
    def margins(self, margins: list[float]) -> None:
        self.outputs[0].margins = margins

    @property
    def finish_reason(self) -> str | None:
        return self.outputs[0].finish_reason

    @finish_reason.setter
    def finish_reason(self, reason: str | None) -> None:
        self.outputs[0].finish_reason = reason

    def feed(self, chunk: Mapping[str, Any]) -> bool:
        """Take one chunk; True when it carried output tokens of any choice (for TTFT and ITL
        timing: the request's first token is the first of any choice)."""
        if chunk.get("usage"):
            self.usage = dict(chunk["usage"])
        self.read_extension(chunk)
        carried = False
        for choice in chunk.get("choices") or []:
            output = self.outputs.setdefault(int(choice.get("index") or 0), ChoiceOutput())
            ids = self.ids_of(choice, chunk)
            if ids:
                output.token_ids += ids  # made ints once, in fields()
                self.saw_ids = carried = True
            text = self.text_of(choice)
            if text:
                output.texts.append(text)
                # A stream without ids is timed by its text chunks.
                carried = carried or not self.saw_ids
            if choice.get("logprobs"):
                output.margins += margins_of(choice, self.chat)
                output.sample_margins += sample_margins_of(choice, self.chat)
            output.finish_reason = choice.get("finish_reason") or output.finish_reason
        return carried

    def ids_of(self, choice: Mapping[str, Any], chunk: Mapping[str, Any]) -> list[int] | None:
        """The token ids this choice's delta carries (`token_ids`, as vLLM and ours send)."""
        return choice.get("token_ids")

    def text_of(self, choice: Mapping[str, Any]) -> str:
        if self.chat:
            return str((choice.get("delta") or {}).get("content") or "")
        return str(choice.get("text") or "")

    def read_extension(self, chunk: Mapping[str, Any]) -> None:
        """Read an engine's own fields from a chunk (acceptance); nothing by default."""

    async def finish(self, client: httpx.AsyncClient, base_url: str, model: str | None) -> None:
        """After the stream ended: recover what the stream lacked (ids); nothing by default."""

    @property
    def text(self) -> str:
        return "".join(self.texts)

    def fields(self) -> dict[str, Any]:
        """The record's stream fields: choice 0's ids, text, margins and finish, the request's
        acceptance, ids' source and the exposure columns the engine reported (None: not
        reported), and `choices`: every choice's `ChoiceOutput.fields` by the index the stream
        carried."""
        return {
            **{name: self.acceptance.get(name) for name in EXPOSURE_COLUMNS},
            **self.outputs[0].fields(),
            "choices": {i: self.outputs[i].fields() for i in sorted(self.outputs)},
            "tau": self.acceptance.get("tau"),
            "verify_rounds": self.acceptance.get("verify_rounds"),
            "token_ids_source": self.source,
            "prompt_tokens": self.usage.get("prompt_tokens"),
        }

    @property
    def source(self) -> str:
        """`ids_source`, except "none" for an engine path whose stream carried no ids."""
        produced = self.usage.get("completion_tokens") or self.texts
        if self.ids_source in ("engine", "native") and not self.saw_ids and produced:
            return "none"
        return self.ids_source

    def usage_mismatch(self) -> str | None:
        """Why the usage chunk disagrees with the ids the stream carried (every choice's), or
        None."""
        expected = self.usage.get("completion_tokens")
        carried = sum(len(output.token_ids) for output in self.outputs.values())
        if self.ids_source in ("engine", "native") and expected not in (None, carried):
            return f"usage says {expected} tokens, stream carried {carried}"
        return None
