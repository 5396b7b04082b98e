"""The `workload:` section: prompts (inline, a JSONL file, or `datasets:`), API, max tokens,
repeats, the load: closed-loop concurrency levels and open-loop request rates (`load:`), and
the client's processes.

A point is either closed-loop (a concurrency: that many requests in flight, a new one as soon as
one ends) or open-loop (a rate: requests sent on a schedule whatever is in flight), never both.
`concurrency` defaults to [1] unless `load:` is given, so a rate sweep has no closed-loop point
it did not ask for."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from sweeper.config.features import STRUCTURED_FEATURES
from sweeper.config.knobs import LOGIT_BIAS_RANGE, RANGES
from sweeper.spec.base import Int, NonEmptyStr, Number, PromptText, Slug, StrictModel
from sweeper.spec.datasets import DatasetSpec
from sweeper.spec.errors import problem
from sweeper.spec.open_loop import LoadSpec


class Message(StrictModel):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    content: PromptText


class PromptSpec(StrictModel):
    """A prompt: `text` (completions, or one user message for chat), chat `messages`, or
    `tokens`: that many input tokens from the served model's tokenizer, sent as token ids on the
    completions API (a chat template would add tokens nobody asked for). Datasets fill the rest:
    where it comes from (`dataset`, `category`, `turn`) and how its answer is bounded."""

    id: Slug
    text: PromptText | None = None
    messages: list[Message] | None = Field(default=None, min_length=1)
    tokens: Annotated[Int, Field(ge=1)] | None = None
    #: This prompt's output length (default: the point's max_tokens).
    max_tokens: Annotated[Int, Field(ge=1)] | None = None
    #: Hold the answer at its max_tokens (ignore_eos + min_tokens, where the engine takes them).
    hold_output: bool = False
    dataset: Slug | None = None
    category: NonEmptyStr | None = None
    turn: Annotated[Int, Field(ge=1)] | None = None
    #: Earlier prompts whose greedy AR answers fill this prompt's empty assistant messages, in
    #: order: the history of a later turn, the same for every server config.
    answers_from: list[Slug] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_form(self) -> PromptSpec:
        if sum(form is not None for form in (self.text, self.messages, self.tokens)) != 1:
            raise problem("a prompt needs exactly one of 'text', 'messages' or 'tokens'")
        if self.messages is not None and not any(m.role == "user" for m in self.messages):
            raise problem("chat messages need a user turn", at=("messages",))
        holes = sum(m.role == "assistant" and not m.content for m in self.messages or [])
        if holes != len(self.answers_from):
            message = (
                f"{len(self.answers_from)} answers_from for {holes} empty assistant messages "
                "(each empty assistant message takes the AR answer of one earlier prompt)"
            )
            raise problem(message, at=("answers_from",))
        return self


class JsonSchemaFormat(StrictModel):
    """OpenAI's `json_schema` of a `response_format`: a name and the schema (a JSON object).
    Written back as `schema` too (a plain dump: the manifest, a dataset's reload, a follow-up's
    spec), so every spec this model dumps validates again."""

    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)
    name: NonEmptyStr
    schema_: dict[str, Any] = Field(alias="schema")
    description: str | None = None
    strict: bool | None = None

    @field_validator("schema_", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            raise problem("a json_schema's schema must be a JSON object")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise problem(f"a json_schema's schema must be plain JSON: {exc}") from None
        return value


class ResponseFormat(StrictModel):
    """A structured output, OpenAI's spelling: `{type: json_schema, json_schema: {name, schema}}`
    or `{type: json_object}` (free text is the default: leave `response_format` out)."""

    type: Literal["json_schema", "json_object"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_for_its_type(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise problem("type json_schema needs a json_schema: {name, schema}", at=("type",))
        if self.type == "json_object" and self.json_schema is not None:
            raise problem("type json_object takes no json_schema", at=("json_schema",))
        return self

    def plain(self) -> dict[str, Any]:
        """What a request body carries (OpenAI's spelling, unset keys left out)."""
        return self.model_dump(by_alias=True, exclude_none=True)


class WorkloadSpec(StrictModel):
    """What is sent to every point: prompts x repeats at each concurrency level, and the
    open-loop points of `load`."""

    prompts: list[PromptSpec] = Field(default_factory=list)
    #: JSONL of prompts, relative to the spec file; `load_spec` appends them to `prompts`.
    prompts_file: NonEmptyStr | None = None
    #: Suites, files and synthetic prompts; `load_spec` appends their prompts to `prompts`.
    datasets: list[DatasetSpec] = Field(default_factory=list)
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
    # The structured request features (`sweeper.config.features`), sent with every request of
    # every point (unset: not sent). Token id -> bias added to its logit.
    logit_bias: dict[Int, Annotated[Number, Field(**LOGIT_BIAS_RANGE)]] | None = None
    #: Strings that end the output (the stop string itself is not returned).
    stop: list[NonEmptyStr] | None = Field(default=None, min_length=1)
    response_format: ResponseFormat | None = None
    #: A regex the output must match (SGLang's and the runtime's `regex`).
    regex: NonEmptyStr | None = None
    #: Independent samples per request (each choice recorded and proven as an output of its
    #: own; refused for an engine whose feature table row does not take it).
    n: Annotated[Int, Field(**RANGES["n"])] | None = None
    #: Top logprobs asked on every measured request (asking must not change the output).
    logprobs: Annotated[Int, Field(**RANGES["logprobs"])] | None = None

    @field_validator("logit_bias", mode="before")
    @classmethod
    def _token_ids(cls, value: Any) -> Any:
        """Integer keys, or OpenAI's spelling, the id's decimal string (what a JSON dump of
        this spec, the manifest's, holds): `{"13": 2.5}` reads as `{13: 2.5}`."""
        if not isinstance(value, dict):
            return value
        ids: dict[Any, Any] = {}
        for key, bias in value.items():
            decimal = isinstance(key, str) and key.isascii() and key.isdigit()
            token = int(key) if decimal and key == str(int(key)) else key
            if isinstance(token, bool) or not isinstance(token, int) or token < 0:
                message = f"a logit_bias key is a token id (an integer >= 0), got {key!r}"
                raise problem(message)
            ids[token] = bias
        return ids

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise problem(f"regex does not compile with Python's re: {exc}") from None
        return value

    @model_validator(mode="after")
    def _check_prompts(self) -> WorkloadSpec:
        if not self.prompts and self.prompts_file is None and not self.datasets:
            raise problem("the workload needs 'prompts', 'prompts_file' or 'datasets'")
        seen: set[str] = set()
        for index, prompt in enumerate(self.prompts):
            if prompt.id in seen:
                raise problem(f"duplicate prompt id {prompt.id!r}", at=("prompts", index, "id"))
            for earlier in prompt.answers_from:
                if earlier not in seen:
                    message = f"answers_from names {earlier!r}, which is no earlier prompt"
                    raise problem(message, at=("prompts", index, "answers_from"))
            seen.add(prompt.id)
        labels = [d.label for d in self.datasets]
        for index, label in enumerate(labels):
            if label in labels[:index]:
                message = f"two datasets named {label!r}: give one a 'name'"
                raise problem(message, at=("datasets", index))
        for index, level in enumerate(self.concurrency or []):
            if level in (self.concurrency or [])[:index]:
                raise problem(f"duplicate concurrency level {level}", at=("concurrency", index))
        if self.response_format is not None and self.regex is not None:
            message = "one structured output per request: response_format or regex, not both"
            raise problem(message, at=("regex",))
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

    def features(self) -> dict[str, Any]:
        """The structured request features every request carries, as plain values (those
        not set are None)."""
        out = {name: getattr(self, name) for name in STRUCTURED_FEATURES}
        if self.response_format is not None:
            out["response_format"] = self.response_format.plain()
        return out

    def loads(self) -> list[dict[str, Any]]:
        """Every point's load, closed loops first: {"concurrency": c, "rate": None} or
        {"concurrency": None, "rate": r}."""
        closed = [{"concurrency": c, "rate": None} for c in self.concurrency_levels]
        return [*closed, *({"concurrency": None, "rate": r} for r in self.rates)]
