"""What every engine shares: the OpenAI request body, reading a JSON endpoint and a Prometheus
page, comparing a reported config with the expected one, a run's cache of prompt ids, and what
the launched servers do alike: their command (rendered by `sweeper.engines.render`), health
path, length control, token-id request and the scoring they are asked for."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from secrets import token_hex
from typing import Any

import httpx

from sweeper.catalog.features import FEATURE_TABLE
from sweeper.catalog.records import ServerCommand
from sweeper.config import ServerConfig
from sweeper.config.features import used
from sweeper.engines.base import EngineError, HttpRequest, Registered, RequestSpec, ScoringPath
from sweeper.engines.capabilities import Negotiated
from sweeper.engines.feature_probes import probe_features
from sweeper.engines.launch import Launch
from sweeper.engines.render import Rendered, extra_args_of, split_config
from sweeper.engines.scoring import not_asked
from sweeper.proof.scored.catalog import SCORING
from sweeper.spec import RuntimeSpec


def openai_body(
    spec: RequestSpec, model: str | None, *, margins: bool = True, engine: str = "openai"
) -> dict[str, Any]:
    """The standard streaming body; at temperature 0 and where `margins` (an AR server: a
    speculative one is never asked for them, see `capabilities`) it asks for two top logprobs
    per token, so a divergence can be told from a near tie; a coupled request
    (`spec.sample_margins`, set only for a server that advertised its coupling, margins
    included) asks for its sample margins of AR and speculative servers alike. The request
    features the spec asks are written where `engine`'s rows of the feature table say
    (`feature_fields`: OpenAI's spelling unless an engine names its own); the logprobs a
    workload asks (`spec.logprobs`) are asked of every server, speculative ones included, at
    least as many as asked."""
    body: dict[str, Any] = {
        "max_tokens": spec.max_tokens,
        "temperature": spec.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if model:
        body["model"] = model
    if spec.seed is not None:
        body["seed"] = spec.seed
    if spec.top_p is not None:
        body["top_p"] = spec.top_p
    if spec.top_k is not None:
        body["top_k"] = spec.top_k  # not OpenAI's, but vLLM's, SGLang's and the runtime's
    feature_fields(body, spec, engine)
    # A speculative output's own sample margins say whether its tokens were its draws.
    margins = (margins and spec.temperature == 0) or spec.sample_margins
    asked = [k for k in (spec.logprobs, MARGIN_LOGPROBS if margins else None) if k is not None]
    if spec.chat:
        body["messages"] = (
            list(spec.messages) if spec.messages else [{"role": "user", "content": spec.prompt}]
        )
        if asked:
            body["logprobs"] = True
            body["top_logprobs"] = max(asked)
    else:
        body["prompt"] = (
            list(spec.prompt_token_ids) if spec.prompt_token_ids is not None else spec.prompt
        )
        if asked:
            body["logprobs"] = max(asked)
    if spec.ignore_eos:
        body["ignore_eos"] = True
    if spec.min_tokens:
        body["min_tokens"] = spec.min_tokens
    return body


#: Top logprobs per token that tell a near tie (the top-2 margin).
MARGIN_LOGPROBS = 2


def feature_fields(body: dict[str, Any], spec: RequestSpec, engine: str) -> None:
    """Write the request features `spec` asks into `body` where `engine`'s feature table row
    says (a dotted field is nested: `structured_outputs.regex`), `logit_bias` keyed by token-id
    strings as OpenAI's API spells them; `logprobs` is the caller's (it merges with margins).
    A feature the engine takes nowhere raises LookupError: the plan refuses it first."""
    for feature, value in used(spec.feature_values()):
        if feature.name == "logprobs":
            FEATURE_TABLE.body_field(engine, "logprobs")  # the engine takes it, or LookupError
            continue
        plain = feature.plain(value)
        if feature.name == "logit_bias":
            plain = {str(token): bias for token, bias in plain.items()}
        *parents, leaf = FEATURE_TABLE.body_field(engine, feature.name).split(".")
        place = body
        for key in parents:
            place = place.setdefault(key, {})
        place[leaf] = plain


def api_path(spec: RequestSpec) -> str:
    return "/v1/chat/completions" if spec.chat else "/v1/completions"


#: Pauses between tries of a proof read that failed in transport (three tries in all).
TRANSPORT_RETRY_S = (0.5, 1.5)


def get_json(client: httpx.Client, url: str) -> Any:
    """GET a JSON document; EngineError with the reason when it cannot be had.

    The server was seen healthy just before, so a transport failure (a reset, a dropped tunnel
    channel on a loaded login host) is tried again twice: it says nothing about who answers,
    and a proof failed for it would fail a whole server config. An HTTP error status or a body
    that is not JSON is an answer, and fails at once."""
    for pause in (*TRANSPORT_RETRY_S, None):
        try:
            resp = client.get(url, timeout=10.0)
            resp.raise_for_status()
            return resp.json()
        except httpx.TransportError as exc:
            if pause is None:
                raise EngineError(f"{url} unreadable: {exc}") from exc
            time.sleep(pause)
        except (httpx.HTTPError, ValueError) as exc:
            raise EngineError(f"{url} unreadable: {exc}") from exc
    raise AssertionError("unreachable")


def same_value(want: Any, got: Any) -> bool:
    """A requested value and a reported one agree: numbers by value, bools by truth, the rest
    as text (an engine may report "16" for 16)."""
    if want == got:
        return True
    if isinstance(want, bool) or isinstance(got, bool):
        truthy = ("true", "on", "1", "yes")
        return (str(want).lower() in truthy) == (str(got).lower() in truthy)
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return float(want) == float(got)
    return str(want) == str(got)


def mismatches(expected: Mapping[str, Any], reported: Mapping[str, Any]) -> list[str]:
    """`key: requested X, server runs Y` for each expected key the report contradicts; an
    empty `expected` (a launch no engine rendered) proves nothing and is refused."""
    if not expected:
        raise EngineError("the launch carries no expected config: nothing to prove against")
    wrong = []
    for key, want in expected.items():
        if key not in reported:
            if want is not None:
                wrong.append(f"{key}: requested {want!r}, the server does not report it")
        elif not (want is None and reported[key] is None) and not same_value(want, reported[key]):
            wrong.append(f"{key}: requested {want!r}, server runs {reported[key]!r}")
    return wrong


def metric_samples(text: str) -> Iterator[tuple[str, str, float]]:
    """(metric name, the whole line, its value) of each sample line of a Prometheus text page;
    comments and blank lines skipped."""
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        yield name, line, float(line.rsplit(" ", 1)[1])


class PromptIds:
    """Prompt key -> its token ids, asked of a server once and shared by every server config and
    host of the run (one tokenizer), so every config is sent the same ids."""

    def __init__(self) -> None:
        self._ids: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, ask: Callable[[], list[int]]) -> list[int]:
        """The ids cached under `key`, asked (`ask`, which raises when it gets none) the first
        time; a copy, so a caller may change it."""
        with self._lock:
            if key not in self._ids:
                self._ids[key] = ask()
            return list(self._ids[key])

    def clear(self) -> None:
        """Forget every prompt's ids (another run, another tokenizer)."""
        with self._lock:
            self._ids.clear()


class LaunchedServer(Registered, Negotiated):
    """An engine whose server the sweeper starts as its record's `ServerCommand` says:
    `PYTHON <entry> <command()'s flags> --host H --port P`, then the launch id where the server
    takes one. A fresh launch id names every start (in logs and the systemd unit). The engines'
    module docstrings say what their `/health` 200 means."""

    health_path = "/health"
    #: Output-length fields it takes (the bundled runtime, vLLM and SGLang take both, under
    #: vLLM's names, as extra sampling fields).
    length_control: tuple[str, ...] = ("ignore_eos", "min_tokens")

    def __init__(self, runtime: RuntimeSpec, source_hash: str | None = None) -> None:
        self.runtime = runtime
        mapping = runtime.engine_mapping()
        assert mapping is not None
        self.mapping = mapping

    @property
    def server(self) -> ServerCommand:
        """How the record says this engine's server is started."""
        assert self.record.command is not None
        return self.record.command

    def render(self, server_config: ServerConfig) -> Rendered:
        """The server's flags (without --host/--port/launch id), environment and expected
        config, from one split of `server_config`."""
        raise NotImplementedError

    def command(self, server_config: ServerConfig) -> tuple[list[str], dict[str, str]]:
        """The server's flags (without --host/--port/launch id) and the mapped environment."""
        rendered = self.render(server_config)
        return rendered.argv, rendered.env

    def request(self, spec: RequestSpec, model: str | None) -> HttpRequest:
        """The OpenAI streaming request, asking for the output's ids on every chunk."""
        body = openai_body(spec, model, margins=self.margins_allowed(), engine=self.name)
        return HttpRequest(api_path(spec), {**body, "return_token_ids": True})

    def negotiate_scoring(
        self, client: httpx.Client, base_url: str, server_config: ServerConfig,
        probe: RequestSpec, model: str | None, version: str | None,
    ) -> ScoringPath:  # fmt: skip
        """`none` for a speculative server whose engine's speculative servers are not asked
        (`not_asked`: the AR server scores their samples); otherwise `scoring_path`."""
        skipped = not_asked(self.name, server_config)
        if skipped is not None:
            return skipped
        return self.scoring_path(client, base_url, probe, model, version)

    def scoring_path(
        self, client: httpx.Client, base_url: str, probe: RequestSpec, model: str | None,
        version: str | None,
    ) -> ScoringPath:  # fmt: skip
        """How this proven server scores sampled outputs, probed with one short request (each
        engine its own: the runtime's `/score`, vLLM's prompt logprobs)."""
        raise NotImplementedError

    def launch(
        self,
        server_config: ServerConfig,
        *,
        python: str,
        listen_host: str,
        workdir: str | None,
        secrets: Mapping[str, str],
    ) -> Launch:
        rendered = self.render(server_config)
        port, launch_id, server = self.runtime.port, token_hex(8), self.server
        argv = [python, *server.entry, *rendered.argv, "--host", listen_host, "--port", str(port)]
        if server.launch_id_flag is not None:
            argv += [server.launch_id_flag, launch_id]
        return Launch(
            argv=tuple(argv),
            port=port,
            launch_id=launch_id,
            env={**self.runtime.env, **rendered.env},
            secret_env=dict(secrets),
            workdir=workdir,
            expected=rendered.expected,
        )


def build_named(engine: str, build: str | None, server_config: ServerConfig) -> str:
    """How a refusal names the server: `vllm 0.32.0 (speculative)`."""
    return f"{engine} {build or '(build not reported)'} ({server_config.mode})"


class ModuleServer(LaunchedServer):
    """A third-party server (SGLang, vLLM): the model flag, the mapping's speculative flags,
    the CUDA-graph-off flags and the settings under the engine's own names, all from its record.
    It takes no launch id, so the /proc proof alone ties the instance to the launch."""

    def render(self, server_config: ServerConfig) -> Rendered:
        parts = split_config(server_config, self.runtime)
        server, out = self.server, Rendered()
        out.flag(server.model_flag, self.runtime.model)
        if server_config.mode == "speculative":
            out.speculative(self.mapping, parts.speculative, self.runtime.draft)
        if parts.cuda_graph is not None:
            out.snippet(
                server.cuda_graph_on if parts.cuda_graph else server.cuda_graph_off, reported=True
            )
        out.settings(parts, server.setting_flags, renames=server.renames)
        # The logprob limit scoring asks for (`sweeper.proof.scored.catalog`), before the spec's
        # extra arguments: one given there wins, and negotiation finds the limit it set.
        scoring = SCORING.get(self.name)
        out.snippet(scoring.limit_flags if scoring else (), reported=False)
        out.snippet(extra_args_of(server_config, self.runtime), reported=True)
        return out

    def negotiate_features(
        self, client: httpx.Client, base_url: str, server_config: ServerConfig,
        probe: RequestSpec, wanted: Mapping[str, Any], model: str | None, build: str | None,
    ) -> tuple[str | None, list[str]]:  # fmt: skip
        """A third-party build may drop a feature its table row says it takes (a fork, an
        unlisted build): each is proven honoured by a probe (`feature_probes`)."""
        named = build_named(self.name, build, server_config)
        return probe_features(self, client, base_url, probe, wanted, model, named)
