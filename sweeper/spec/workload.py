"""The `workload:` section: prompts (inline or a JSONL file), API, max tokens, repeats and
concurrency levels."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictInt, model_validator

from sweeper.spec.base import NonEmptyStr, Slug, StrictModel
from sweeper.spec.errors import problem


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
    """What is sent to every point: prompts x repeats at each concurrency level."""

    prompts: list[PromptSpec] = Field(default_factory=list)
    #: JSONL of prompts, relative to the spec file; `load_spec` appends them to `prompts`.
    prompts_file: NonEmptyStr | None = None
    api: Literal["chat", "completions"] = "chat"
    max_tokens: Annotated[StrictInt, Field(ge=1)] = 64
    repeats: Annotated[StrictInt, Field(ge=1)] = 1
    concurrency: list[Annotated[StrictInt, Field(ge=1)]] = Field(
        default_factory=lambda: [1], min_length=1
    )
    #: Requests sent and discarded after each restart, before measuring.
    warmup: Annotated[StrictInt, Field(ge=0)] = 1
    #: Sampling seed sent with every request (temperature > 0 repeats must then be identical).
    seed: StrictInt | None = None

    @model_validator(mode="after")
    def _check_prompts(self) -> WorkloadSpec:
        if not self.prompts and self.prompts_file is None:
            raise problem("the workload needs 'prompts' or 'prompts_file'")
        seen: set[str] = set()
        for index, prompt in enumerate(self.prompts):
            if prompt.id in seen:
                raise problem(f"duplicate prompt id {prompt.id!r}", at=("prompts", index, "id"))
            seen.add(prompt.id)
        for index, level in enumerate(self.concurrency):
            if level in self.concurrency[:index]:
                raise problem(f"duplicate concurrency level {level}", at=("concurrency", index))
        if self.api == "completions":
            for index, prompt in enumerate(self.prompts):
                if prompt.messages is not None:
                    message = "chat messages need api: chat (completions takes 'text')"
                    raise problem(message, at=("prompts", index, "messages"))
        return self
