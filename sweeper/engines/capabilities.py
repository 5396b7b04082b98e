"""Capabilities negotiated with a running server, not assumed from the engine's name.

After a server is proven and before it is measured, its engine probes what this build gives
(`Engine.negotiate`, one short request per path tried, best path first) and picks one path for
each need:

- `token_ids`: where the output's ids come from. `openai` (completions chunks' `token_ids`),
  `sglext` (a chat stream's final `sglext.output_ids`), `native` (SGLang's streamed `/generate`
  `output_ids`), `logprobs` (ids spelled in logprob tokens), `tokenize` (the text re-tokenized
  by the server's `/tokenize`: approximate), or `none`.
- `acceptance`: where tau comes from. `requests` (each response carries it), `metrics`
  (the server's `/metrics` counters, read before and after a point), or `none`. An AR server
  needs none: `not needed`.
- `scoring`: how its prefill scores a sampled output (`determinism.sampled: scored`): `exact`
  (the bundled runtime's `/score`), `topk` (prompt / input-token logprobs: the token's and the
  top k), or `none`; with k and its sampler's processing order (`sweeper.engines.scoring`).
- `margins`: where the top-2 margins that tell a near tie from a divergence come from.
  `logprobs` (this server returns top-2 logprobs: only an AR server is asked), `baseline` (a
  speculative server is never sent logprobs; its divergences are judged by the AR baseline's
  margins at the same index), or `none` (an AR server that refuses them: near ties cannot be
  told, every divergence counts).

The choice and its evidence (what each probe answered) go into the manifest per host and server
config; every point row says which it used (`token_ids_source`, `acceptance_source`,
`margin_source`). A server that gives no ids by any path fails its config's points with one line
naming what the build lacks (`CapabilityError`).

An engine is shared by every host thread, so negotiation never changes it: `bind` returns a copy
that writes requests for the negotiated paths (`Negotiated`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from sweeper.config.features import BY_NAME, used
from sweeper.engines.base import (
    Capabilities,
    EngineError,
    HttpRequest,
    RequestSpec,
    Scored,
    ScoringError,
    ScoringPath,
)
from sweeper.proof.scored.catalog import SCORING

if TYPE_CHECKING:
    from sweeper.config import ServerConfig
    from sweeper.engines.stream import ChunkReader

#: Token-id paths, best first (exact ids before recovered ones before re-tokenized text).
TOKEN_ID_PATHS = ("openai", "sglext", "native", "logprobs", "tokenize", "none")
#: Seconds one probe may take (a cold server's first request compiles kernels).
PROBE_TIMEOUT_S = 120.0


class CapabilityError(EngineError):
    """The build gives no path for something every point needs; the message names what."""


class Negotiated:
    """Mixin for engines: `capabilities` is None until `bind`; request writers ask
    `margins_allowed` before asking for logprobs."""

    capabilities: Capabilities | None = None
    #: Whether the engine's reader recovers ids a stream lacks (logprob tokens, `/tokenize`).
    recovers_ids = False

    def negotiate(
        self, client: httpx.Client, base_url: str, server_config: ServerConfig,
        probe: RequestSpec, model: str | None,
    ) -> Capabilities:  # fmt: skip
        """The engines with one way to ask (their own OpenAI request) negotiate alike."""
        speculative = server_config.mode == "speculative"
        return negotiate_openai(
            self, client, base_url, speculative, probe, model, recovers_ids=self.recovers_ids
        )

    def bind(self, capabilities: Capabilities | None) -> Any:
        """A copy of this engine that writes requests for `capabilities`' paths."""
        bound = copy.copy(self)
        bound.capabilities = capabilities
        return bound

    def negotiate_scoring(
        self, client: httpx.Client, base_url: str, server_config: ServerConfig,
        probe: RequestSpec, model: str | None, version: str | None,
    ) -> ScoringPath:  # fmt: skip
        """Engines without a scoring path (an endpoint nobody here started) score nothing."""
        return "none", None, (), "scoring: none (this engine has no scoring path)"

    def score(
        self, client: httpx.Client, base_url: str, spec: RequestSpec, continuation: list[int],
        model: str | None,
    ) -> Scored:  # fmt: skip
        raise ScoringError("this engine has no scoring path")

    def negotiate_features(
        self, client: httpx.Client, base_url: str, server_config: ServerConfig,
        probe: RequestSpec, wanted: Mapping[str, Any], model: str | None, build: str | None,
    ) -> tuple[str | None, list[str]]:  # fmt: skip
        """(why this server drops one of the request features `wanted` (name -> frozen
        value), in one line naming engine, build and parameter, or None; the probes'
        evidence). Engines without probes leave it to the feature table
        (`sweeper.catalog.features`), checked before."""
        return None, []

    def margins_allowed(self) -> bool:
        """Whether greedy requests may ask for logprobs (top-2 margins): never on a server
        negotiated as speculative (margins then come from the AR baseline), else when the server
        gives them. A coupled request's sample margins are asked regardless (`openai_body`)."""
        return self.capabilities is None or self.capabilities.margins == "logprobs"


@dataclass
class ProbeResult:
    """One probe request's answer: HTTP status, the reader that read it, or why it failed."""

    status: int | None
    reader: ChunkReader | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200


def probe(
    client: httpx.Client, base_url: str, request: HttpRequest, reader: ChunkReader
) -> ProbeResult:
    """Send one streamed request and feed its events to `reader` (never raises for HTTP).

    A transport failure before any event was read is tried once more: a server that answered
    the previous probe with an error may have closed the kept-alive connection under it (seen
    on a real SGLang after a 500), which says nothing about what the build offers."""
    started = False

    def feeding(chunk: Any) -> None:
        nonlocal started
        started = True
        reader.feed(chunk)

    for attempt in (1, 2):
        result = _probe_once(client, base_url, request, reader, feeding)
        if result.status is not None or started or attempt == 2:
            return result
    raise AssertionError("unreachable")


def _probe_once(
    client: httpx.Client,
    base_url: str,
    request: HttpRequest,
    reader: ChunkReader,
    feed: Any,
) -> ProbeResult:
    try:
        with client.stream(
            "POST",
            base_url + request.path,
            json=request.body,
            headers=request.headers,
            timeout=PROBE_TIMEOUT_S,
        ) as resp:
            if resp.status_code != 200:
                body = resp.read().decode("utf-8", "replace")
                return ProbeResult(resp.status_code, None, error_message(body))
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if isinstance(chunk, dict) and chunk.get("error"):
                    return ProbeResult(200, reader, error_message(data))
                feed(chunk)
    except (httpx.HTTPError, ValueError) as exc:
        return ProbeResult(None, None, f"{type(exc).__name__}: {exc}")
    return ProbeResult(200, reader)


def near_tie_margin(engine: str) -> float | None:
    """The engine's near-tie margin in nats (`sweeper.proof.scored.catalog`), recorded with each of
    its scores and request records (greedy and scored near ties alike); None for an engine the
    catalog does not know."""
    scoring = SCORING.get(engine)
    return scoring.near_tie_margin if scoring is not None else None


def processors_of(spec: RequestSpec) -> dict[str, Any]:
    """The request's processors beyond temperature, top-p and top-k (the features that are
    `Feature.processor`s) `spec` sets, by name, as the request config holds them (logit bias as
    (id, bias) pairs, a response format as canonical JSON text): what a scorer sends where it
    applies them (the runtime's `/score`)."""
    return {f.name: value for f, value in used(spec.feature_values()) if f.processor}


def scored_under(engine: str, spec: RequestSpec) -> dict[str, Any]:
    """A `ScoreRecord`'s fields saying what a score of `spec`'s output is computed under beyond
    temperature, top-p and top-k: the request's processors (as their record columns) and the
    engine's logit processors' order and repetition scope (`sweeper.proof.scored.catalog`; none for
    an engine the catalog does not know)."""
    out = {name: BY_NAME[name].column_value(value) for name, value in processors_of(spec).items()}
    scoring = SCORING.get(engine)
    if scoring is not None:
        order = scoring.orders_of(None)
        out |= {"logit_order": list(order.logits), "repetition_scope": order.repetition_scope}
    return out


def error_message(raw: str) -> str:
    """The message of an error body: OpenAI's `{"error": {"message"}}`, SGLang's
    `ErrorResponse` (`{"object": "error", "message", "type", "code"}` at the top level), a
    stream's `{"error": "..."}`; else the raw text, cut."""
    try:
        data = json.loads(raw)
    except ValueError:
        return raw[:500]
    if isinstance(data, dict):
        inner = data.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str) and inner:
            return inner
        if data.get("message"):
            return str(data["message"])
        if isinstance(data.get("detail"), str):
            return str(data["detail"])
    return raw[:500]


def lacking(what: str, tried: list[str]) -> CapabilityError:
    """The one-line failure for a need no path gives."""
    return CapabilityError(f"this build gives no {what}: " + "; ".join(tried))


def negotiate_openai(
    engine: Any,
    client: httpx.Client,
    base_url: str,
    speculative: bool,
    spec: Any,
    model: str | None,
    *,
    recovers_ids: bool = False,
) -> Capabilities:
    """One probe through the engine's own OpenAI request (engines with one way to ask):
    ids in the stream (`openai`), else, for a reader that recovers them (`recovers_ids`:
    engine `openai`), from logprob tokens or `/tokenize`; acceptance per request, else from the
    engine's counters; margins from an AR server that returns them. A probe that fails outright
    (a broken server) decides nothing: the engine's own paths are assumed and each point then
    fails with its requests' errors."""
    from dataclasses import replace

    spec = replace(spec, temperature=0.0, seed=None, top_p=None)
    margins = "baseline" if speculative else "logprobs"
    acceptance = "requests" if speculative else "not needed"
    evidence: list[str] = []
    caps = Capabilities("openai", acceptance, margins)
    request = engine.bind(caps).request(spec, model)
    result = probe(client, base_url, request, engine.reader(spec))
    if not result.ok and not speculative:
        evidence.append(f"{request.path} with logprobs: HTTP {result.status}: {result.error}")
        caps = replace(caps, margins="none")
        request = engine.bind(caps).request(spec, model)
        result = probe(client, base_url, request, engine.reader(spec))
    reader = result.reader
    if not result.ok or reader is None:
        evidence.append(f"probe {request.path} failed ({result.status}: {result.error})")
        return replace(caps, evidence=(*evidence, "assumed the engine's own paths"))
    ids = "openai" if reader.saw_ids else "none"
    if ids == "none" and recovers_ids:
        ids = "logprobs" if getattr(reader, "logprob_ids", None) else "tokenize"
    evidence.append(
        f"{request.path}: " + (f"{len(reader.token_ids)} ids" if reader.saw_ids else "no ids")
    )
    if ids == "none":
        raise lacking("token ids", [*evidence, "no token_ids in its stream"])
    if speculative and not reader.acceptance:
        counters = engine.acceptance_counters(client, base_url)
        acceptance = "metrics" if counters else "none"
        evidence.append("acceptance: " + ("/metrics counters" if counters else "none"))
    if not speculative and caps.margins == "logprobs":
        got = [m for m in reader.margins if m == m]
        caps = replace(caps, margins="logprobs" if got else "none")
        evidence.append("top-2 logprobs" if got else "no top-2 logprobs")
    return Capabilities(ids, acceptance, caps.margins, tuple(evidence))
