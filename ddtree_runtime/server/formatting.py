"""OpenAI response bodies from engine TokenEvents: completions, chat, their stream chunks, logprobs.

Two logprob shapes: the legacy completions one (`tokens`, `token_logprobs`, `top_logprobs`,
`text_offset`) and the chat one (`content: [{token, logprob, bytes, top_logprobs}]`). Sampled
requests add each token's `TokenLogprob.sample_margin`: chat `content[i].sample_margin`, completions
a parallel `sample_margins` list; greedy ones add neither, so their shapes stay OpenAI's.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any


def sse(payload: dict[str, Any] | str) -> str:
    """One server-sent event line."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {data}\n\n"


class TokenText:
    """Token id -> display string, cached (the same ids recur)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._cache: dict[int, str] = {}

    def __call__(self, token_id: int) -> str:
        text = self._cache.get(token_id)
        if text is None:
            text = self._tokenizer.decode([token_id])
            self._cache[token_id] = text
        return text


def top_dict(top: list[tuple[int, float]], token_text: TokenText) -> dict[str, float]:
    """Legacy top_logprobs {text: logprob}. Different ids can decode to the same text (partial
    UTF-8 bytes all read as U+FFFD); a repeated key gets `[id]` appended so no alternative is lost
    (the sweeper takes top-1 minus top-2 from these values)."""
    out: dict[str, float] = {}
    for token_id, logprob in top:
        key = token_text(token_id)
        out[key if key not in out else f"{key}[{token_id}]"] = logprob
    return out


def legacy_logprobs(
    entries: list[Any], token_text: TokenText, top_n: int, offset: int
) -> dict[str, Any]:
    """Completions logprobs for some tokens; `offset` is the text length before them."""
    tokens, token_logprobs, tops, offsets = [], [], [], []
    margins = [entry.sample_margin for entry in entries]
    for entry in entries:
        text = token_text(entry.token_id)
        tokens.append(text)
        token_logprobs.append(entry.logprob)
        tops.append(top_dict(entry.top[:top_n], token_text))
        offsets.append(offset)
        offset += len(text)
    out: dict[str, Any] = {
        "tokens": tokens,
        "token_logprobs": token_logprobs,
        "top_logprobs": tops,
        "text_offset": offsets,
    }
    if any(m is not None for m in margins):
        out["sample_margins"] = margins
    return out


def chat_logprobs(entries: list[Any], token_text: TokenText, top_n: int) -> dict[str, Any]:
    def one(token_id: int, logprob: float) -> dict[str, Any]:
        text = token_text(token_id)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}

    content = []
    for entry in entries:
        item = one(entry.token_id, entry.logprob)
        item["top_logprobs"] = [one(tid, lp) for tid, lp in entry.top[:top_n]]
        if entry.sample_margin is not None:  # sampled requests only (TokenLogprob)
            item["sample_margin"] = entry.sample_margin
        content.append(item)
    return {"content": content}


@dataclass
class Accumulated:
    """A whole (non-streamed) generation, gathered from its events."""

    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[Any] = field(default_factory=list)
    finish_reason: str | None = None

    def add(self, event: Any) -> None:
        self.text += event.text
        self.token_ids.extend(event.token_ids)
        if event.logprobs:
            self.logprobs.extend(event.logprobs)
        if event.finished:
            self.finish_reason = event.finish_reason


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


@dataclass
class ResponseHead:
    """What every body and chunk of one response shares."""

    id: str
    model: str
    chat: bool
    created: int = field(default_factory=lambda: int(time.time()))

    def body(self, choices: list[dict[str, Any]], chunk: bool) -> dict[str, Any]:
        if self.chat:
            kind = "chat.completion.chunk" if chunk else "chat.completion"
        else:
            kind = "text_completion"
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
