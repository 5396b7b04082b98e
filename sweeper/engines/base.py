"""The engine interface: what the sweeper needs to know about a server it drives.

An engine owns the argv and environment of a server config (`launch`), what "ready" means
(`health_path`), how the running server's effective config is proven (`prove`), how a request
body is written (`request`), how token ids, top-2 margins and acceptance are read from its
stream (`reader`, `acceptance_counters`), and which server knobs a running build switches in
place (`switchable`, `switch`: a new config without a new process). Which of its paths a
running build actually gives is negotiated after the proof (`negotiate`, see
`capabilities.py`); `bind` then gives the engine that writes requests for the paths chosen
(never logprobs to a speculative server). One module per engine: its class registers against
the engine's catalog record (`register`, in the spirit of GuideLLM's `@Backend.register`), and
`registry.py` finds it by name; nothing outside `sweeper/engines/` branches on an engine's name.

The proof that the process on the port is the one launched (pid, cmdline, environment, sockets)
needs no engine and lives in `sweeper.services.identity`; an engine adds what it reports itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import httpx

from sweeper.catalog.records import RECORDS, EngineRecord
from sweeper.config.features import RequestFeatures

if TYPE_CHECKING:
    from sweeper.config import ServerConfig
    from sweeper.engines.launch import Launch
    from sweeper.engines.stream import ChunkReader
    from sweeper.results.loads import StartPhase
    from sweeper.spec import RuntimeSpec


class EngineError(RuntimeError):
    """The server is not the config requested; the message gives both values, secrets masked."""


@dataclass(frozen=True)
class RequestSpec(RequestFeatures):
    """One request to send: which prompt, how to sample (the request features its config asks
    among it, rendered in each engine's spelling: `sweeper.catalog.features`), which repeat."""

    prompt_id: str
    prompt: str
    max_tokens: int
    temperature: float
    seed: int | None = None
    repeat: int = 0
    chat: bool = False
    top_p: float | None = None
    top_k: int | None = None
    #: Ask for the server's per-token sample margins (logprobs at temperature > 0, only where
    #: sampling is coupled: the AR baseline's and the speculative outputs' of a coupled point).
    sample_margins: bool = False
    #: Chat messages ({"role", "content"}); when absent, `prompt` is one user message.
    messages: tuple[dict[str, str], ...] | None = None
    #: The prompt as token ids (completions): an exact input length, no tokenizer in between.
    prompt_token_ids: tuple[int, ...] | None = None
    #: Length control, sent only to an engine that takes it (`length_control`).
    ignore_eos: bool = False
    min_tokens: int | None = None
    #: Where the prompt came from (request columns and diagnosis factors).
    dataset: str | None = None
    category: str | None = None
    turn: int | None = None
    #: The output length the workload asked to hold (None: an answer may end at EOS).
    hold_tokens: int | None = None


@dataclass(frozen=True)
class HttpRequest:
    """What one request sends: the path, the JSON body and any headers."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineProof:
    """What the engine itself reported about the server it runs, and what that proves."""

    #: A digest naming the served config (the runtime's fingerprint, or a hash of what the
    #: engine reported); None when the engine reports nothing to hash.
    fingerprint: str | None
    version: str | None = None
    #: The runtime's source hash, where the engine reports one.
    source_hash: str | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    #: What was proven and what could not be, in words (the manifest records both).
    proven: tuple[str, ...] = ()
    unproven: tuple[str, ...] = ()


#: A point row's `token_ids_source` for each path (the values the analysis reads).
IDS_SOURCE = {
    "openai": "engine",
    "sglext": "engine",
    "native": "native",
    "logprobs": "logprobs",
    "tokenize": "approximate",
    "none": "none",
}


@dataclass(frozen=True)
class Capabilities:
    """What one running server gives, the path picked for each need, and why."""

    token_ids: str
    acceptance: str
    margins: str
    #: What each probe answered, in words (the manifest records them).
    evidence: tuple[str, ...] = ()
    #: Engine-specific facts the chosen paths need (SGLang: how /generate streams ids).
    details: Mapping[str, Any] = field(default_factory=dict)
    #: How it samples: `coupled` (it advertises, in `/server_info` `sampling.coupled`, that its
    #: uniform is a function of seed and position, so sampled speculative output equals AR's at
    #: the same seed) or `independent` (nothing advertised: rejection sampling is assumed).
    sampling: str = "independent"
    #: How its prefill scores a sampled output (`determinism.sampled: scored`): `exact` (the
    #: processed distribution itself), `topk` (raw logprobs of the token and its top
    #: `scoring_k`), or `none` (it does not: the AR server scores, or nobody can); and its
    #: sampler's processing order (`sweeper.proof.scored.catalog`).
    scoring: str = "none"
    scoring_k: int | None = None
    scoring_order: tuple[str, ...] = ()

    @property
    def ids_source(self) -> str:
        return IDS_SOURCE.get(self.token_ids, self.token_ids)

    def to_dict(self) -> dict[str, Any]:
        return {
            "token_ids": self.token_ids,
            "acceptance": self.acceptance,
            "margins": self.margins,
            "evidence": list(self.evidence),
            "details": dict(self.details),
            "sampling": self.sampling,
            "scoring": self.scoring,
            "scoring_k": self.scoring_k,
            "scoring_order": list(self.scoring_order),
        }


@dataclass(frozen=True)
class Scored:
    """One sampled output scored by a server's prefill: per token the `PositionScore` fields
    (`sweeper.results.scores`), on the server's basis, in its sampler's order."""

    basis: str
    order: tuple[str, ...]
    k: int | None
    positions: list[dict[str, Any]]
    #: The prompt's token ids the output was scored after (None: the scorer does not know
    #: them): what a repetition penalty counts beside the output.
    prompt_ids: tuple[int, ...] | None = None


#: What negotiating scoring found: (basis `exact` | `topk` | `none`, top k, the sampler's
#: processing order, the evidence in words).
ScoringPath = tuple[str, int | None, tuple[str, ...], str]


class ScoringError(EngineError):
    """A scoring request failed; the message says why (recorded with the sample's score)."""


@dataclass(frozen=True)
class HostRequirements:
    """What a host needs to run the engine (`sweeper doctor` checks it)."""

    python_packages: tuple[str, ...]
    gpu: bool


class Engine(Protocol):
    """A server the sweeper measures; see the module docstring."""

    @property
    def name(self) -> str:
        """The spec's `runtime.engine` value."""
        ...

    @property
    def launched(self) -> bool:
        """False for an endpoint that is already running: the sweeper starts and stops nothing."""
        ...

    #: Polled until it answers 200; the engine's docstring says what that 200 means.
    health_path: str

    def launch(
        self,
        server_config: ServerConfig,
        *,
        python: str,
        listen_host: str,
        workdir: str | None,
        secrets: Mapping[str, str],
    ) -> Launch:
        """The command, environment and identity of one start of `server_config`; `secrets`
        (server variable -> value) go to the launch's secret environment only."""
        ...

    def prove(
        self, client: httpx.Client, base_url: str, launch: Launch, server_config: ServerConfig
    ) -> EngineProof:
        """Check what the running server reports against the request; raise EngineError."""
        ...

    #: What `negotiate` found for the server this engine is bound to (None: unbound).
    capabilities: Capabilities | None

    def negotiate(
        self,
        client: httpx.Client,
        base_url: str,
        server_config: ServerConfig,
        probe: RequestSpec,
        model: str | None,
    ) -> Capabilities:
        """Probe the proven server with short requests shaped like `probe` (temperature 0) and
        pick a path for token ids, acceptance and margins; CapabilityError (one line naming
        what the build lacks) when no path gives ids."""
        ...

    def negotiate_features(
        self,
        client: httpx.Client,
        base_url: str,
        server_config: ServerConfig,
        probe: RequestSpec,
        wanted: Mapping[str, Any],
        model: str | None,
        build: str | None,
    ) -> tuple[str | None, list[str]]:
        """Prove the proven server honours each request feature of `wanted` (name -> frozen
        value) with short probes, or refuse the first it drops: (one line naming engine,
        build and parameter, or None; the probes' evidence)."""
        ...

    def bind(self, capabilities: Capabilities | None) -> Engine:
        """A copy writing requests for `capabilities`' paths (the engine itself is shared)."""
        ...

    def negotiate_scoring(
        self,
        client: httpx.Client,
        base_url: str,
        server_config: ServerConfig,
        probe: RequestSpec,
        model: str | None,
        version: str | None,
    ) -> ScoringPath:
        """How this proven server scores sampled outputs, probed with one short request:
        (basis `exact` | `topk` | `none`, top k, processing order, evidence in words). A
        speculative server of an engine whose speculative servers do not score their own is
        not asked (`sweeper.proof.scored.catalog`)."""
        ...

    def score(
        self,
        client: httpx.Client,
        base_url: str,
        spec: RequestSpec,
        continuation: list[int],
        model: str | None,
    ) -> Scored:
        """`continuation` (an output of `spec`'s prompt) scored under `spec`'s temperature,
        top-p and top-k by this server's prefill; ScoringError when it cannot."""
        ...

    def request(self, spec: RequestSpec, model: str | None) -> HttpRequest:
        """The streaming request for one RequestSpec."""
        ...

    def reader(self, spec: RequestSpec) -> ChunkReader:
        """A fresh reader for the stream of one request."""
        ...

    def acceptance_counters(self, client: httpx.Client, base_url: str) -> dict[str, float] | None:
        """Cumulative acceptance counters when the engine gives acceptance only per server
        (a point's acceptance is then the difference over its measured requests); None when
        every response carries its own."""
        ...

    def requirements(self) -> HostRequirements:
        """What a host needs for this engine."""
        ...

    def startup_phases(self, log: str, info: Mapping[str, Any], started: float) -> list[StartPhase]:
        """Where one start went, as the server itself reports it: the phases its log since
        the start (`log`) or its proof's `/server_info` (`info`) give, in seconds since its
        process started (`started`: that start's unix time as the sweeper saw it);
        `sweeper.results.loads` names the phases. A phase it does not report is absent."""
        ...

    def switchable(self, capabilities: Capabilities | None) -> frozenset[str]:
        """The server knobs this build switches in place (`capabilities`: what negotiation
        found for it; None: not yet negotiated, the declared set); empty: every change of
        config is a load."""
        ...

    def switch(self, client: httpx.Client, base_url: str, sc: ServerConfig) -> None:
        """Switch the running server to `sc` in place (no new process); EngineError, one line
        naming engine, build and key, when it refuses. The caller proves the config after."""
        ...


class Registered:
    """Base of the engine classes: the catalog record a class drives (set by `register`) gives
    its name, whether it is launched, and the knobs it declares switchable in place."""

    record: ClassVar[EngineRecord]

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def launched(self) -> bool:
        return self.record.launched

    def switchable(self, capabilities: Capabilities | None) -> frozenset[str]:
        """The knobs its record declares (`ServerCommand.switchable`; none for an endpoint
        the sweeper does not start). An engine whose builds differ negotiates its own."""
        command = self.record.command
        return frozenset(command.switchable) if command is not None else frozenset()

    def switch(self, client: httpx.Client, base_url: str, sc: ServerConfig) -> None:
        """Engines that switch nothing in place refuse: the runner loads instead."""
        raise EngineError(f"{self.name} switches no server config in place ({sc.label})")


#: Engine name -> the class driving it, made with the runtime section and the manifest's runtime
#: source hash; each class adds itself (`register`), and `registry.py` imports them all.
ENGINES: dict[str, Callable[[RuntimeSpec, str | None], Engine]] = {}

_Class = TypeVar("_Class", bound=type[Registered])


def register(name: str) -> Callable[[_Class], _Class]:
    """Class decorator: the class drives the catalog's engine `name` (one class per record)."""
    record = RECORDS[name]

    def add(cls: _Class) -> _Class:
        if name in ENGINES:
            raise ValueError(f"engine {name!r} is registered twice")
        cls.record = record
        ENGINES[name] = cls  # type: ignore[assignment]
        return cls

    return add
