"""Pydantic models of the OpenAI-style requests the server accepts, and the OpenAI error shape.

Validation is strict (no "5" -> 5 coercion): a wrong type is a client error the sweeper should
see, not something to guess around. Unknown fields are ignored, as OpenAI clients send extras.
Numbers must be finite: Python's JSON parsers take `Infinity` and `NaN` (and read `1e999` as
infinity), which no sampling parameter may be.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ddtree_runtime.algo.processors import BIAS_RANGE, PENALTY_RANGE, Processors

MAX_TOP_LOGPROBS = 5
#: The most choices one request may ask for (`n`): each is a sequence of its own in the batch.
MAX_CHOICES = 16


class Strict(BaseModel):
    """Every request model: the module docstring's rules, in one place."""

    model_config = ConfigDict(strict=True, extra="ignore", allow_inf_nan=False)


class StreamOptions(Strict):
    include_usage: bool = False


class ProcessorFields(Strict):
    """The logits processors (`algo.processors`: logit bias, then penalties, vLLM's convention),
    taken by completions, chat completions and /score alike. `logit_bias` keys are token ids
    as decimal strings (OpenAI's); ids past the vocabulary are refused where it is known."""

    repetition_penalty: float = Field(default=1.0, gt=0.0)
    frequency_penalty: float = Field(default=0.0, ge=PENALTY_RANGE[0], le=PENALTY_RANGE[1])
    presence_penalty: float = Field(default=0.0, ge=PENALTY_RANGE[0], le=PENALTY_RANGE[1])
    logit_bias: dict[str, float] | None = None

    @field_validator("logit_bias")
    @classmethod
    def _token_ids_and_biases(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        low, high = BIAS_RANGE
        for key, bias in (value or {}).items():
            if not (key.isascii() and key.isdigit() and str(int(key)) == key):
                raise ValueError(f"keys must be token ids (decimal strings), got {key!r}")
            if not low <= bias <= high:
                raise ValueError(f"values must be in [{low:g}, {high:g}], got {bias}")
        return value

    def processors(self) -> Processors:
        bias = tuple(sorted((int(key), value) for key, value in (self.logit_bias or {}).items()))
        return Processors(
            self.repetition_penalty, self.frequency_penalty, self.presence_penalty, bias
        )


class SamplingFields(ProcessorFields):
    """Fields shared by completions and chat completions."""

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=-1)  # 0 or -1: disabled (vLLM spells it -1)
    min_p: float = Field(default=0.0, ge=0.0, le=1.0)  # 0: disabled
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = Field(default=1, ge=1, le=MAX_CHOICES)  # independent draws, one choice each
    stream: bool = False
    stream_options: StreamOptions | None = None
    return_token_ids: bool = False
    #: Length control (vLLM's and SGLang's names): keep generating past EOS, and no EOS or stop
    #: string ends generation before `min_tokens` tokens, so a benchmark holds output lengths.
    ignore_eos: bool = False
    min_tokens: int = Field(default=0, ge=0)

    @field_validator("stop")
    @classmethod
    def _stop_strings_not_empty(cls, value: str | list[str] | None) -> str | list[str] | None:
        items = [value] if isinstance(value, str) else value or []
        if any(item == "" for item in items):
            raise ValueError("stop strings must not be empty")
        return value

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class CompletionRequest(SamplingFields):
    """POST /v1/completions. `prompt` is text or a list of token ids."""

    prompt: str | list[int]
    max_tokens: int | None = Field(default=16, ge=1)  # OpenAI's default for completions
    logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: Literal[False] = False


class TokenizeRequest(Strict):
    """POST /tokenize (vLLM's shape): a text's token ids under the served tokenizer."""

    model: str | None = None
    prompt: str
    add_special_tokens: bool = True


class TextPart(Strict):
    type: Literal["text"]
    text: str


class ChatMessage(Strict):
    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str | list[TextPart]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(SamplingFields):
    """POST /v1/chat/completions."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)

    def token_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens else self.max_tokens


class RequestError(Exception):
    """A client error: becomes an OpenAI-style error body with this status."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status


def error_body(
    message: str,
    param: str | None = None,
    code: str | None = None,
    error_type: str = "invalid_request_error",
) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": error_type,
            "param": param,
            "code": code,
        }
    }


def validation_error(error: ValidationError) -> RequestError:
    """The first pydantic error as a RequestError naming the offending field."""
    first = error.errors(include_url=False)[0]
    param = ".".join(str(part) for part in first["loc"]) or None
    if first["type"] == "json_invalid":
        return RequestError(f"request body is not valid JSON: {first['msg']}")
    if first["type"] == "model_type":
        return RequestError("request body must be a JSON object")
    message = first["msg"].removeprefix("Value error, ")
    return RequestError(f"{param}: {message}" if param else message, param=param)


#: The most best tokens `POST /score` returns per position (each is an [id, logprob] pair).
MAX_SCORE_TOP_LOGPROBS = 256


class ScoreRequest(ProcessorFields):
    """POST /score: a sampled continuation scored under the processors and sampling parameters
    it was drawn with (`ddtree_runtime.score`). The prompt is given as a completion's (`prompt`:
    text or token ids) or a chat's (`messages`), exactly one, and becomes ids as those routes
    make them."""

    model: str
    prompt: str | list[int] | None = None
    messages: list[ChatMessage] | None = Field(default=None, min_length=1)
    continuation: list[int] = Field(min_length=1)
    temperature: float = Field(gt=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=-1)  # 0 or -1: disabled, as in sampling
    min_p: float = Field(default=0.0, ge=0.0, le=1.0)  # 0: disabled, as in sampling
    #: How many of each position's best tokens to return (`top`), raw logprobs.
    top_logprobs: int = Field(default=0, ge=0, le=MAX_SCORE_TOP_LOGPROBS)

    def one_prompt(self) -> None:
        """RequestError unless exactly one of `prompt` and `messages` is given."""
        if (self.prompt is None) == (self.messages is None):
            raise RequestError("give exactly one of prompt and messages", param="prompt")
