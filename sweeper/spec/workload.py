"""The `workload:` section: prompts (inline or a JSONL file), API, max tokens, repeats, the
load: closed-loop concurrency levels and open-loop request rates (`load:`), and the client's
processes.

A point is either closed-loop (a concurrency: that many requests in flight, a new one as soon as
one ends) or open-loop (a rate: requests sent on a schedule whatever is in flight), never both.
`concurrency` defaults to [1] unless `load:` is given, so a rate sweep has no closed-loop point
it did not ask for."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from sweeper.spec.base import Int, NonEmptyStr, Slug, StrictModel
from sweeper.spec.errors import problem
from sweeper.spec.open_loop import LoadSpec


class Message(StrictModel):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    content: str


class PromptSpec(StrictModel):
    """A prompt: `text` (completions, or one user message for chat) or chat `messages`."""

    id: Slug
    text: str | None = None
    messages: list[Message] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_form(self) -> PromptSpec:
        if (self.text is None) == (self.messages is None):
            raise problem("a prompt needs exactly one of 'text' or 'messages'")
        return self


class WorkloadSpec(StrictModel):
    """What is sent to every point: prompts x repeats at each concurrency level, and the
    open-loop points of `load`."""

    prompts: list[PromptSpec] = Field(default_factory=list)
    #: JSONL of prompts, relative to the spec file; `load_spec` appends them to `prompts`.
    prompts_file: NonEmptyStr | None = None
    api: Literal["chat", "completions"] = "chat"
    max_tokens: Annotated[Int, Field(ge=1)] = 64
    repeats: Annotated[Int, Field(ge=1)] = 1
    #: Closed-loop points, one per level (default [1], or none when `load` is given).
    concurrency: list[Annotated[Int, Field(ge=1)]] | None = Field(default=None, min_length=1)
    #: Open-loop points, one per rate.
    load: LoadSpec | None = None
    #: Worker processes of the load client (each one asyncio loop); the load is held exactly,
    #: globally, whatever their number. More when one core cannot keep up (see the
    #: points' `client_bound`).
    client_processes: Annotated[Int, Field(ge=1, le=256)] = 1
    #: Requests sent and discarded after each restart, before measuring.
    warmup: Annotated[Int, Field(ge=0)] = 1
    #: Sampling seed sent with every request (temperature > 0 repeats must then be identical).
    seed: Int | None = None

    @model_validator(mode="after")
    def _check_prompts(self) -> WorkloadSpec:
        if not self.prompts and self.prompts_file is None:
            raise problem("the workload needs 'prompts' or 'prompts_file'")
        seen: set[str] = set()
        for index, prompt in enumerate(self.prompts):
            if prompt.id in seen:
                raise problem(f"duplicate prompt id {prompt.id!r}", at=("prompts", index, "id"))
            seen.add(prompt.id)
        for index, level in enumerate(self.concurrency or []):
            if level in (self.concurrency or [])[:index]:
                raise problem(f"duplicate concurrency level {level}", at=("concurrency", index))
        if self.api == "completions":
            for index, prompt in enumerate(self.prompts):
                if prompt.messages is not None:
                    message = "chat messages need api: chat (completions takes 'text')"
                    raise problem(message, at=("prompts", index, "messages"))
        return self

    @property
    def concurrency_levels(self) -> list[int]:
        """The closed-loop levels measured: as written, else [1] unless `load` is given."""
        if self.concurrency is not None:
            return list(self.concurrency)
        return [] if self.load is not None else [1]

    @property
    def rates(self) -> list[float]:
        """The open-loop rates measured (none without `load`)."""
        return list(self.load.rate) if self.load is not None else []

    def loads(self) -> list[dict[str, Any]]:
        """Every point's load, closed loops first: {"concurrency": c, "rate": None} or
        {"concurrency": None, "rate": r}."""
        closed = [{"concurrency": c, "rate": None} for c in self.concurrency_levels]
        return [*closed, *({"concurrency": None, "rate": r} for r in self.rates)]
