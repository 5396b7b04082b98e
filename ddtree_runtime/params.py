"""Engine data types: configuration, per-request sampling parameters, events and stats.

Re-exported by ``ddtree_runtime.engine``, which is where the server imports them from.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EngineConfig:
    speculative: str = "ddtree"  # "ddtree" | "none" (none == budget 0, plain AR)
    budget: int = 16  # non-root tree nodes per request
    topk: int = 4  # max children per node
    block_size: int = 8  # drafter block; tree depth <= block_size - 1
    max_batch: int = 8
    max_model_len: int = 2048
    cuda_graph: bool = False  # requested; applied only on CUDA
    seed: int = 0  # base seed for requests without their own seed

    def validate(self) -> None:
        if self.speculative not in ("ddtree", "none"):
            raise ValueError(f"speculative must be 'ddtree' or 'none', not {self.speculative!r}")
        if self.budget < 0:
            raise ValueError(f"budget must be >= 0, got {self.budget}")
        if self.topk < 1:
            raise ValueError(f"topk must be >= 1, got {self.topk}")
        if self.block_size < 2:
            raise ValueError(f"block_size must be >= 2, got {self.block_size}")
        if self.max_batch < 1 or self.max_model_len < 2:
            raise ValueError("max_batch must be >= 1 and max_model_len >= 2")


@dataclass
class SamplingParams:
    max_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    logprobs: int | None = None  # None: none; n >= 0: chosen token + top-n alternatives
    budget: int | None = None  # per-request tree size override (<= engine budget)
    topk: int | None = None


@dataclass
class TokenLogprob:
    token_id: int
    logprob: float
    top: list[tuple[int, float]]


@dataclass
class TokenEvent:
    request_id: str
    token_ids: list[int]
    text: str
    logprobs: list[TokenLogprob] | None
    finished: bool
    finish_reason: str | None


@dataclass
class RequestStats:
    verify_rounds: int = 0
    accepted_tokens: int = 0
    emitted_tokens: int = 0
    tau: float = 0.0
    draft_s: float = 0.0
    tree_s: float = 0.0
    verify_s: float = 0.0
    commit_s: float = 0.0


@dataclass
class GenerationResult:
    token_ids: list[int]
    text: str
    finish_reason: str | None
    stats: RequestStats
    logprobs: list[TokenLogprob] | None
