"""Engine data types: configuration, per-request sampling parameters and their checks, events.

``SamplingParams.check`` is the one place a request's parameters are validated against the engine
(a ValueError with a message for the client; the server turns it into a 400). Re-exported by
``ddtree_runtime.engine``, which is where the server imports them from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ddtree_runtime.knobs import TREE_KNOBS, accept_threshold_problem, check_knob
from ddtree_runtime.stats import RequestStats

if TYPE_CHECKING:
    from ddtree_runtime.algo.processors import Processors


@dataclass(frozen=True)
class EngineConfig:
    """The engine's settings, checked when made (`validate`): an EngineConfig is a valid one."""

    speculative: str = "ddtree"  # "ddtree" | "none" (none == budget 0, plain AR)
    budget: int = 16  # non-root tree nodes per request
    topk: int = 4  # max children per node
    block_size: int = 8  # drafter block; tree depth <= block_size - 1
    max_batch: int = 8
    max_model_len: int = 2048
    cuda_graph: bool = False  # requested; applied only on CUDA
    seed: int = 0  # base seed for requests without their own seed
    #: Lossy below 1 (`knobs.accept_threshold_problem`, `algo.verify.relaxed_choices`): at T > 0
    #: a drafted token at least this probable is accepted where the sampler drew another.
    accept_threshold: float = 1.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.speculative not in ("ddtree", "none"):
            raise ValueError(f"speculative must be 'ddtree' or 'none', not {self.speculative!r}")
        for name in TREE_KNOBS:
            check_knob(name, getattr(self, name))
        threshold_problem = accept_threshold_problem(self.accept_threshold)
        if threshold_problem is not None:
            raise ValueError(threshold_problem)
        if self.max_batch < 1 or self.max_model_len < 2:
            raise ValueError("max_batch must be >= 1 and max_model_len >= 2")


@dataclass(frozen=True)
class RequestLimits:
    """What a request is checked against: the engine's limits, fixed when it is built."""

    max_model_len: int
    budget: int  # the engine's tree budget (0 when speculative is "none")
    topk: int
    vocab_size: int


@dataclass
class SamplingParams:
    max_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    #: Keep tokens whose tempered probability is at least min_p times the top token's (0 = off);
    #: applied after temperature, before top-k and top-p (`algo.sampling.processed_probs`).
    min_p: float = 0.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    logprobs: int | None = None  # None: none; n >= 0: chosen token + top-n alternatives
    budget: int | None = None  # per-request tree size override (<= engine budget)
    topk: int | None = None
    #: Structured output (`algo.grammar.grammar_key` reads them; the engine refuses a bad one):
    #: OpenAI's `response_format` ({"type": "text" | "json_object" | "json_schema", ...}) or
    #: SGLang's `regex`, at most one of them.
    response_format: dict[str, Any] | None = None
    regex: str | None = None
    #: EOS does not end generation (it is emitted as a token), and neither EOS nor a stop string
    #: ends it before `min_tokens` tokens: how a benchmark holds an output length.
    ignore_eos: bool = False
    min_tokens: int = 0
    #: Logits processors before temperature (`algo.processors`: logit bias, then penalties,
    #: vLLM's convention); 1, 0, 0 and none change nothing.
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    #: Independent samples of one prompt; the engine runs one per request (`choices` splits).
    n: int = 1

    def processors(self) -> Processors:
        # torch loads with the algorithm, not with this module: `serve` checks its flags with
        # EngineConfig before torch is imported, so a bad flag fails in a fraction of a second.
        from ddtree_runtime.algo.processors import Processors

        return Processors(
            self.repetition_penalty,
            self.frequency_penalty,
            self.presence_penalty,
            tuple(sorted(self.logit_bias.items())),
        )

    def choices(self) -> list[SamplingParams]:
        """The `n` independent requests this one stands for: choice i draws with
        `choice_seed(seed, i)` (choice 0 with the seed itself), or, without a seed, each with
        its own default seed."""
        from ddtree_runtime.algo.sampling import choice_seed

        seeds = [None if self.seed is None else choice_seed(self.seed, i) for i in range(self.n)]
        return [replace(self, n=1, seed=seed) for seed in seeds]

    def check(self, prompt_ids: list[int], limits: RequestLimits) -> tuple[int, int]:
        """Raise ValueError (a client error) unless this request can run; returns its tree
        (budget, topk), the engine's when the request does not choose its own."""
        if not prompt_ids:
            raise ValueError("prompt must contain at least one token")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if len(prompt_ids) + self.max_tokens > limits.max_model_len:
            raise ValueError(
                f"prompt ({len(prompt_ids)} tokens) + max_tokens ({self.max_tokens}) exceeds "
                f"max_model_len ({limits.max_model_len})"
            )
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 <= self.min_tokens <= self.max_tokens:
            raise ValueError(
                f"min_tokens must be between 0 and max_tokens ({self.max_tokens}), "
                f"got {self.min_tokens}"
            )
        if self.n != 1:
            raise ValueError(f"an engine request is one sequence (n = 1), got n = {self.n}")
        self.processors().check(limits.vocab_size)
        if self.logprobs is not None and self.logprobs < 0:
            raise ValueError(f"logprobs must be >= 0, got {self.logprobs}")
        budget = limits.budget if self.budget is None else self.budget
        if not 0 <= budget <= limits.budget:
            raise ValueError(f"budget must be between 0 and the engine budget {limits.budget}")
        topk = limits.topk if self.topk is None else self.topk
        if not 1 <= topk <= limits.topk:
            raise ValueError(f"topk must be between 1 and the engine topk {limits.topk}")
        if any(not 0 <= t < limits.vocab_size for t in prompt_ids):
            raise ValueError(f"prompt token ids must be in [0, {limits.vocab_size})")
        return budget, topk


@dataclass
class TokenLogprob:
    token_id: int
    logprob: float
    top: list[tuple[int, float]]
    #: Sampled requests only: how far the token's uniform lies inside its CDF interval under the
    #: request's temperature / min-p / top-k / top-p (``algo.sampling.sample_margins``); None when
    #: greedy.
    sample_margin: float | None = None


@dataclass
class TokenEvent:
    request_id: str
    token_ids: list[int]
    text: str
    logprobs: list[TokenLogprob] | None
    finished: bool
    finish_reason: str | None


@dataclass
class GenerationResult:
    token_ids: list[int]
    text: str
    finish_reason: str | None
    stats: RequestStats
    logprobs: list[TokenLogprob] | None
