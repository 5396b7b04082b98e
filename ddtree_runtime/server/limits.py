"""What one request may weigh: its body's bytes and its prompt's characters, both refused before
any work is done on them, so no request holds the server's memory or its event loop.

The prompt cap: a token of this tokenizer spells at most `longest_token_chars` characters of the
text it encodes (byte-level BPE spells one byte per character and a text's character is at least
one byte; SentencePiece spells one character per character, its byte-fallback tokens spell one
byte in six), so a text of more than `max_model_len * longest_token_chars` characters encodes to
more than `max_model_len` tokens and cannot fit: it is refused on its length alone, never
tokenized. The body cap: a request that can be served holds at most that many prompt characters,
each at most `JSON_BYTES_PER_CHAR` bytes of JSON, or at most `max_model_len` token ids (fewer
bytes each than a character may take), plus `BODY_SLACK_BYTES` for everything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ddtree_runtime.server.protocol import RequestError, error_body

#: The most JSON bytes one character can take: an astral character escaped as a surrogate pair,
#: `\uD83D\uDE00`.
JSON_BYTES_PER_CHAR = 12
#: Room for a request's fields other than its prompt text: names, sampling values, chat framing,
#: a `continuation`'s ids, whitespace.
BODY_SLACK_BYTES = 1 << 20


def longest_token_chars(tokenizer: Any) -> int:
    """The most characters one of the tokenizer's tokens spells (special tokens included)."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    return max(len(token) for token in tokens if token)


@dataclass(frozen=True)
class RequestLimits:
    """The caps of the module docstring, for one served model; `/server_info` reports them."""

    max_model_len: int
    longest_token_chars: int

    @property
    def max_prompt_chars(self) -> int:
        return self.max_model_len * self.longest_token_chars

    @property
    def max_body_bytes(self) -> int:
        return self.max_prompt_chars * JSON_BYTES_PER_CHAR + BODY_SLACK_BYTES

    def as_dict(self) -> dict[str, int]:
        return {
            "max_body_bytes": self.max_body_bytes,
            "max_prompt_chars": self.max_prompt_chars,
            "longest_token_chars": self.longest_token_chars,
        }

    def check_prompt(self, text: str, param: str) -> None:
        """RequestError (400) naming `param` when `text` cannot fit, by its length alone."""
        if len(text) > self.max_prompt_chars:
            raise RequestError(
                f"{param} has {len(text)} characters; max_model_len ({self.max_model_len}) "
                f"tokens of at most {self.longest_token_chars} characters each hold at most "
                f"{self.max_prompt_chars} characters",
                param=param,
            )

    def too_large(self) -> RequestError:
        return RequestError(
            f"request body exceeds the {self.max_body_bytes} bytes this server accepts",
            status=413,
        )


class BodyLimit:
    """ASGI middleware bounding every request's body at `limits.max_body_bytes`: a declared
    Content-Length over it is answered 413 before any body is read; a body sent without one
    (chunked) raises the 413 from the app's read as soon as the bytes received pass the cap."""

    def __init__(self, app: ASGIApp, limits: RequestLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self.limits.max_body_bytes
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and int(declared) > cap:  # the HTTP parser checked it is one
            error = self.limits.too_large()
            await JSONResponse(error_body(error.message), status_code=413)(scope, receive, send)
            return
        received = 0

        async def bounded_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > cap:
                raise self.limits.too_large()
            return message

        await self.app(scope, bounded_receive, send)
