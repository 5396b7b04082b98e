"""Pydantic schemas for the rows a run writes: one request record, one sample record (a
distribution test's seeded sample), one point record (the manifest is `manifest.py`).

Column names are a contract (docs/results.md): users query them and the report reads
them. Records allow extra fields so any further server flag of the grid becomes its own column.
`attempt` ties a point's request rows to the one attempt that completed, so rows left by an
attempt interrupted mid-point (SIGKILL) are dropped on resume, never counted twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from sweeper.config.columns import SERVER_KEYS
from sweeper.config.features import FEATURES, Feature
from sweeper.config.request import REQUEST_COLUMNS

ModelT = TypeVar("ModelT", bound=BaseModel)


def _read_back(feature: Feature) -> Callable[[Any], Any]:
    """A validator that reads `feature`'s column back through its codec, keeping it as it is."""

    def check(value: Any) -> Any:
        feature.from_column(value)
        return value

    return check


def with_feature_columns(base: type[ModelT], *, processors_only: bool = False) -> type[ModelT]:
    """`base` with the request features' record columns after its own (`FEATURES`; with
    `processors_only`, the logit processors': what a score records), each None where not used,
    typed as `Feature.column_type` and read back through the config room's codec
    (`Feature.from_column`): a column that is not its feature's value (hand-edited, torn) makes
    its line damaged, never a judge's crash."""
    columns: dict[str, Any] = {
        f.column: (Annotated[f.column_type | None, AfterValidator(_read_back(f))], None)
        for f in FEATURES
        if f.processor or not processors_only
    }
    name = f"{base.__name__.lstrip('_')}Features"
    return create_model(name, __base__=base, __module__=base.__module__, **columns)


#: The determinism verdicts, least to most severe: the one list of their names (what each
#: means, its sets and its order: `sweeper.proof.verdicts`). A record's verdict column holds one
#: of them; any other value is a damaged record, never read as a verdict.
Verdict = Literal[
    "exact",
    "near-tie",
    "distribution-ok",
    "n/a",
    "unproven",
    "shifted",
    "impossible-token",
    "diverged",
    "nondeterministic",
    "garbled",
]


class ServerConfigColumns(BaseModel):
    """The columns that say which server config a row measured (extra grid flags add theirs)."""

    model_config = ConfigDict(extra="allow")

    #: The engine that served (`ddtree_runtime`, `sglang`, `vllm`, `openai`).
    engine: str
    #: `ar` (the baseline, no speculation) or `speculative`.
    mode: str
    budget: int | None = None
    topk: int | None = None
    block_size: int | None = None
    cuda_graph: bool | None = None


# The columns above are the config room's named server keys (`sweeper.config.columns`).
assert tuple(k for k in ServerConfigColumns.model_fields if k not in ("engine", "mode")) == (
    SERVER_KEYS
), "ServerConfigColumns declares other server keys than sweeper.config.SERVER_KEYS"


class _RequestSettings(BaseModel):
    """What a request config asks for before its features, and its load."""

    model_config = ConfigDict(extra="allow")

    temperature: float
    max_tokens: int
    concurrency: int | None = None
    top_p: float | None = None
    rate: float | None = None
    arrival: str | None = None
    burstiness: float | None = None
    max_concurrency: int | None = None
    top_k: int | None = None


if TYPE_CHECKING:
    _RequestColumns = _RequestSettings
else:
    _RequestColumns = with_feature_columns(_RequestSettings)


class RequestConfigColumns(_RequestColumns):
    """The columns that say what each request of a point asked for, and the load it came in:
    a closed loop's `concurrency`, or an open loop's `rate` (req/s, inf: all at once) with its
    `arrival` process (poisson, constant, gamma + `burstiness`) and `max_concurrency`; then the
    request features (`with_feature_columns`)."""


assert tuple(RequestConfigColumns.model_fields) == REQUEST_COLUMNS, "request columns differ"


class PointKey(BaseModel):
    """What every request and point row starts with: its run, host, point and attempt."""

    model_config = ConfigDict(extra="allow")

    run_id: str
    #: A diagnosis factor (kind `level`, see FACTOR_KEY below): a fault on one host shows.
    host: str = Field(json_schema_extra={"factor": "level"})
    point_id: str
    attempt: str
    server_config_id: str
    #: The server config's label (`b16-k4-bs8-cg1`) and the request config's id (`t0-c1`), as
    #: the plan named them (None in runs written before they were recorded).
    server_label: str | None = None
    request_config_id: str | None = None
    #: Which restart of its server config (`repeats.restarts`, halving): 0 is the first.
    restart: int = 0


# Bases are listed last-first: pydantic orders fields from the last base to the first, so every
# row reads key, server config, request config, then its own columns.
class _PointColumns(RequestConfigColumns, ServerConfigColumns, PointKey):
    """Key, server config and request config columns, in that order."""


# -- exposure (issue 11): which code paths a request went through -----------------------------
# A factor of the diagnosis is marked on its field (`json_schema_extra={"factor": kind}`), so the
# diagnosis derives its factor list from these models: kind `level` (a value: config, prompt),
# `exposure` (a count of rounds: the path ran when > 0) or `extent` (a largest size: ordered).
# None means the engine did not report it (the point's `exposure_note` says which are unknown).
FACTOR_KEY = "factor"


def _factor(kind: str, default: Any = None) -> Any:
    return Field(default=default, json_schema_extra={FACTOR_KEY: kind})


class ExposureColumns(BaseModel):
    """Per request: rounds with padding, at a fixed verify shape, under a CUDA graph, batched;
    the largest trees verified; the accepted-length histogram (docs/runtime-api.md)."""

    model_config = ConfigDict(extra="allow")

    #: Verify rounds whose width exceeded 1 + this request's tree (padding rows in its rows).
    padded_rounds: int | None = _factor("exposure")
    #: Padding rows summed over rounds: how much, not whether (no factor of its own).
    padding_rows: int | None = None
    #: Rounds at the fixed width 1 + budget (`cuda_graph` requested; on CPU too).
    fixed_shape_rounds: int | None = _factor("exposure")
    #: Of those, rounds replayed from a captured CUDA graph.
    cuda_graph_rounds: int | None = _factor("exposure")
    #: Rounds verified together with other requests.
    batched_rounds: int | None = _factor("exposure")
    max_tree_depth: int | None = _factor("extent")
    #: Most drafted nodes at one depth (1: chains only).
    max_tree_width: int | None = _factor("extent")
    max_tree_nodes: int | None = _factor("extent")
    #: Widest verify (query length, root included) it ran in.
    max_verify_width: int | None = _factor("extent")
    #: accepted_hist[a] = rounds that accepted a drafted tokens.
    accepted_hist: list[int] | None = None


#: The exposure columns, as the engines' `ddtree`-style extensions name them.
EXPOSURE_COLUMNS: tuple[str, ...] = tuple(ExposureColumns.model_fields)


class RequestRecord(ExposureColumns, _PointColumns):
    """One measured request (docs/results.md: requests); key, configs, exposure, then its own."""

    prompt_id: str = _factor("level", ...)
    #: Where the prompt came from (`workload.datasets`): its dataset, category and turn.
    dataset: str | None = _factor("level")
    category: str | None = _factor("level")
    turn: int | None = _factor("level")
    repeat: int
    #: Which choice of its request this row's output is (`n` > 1: one row per choice, each
    #: judged as an output of its own); 0 for n = 1. The request's timing, acceptance and
    #: exposure are on its choice-0 row only (None on the others): they are the request's.
    choice: int = 0
    seed: int | None = None
    ttft: float | None = None
    itls: list[float] = Field(default_factory=list)
    e2e: float | None = None
    output_tokens: int = 0
    token_ids: list[int] = Field(default_factory=list)
    tau: float | None = None
    verify_rounds: int | None = None
    sha256: str = ""
    text: str = ""
    finish_reason: str | None = None
    #: Input tokens as the server counted them (its usage), and as the workload asked them
    #: (synthetic prompts: None otherwise).
    prompt_tokens: int | None = None
    asked_input_tokens: int | None = None
    #: The output length asked to be held, and whether the answer held it (None: not asked).
    asked_output_tokens: int | None = None
    length_held: bool | None = None
    error: str | None = None
    #: Where `token_ids` came from: `engine`, `logprobs`, or `approximate` (re-tokenized text).
    token_ids_source: str = "engine"
    top2_margins: list[float] = Field(default_factory=list)
    #: The engine's calibrated near-tie margin in nats (`sweeper.proof.scored.catalog`), which a
    #: greedy divergence's top-2 margin is judged against unless the spec sets one; None: none.
    near_tie_margin: float | None = None
    #: A coupled server's sample margins (AR baseline at temperature > 0): per token, the
    #: probability mass between its uniform and the chosen token's CDF edge.
    sample_margins: list[float] = Field(default_factory=list)
    verdict: Verdict | None = None
    divergence_index: int | None = None
    # The load client's timeline, in seconds from the point's t0 (one monotonic clock for every
    # client process): when the request was due, when it left, when it ended.
    #: Its place in the point's sequence (the arrival schedule's order).
    index: int | None = None
    #: The client process that sent it.
    worker: int | None = None
    scheduled_s: float | None = None
    sent_s: float | None = None
    done_s: float | None = None
    #: Open loop: how long it waited for a free `max_concurrency` slot (the load's shape).
    slot_wait_s: float | None = None
    #: Open loop: how late the client sent it after it was due (and its slot free).
    late_s: float | None = None
    #: False when it was never sent or still in flight at the end of duration + grace.
    finished: bool = True


#: The roles of a point's samples (`determinism.sampled: distribution`): a speculative config's
#: (`test`), its AR baseline's that the test compares with (`ar`), and the baseline's second
#: set, the AR-vs-AR control (`control`).
SampleRole = Literal["test", "ar", "control"]


class SampleRecord(PointKey):
    """One seeded sample drawn for a two-sample test (`samples.jsonl`): not a measured request
    (never timed, never in throughput), evidence of the distribution a server samples from."""

    mode: str
    temperature: float
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int
    role: SampleRole
    prompt_id: str
    #: Which sample of its role and prompt (0..N-1; a point asking n > 1 choices: sample x n +
    #: choice, 0..N·n-1), and the seed its request was drawn with.
    index: int
    seed: int
    token_ids: list[int] = Field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    error: str | None = None


class PointRecord(ExposureColumns, _PointColumns):
    """One point: a (host, server config, request config) and its numbers (docs/results.md: points).
    Its exposure columns aggregate its requests': counts summed, largest sizes maxed,
    histograms added (`sweeper.measure.exposure`)."""

    status: Literal["ok", "failed"]
    reason: str = ""
    output_tok_s: float | None = None
    request_s: float | None = None
    ttft_p50: float | None = None
    ttft_p90: float | None = None
    ttft_p99: float | None = None
    itl_p50: float | None = None
    itl_p90: float | None = None
    itl_p99: float | None = None
    e2e_p50: float | None = None
    e2e_p90: float | None = None
    e2e_p99: float | None = None
    tau: float | None = None
    #: Where tau came from: `requests` (each response carried it), `metrics` (the engine's
    #: counters, before and after the measured requests), or None (unknown).
    acceptance_source: str | None = None
    #: Where the top-2 margins judging this point's divergences came from: `logprobs` (an AR
    #: point's own), `baseline` (a speculative point is never sent logprobs: its AR
    #: baseline's), `none` (the AR server refused logprobs: near ties cannot be told).
    margin_source: str | None = None
    #: How its sampled outputs were proven (temperature > 0): `coupled` (token for token
    #: against AR at the same seed), `scored` (every token of seeded samples scored by the
    #: target's prefill), `distribution` (a two-sample test on seeded samples), `repeats` (only
    #: its repeats compared); None at temperature 0.
    sampled_check: str | None = None
    #: Why the point is `unproven` ("" otherwise): what was not checked and why.
    unproven_reason: str = ""
    #: A distribution-tested point's verdict in words: the test, p, N, which way the samples
    #: moved, what it detects ("" otherwise).
    sampled_detail: str = ""
    #: The two-sample test (`distribution`): its p-value, its name, samples a side per prompt,
    #: where its samples were drawn (this point, or a sibling at another load), the smallest
    #: shift (total variation per token) it detects with 80% power on this run's baseline
    #: samples, and the AR-vs-AR control's p-value (on an AR point: its own control).
    distribution_p: float | None = None
    distribution_test: str | None = None
    distribution_n: int | None = None
    samples_point_id: str | None = None
    distribution_shift: float | None = None
    distribution_control_p: float | None = None
    #: Who scored its sampled outputs (`sweeper.runner.scoring`): `self`, or the label of the
    #: server that scored them after it; whether that is still to come (its verdict settles
    #: then: `settled.jsonl`); two scorers of the same AR outputs, the largest difference of a
    #: token's raw probability and over how many tokens; and, beside coupling, the scored
    #: verdict in its own columns.
    scored_by: str | None = None
    scored_pending: bool | None = None
    #: The scored test (`sweeper.proof.scored.SCORED_COLUMNS`, declared here so that no run
    #: reads them as grid flags): its p-value and which way u moved (hotter, colder, shape),
    #: the tokens scored, the first impossible token's evidence and how many there were, the
    #: near-ties, the log temperature factor it detects with 80% power, the share of tokens
    #: scored exactly; and its AR point's control (p, tokens, impossible tokens, near-ties).
    scored_p: float | None = None
    scored_direction: str | None = None
    scored_n_tokens: int | None = None
    scored_impossible: str | None = None
    scored_impossible_n: int | None = None
    scored_near_ties: int | None = None
    scored_power: float | None = None
    scored_exact_share: float | None = None
    scored_control_p: float | None = None
    scored_control_tokens: int | None = None
    scored_control_impossible: int | None = None
    scored_control_near_ties: int | None = None
    score_agreement: float | None = None
    score_agreement_n: int | None = None
    scored_verdict: Verdict | None = None
    scored_detail: str = ""
    #: Labels the engine's rules make this same behaviour (`sweeper.catalog.effective`): the
    #: config was measured once, and these numbers stand for each of them.
    covers_labels: list[str] = Field(default_factory=list)
    accepted_tokens: float | None = None
    draft_tokens: float | None = None
    #: Throughput over the exactness baseline's: the AR server with the speculative configs'
    #: own flags (same numerics), which also judges exactness.
    speedup: float | None = None
    #: Throughput over the speed baseline's (`runtime.speed_baseline`: e.g. the production
    #: attention backend), where the spec names one; None otherwise.
    speed_speedup: float | None = None
    determinism: Verdict = "n/a"
    #: `engine` when every request's ids came from the engine's OpenAI extension, `native`
    #: from its native API (SGLang's `/generate`); else the least exact source (`logprobs`,
    #: `approximate`, `none`: a stream carried no ids): verdicts on approximate ids compare
    #: re-tokenized text.
    token_ids_source: str = "engine"
    n_requests: int = 0
    n_errors: int = 0
    output_tokens: int = 0
    #: Seconds of the measured window that throughput divides by.
    wall_s: float | None = None
    #: Requests never sent or still in flight at the end of duration + grace (among n_errors).
    n_unfinished: int = 0
    #: Per-request mean inter-token latency (e2e - ttft) / (tokens - 1), what the SLO's ITL
    #: judges; `itl_*` are the gaps between chunks.
    request_itl_p50: float | None = None
    request_itl_p99: float | None = None
    #: Baseline over this point's median E2E / median request ITL (above 1: faster). The
    #: speedup of an open loop below its knee, where throughput is the offered rate for both.
    e2e_speedup: float | None = None
    itl_speedup: float | None = None
    # Goodput against the spec's `slo` (None without one).
    goodput_share: float | None = None
    goodput_rps: float | None = None
    meets_slo: bool | None = None
    # The load client's self-check: when `client_bound`, the numbers describe the client, not
    # the server, and are never reported as the server's (no speedup, never the best config).
    client_bound: bool | None = None
    client_bound_reason: str = ""
    client_processes: int | None = None
    #: Requests whose asked output length was not held (the engine takes no ignore_eos /
    #: min_tokens, or ignored them), and why, in words.
    lengths_not_held: int = 0
    length_note: str = ""
    #: The busiest client process's CPU time over wall time.
    client_cpu_share: float | None = None
    #: The worst client process's event-loop lag percentiles (seconds).
    loop_lag_p90: float | None = None
    loop_lag_p99: float | None = None
    #: Open loop: send lateness percentiles (seconds).
    late_p90: float | None = None
    late_p99: float | None = None
    #: What the client achieved: the send rate (req/s) and the time-weighted mean in flight.
    achieved_rate: float | None = None
    mean_in_flight: float | None = None
    max_in_flight: int | None = None
    fingerprint: str | None = None
    started_at: str
    finished_at: str
    log_path: str = ""
    log_tail: str = ""
    #: Where the server ran on a Slurm host: the allocation's job id, the server's step id
    #: (`<job>.<step>`) and the node; None elsewhere.
    slurm_job_id: str | None = None
    slurm_step_id: str | None = None
    slurm_node: str | None = None
    #: Which exposure columns the engine did not report (None there), and why.
    exposure_note: str = ""
    # The host during the measured requests (`sweeper.measure.hostload`): CPU cores other
    # processes than the sweep's used, the host's CPUs, GPU utilisation (%) and memory (MiB) on a
    # GPU host; whether this point or its AR baseline point was measured on a busy host (a
    # speedup of either is withheld by `best` and marked in the report).
    host_other_cpu: float | None = None
    host_cpus: int | None = None
    host_busy: bool | None = None
    host_busy_reason: str = ""
    baseline_busy: bool | None = None
    gpu_util: float | None = None
    gpu_mem_mib: float | None = None


#: Which server and request config a point measured: what `compare` matches points by.
CONFIG_COLUMNS: tuple[str, ...] = (
    *ServerConfigColumns.model_fields,
    *RequestConfigColumns.model_fields,
)


def factor_kinds(columns: Iterable[str]) -> dict[str, str]:
    """The diagnosis's factors among a requests table's columns, column -> kind: every config
    column (the record models' and the extra grid flags) is a `level`, and the request model's
    marked fields (prompt, exposure) their marked kind. Column order is kept."""
    marked = {
        name: str(extra[FACTOR_KEY])
        for name, info in RequestRecord.model_fields.items()
        if isinstance(extra := info.json_schema_extra, dict) and FACTOR_KEY in extra
    }
    present = list(columns)
    config = {*CONFIG_COLUMNS, *extra_config_columns(present)}
    return {
        c: ("level" if c in config else marked[c]) for c in present if c in config | set(marked)
    }


def extra_config_columns(columns: Iterable[str]) -> list[str]:
    """Columns of a points or requests table that no record model declares: the extra grid
    flags."""
    declared = {*PointRecord.model_fields, *RequestRecord.model_fields}
    return [c for c in columns if c not in declared]
