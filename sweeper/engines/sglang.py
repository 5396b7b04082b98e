"""SGLang (`python -m sglang.launch_server`) as an engine: stock DFLASH, or DDTREE builds.

Ready: `/health` answers 503 until SGLang's warm-up request succeeded (its port opens only after
the weights loaded; `/v1/models` answers earlier, so it is no readiness signal). Identity:
`/server_info` (`/get_server_info` on older builds) reports SGLang's RESOLVED server args, typed;
every flag this engine passed must come back with its value, so a value SGLang's resolution
rules override (DFLASH forces topk and steps to 1 with only a warning) fails the point instead of
being measured under the wrong label. Environment variables (PR #29907's `SGLANG_DDTREE_MAX_TOPK`)
are not in /server_info: the /proc proof covers them, and the fingerprint hashes their values
with the reported args (two configs differing only in a cap are two servers). Which paths give
ids, acceptance and margins is negotiated per server (`sglang_negotiate`): SGLang's OpenAI id
extensions where the build has them, else its native streamed `/generate`; streams are read by
`sglang_stream.SGLangReader`. Acceptance from `/metrics` counter deltas where no stream carries
it. Sampled outputs are scored by an AR server's input-token logprobs (`sglang_score`). The
accept thresholds switch in place through SGLang's `/set_internal_state`, where negotiation
found the build takes them, and are proven from its schedulers' state (`sglang_switch`). Facts
and file:line references into SGLang 0.5.23: tests/engines_oracles and the oracle tests that
check them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from itertools import pairwise
from typing import Any

import httpx

from sweeper.config import ServerConfig
from sweeper.engines import sglang_score
from sweeper.engines.base import (
    EngineError,
    EngineProof,
    HostRequirements,
    HttpRequest,
    RequestSpec,
    Scored,
    ScoringPath,
    register,
)
from sweeper.engines.capabilities import Capabilities
from sweeper.engines.common import (
    ModuleServer,
    PromptIds,
    api_path,
    build_named,
    metric_samples,
    mismatches,
    openai_body,
    same_value,
)
from sweeper.engines.launch import Launch
from sweeper.engines.render import Rendered
from sweeper.engines.sglang_negotiate import (
    PROMPT_IDS_AT,
    negotiate_sglang,
    plain_chat_text,
    prompt_ids,
)
from sweeper.engines.sglang_stream import GENERATE_PATH, SGLangReader, generate_body
from sweeper.engines.sglang_switch import (
    SWITCH_KEYS,
    SWITCHABLE,
    live_values,
    negotiate_switchable,
)
from sweeper.engines.sglang_switch import switch as switch_knobs
from sweeper.engines.startup import LogClock, log_phases
from sweeper.engines.stream import ChunkReader
from sweeper.results.loads import PhaseName, StartPhase

#: SGLang's /metrics counters (`--enable-metrics`): tau = generation tokens / verify calls, as
#: SGLang's own per-request `spec_accept_length` counts it.
GENERATION_TOKENS = "sglang:generation_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"

__all__ = ["SGLang", "SGLangReader", "read_metrics"]


#: The request features that need a grammar mask.
GRAMMAR_FEATURES = ("response_format", "regex")
#: SGLang's log lines: `[2026-12-06 13:28:06 TP0] Load weight end. ...` (milliseconds after the
#: seconds under SGLANG_LOG_MS); uvicorn's lines under it carry the same stamp.
LOG_CLOCK = LogClock(
    re.compile(r"^\[(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.(?P<frac>\d+))?[ \]]"),
    "%Y-%m-%d %H:%M:%S",
)
#: The lines that end a start's phases (0.5.15's model runner; the last of each, so a draft
#: model's load and graphs count): weights loaded, then every graph captured (CUDA or CPU
#: graphs, prefill and decode; torch.compile runs inside that capture).
LOG_MARKS: tuple[tuple[PhaseName, tuple[str, ...]], ...] = (
    ("weights_loaded", ("Load weight end.",)),
    ("graphs_captured", ("graph end.",)),
)


def read_metrics(text: str) -> dict[str, float] | None:
    """`drafts` (verify calls) and `accepted_tokens` (generated tokens beyond one per verify)
    from a Prometheus page, summed over label sets; None without speculative counters."""
    sums = {GENERATION_TOKENS: 0.0, VERIFY_CALLS: 0.0}
    seen = False
    for name, _line, value in metric_samples(text):
        if name in sums:
            sums[name] += value
            seen = seen or name == VERIFY_CALLS
    if not seen:
        return None
    verify = sums[VERIFY_CALLS]
    return {"drafts": verify, "accepted_tokens": sums[GENERATION_TOKENS] - verify}


@register("sglang")
class SGLang(ModuleServer):
    """See the module docstring (its command line: the catalog's record)."""

    #: Prompt text (or messages) -> token ids from /tokenize or the chat route, shared by every
    #: server config and host of the run (the AR baseline, which starts first, asks), so all
    #: get the same.
    _prompt_ids = PromptIds()

    def render(self, server_config: ServerConfig) -> Rendered:
        """`ModuleServer.render`; SGLang's resolved server args must also say an AR baseline
        is not speculating."""
        out = super().render(server_config)
        if server_config.mode == "ar":
            out.expect("speculative_algorithm", None)
        return out

    def expected(self, server_config: ServerConfig) -> dict[str, Any]:
        """What SGLang's resolved server args must say for this server config (`render`)."""
        return self.render(server_config).expected

    def prove(
        self, client: httpx.Client, base_url: str, launch: Launch, server_config: ServerConfig
    ) -> EngineProof:
        """Every flag of the launch as /server_info reports it; the knobs a switch changes
        (`sglang_switch.SWITCH_KEYS`) as `server_config` asks them (the launch's value where it
        names none), read from the schedulers' live state where the build reports one, so a
        switched threshold is proven, and recorded in the fingerprint, as it runs."""
        info = self._server_info(client, base_url)
        want = launch.expected
        asked = self.expected(server_config)
        moved = sorted(
            k
            for k in {*want, *asked}
            if k not in SWITCH_KEYS and not same_value(want.get(k), asked.get(k))
        )
        if moved:
            raise EngineError(
                f"{server_config.label} differs from the launched config where no switch "
                "reaches: "
                + "; ".join(f"{k}: asked {asked.get(k)!r}, launched {want.get(k)!r}" for k in moved)
            )
        live = live_values(info)
        wrong = mismatches({k: v for k, v in want.items() if k not in live}, info)
        for key, value in live.items():
            target = asked.get(key, info.get(key))
            if not same_value(target, value):
                wrong.append(f"{key}: requested {target!r}, its schedulers run {value!r}")
        if wrong:
            raise EngineError(
                "SGLang resolved other values than requested (its rules override some flags "
                "with only a warning): " + "; ".join(wrong)
            )
        reported = {key: info.get(key) for key in sorted(want)}
        reported.update(live)  # the threshold in effect, whatever the config names
        # Environment SGLang reads at start (PR #29907's topk cap) is not in /server_info: its
        # values, proven from /proc, enter the fingerprint so two caps are two servers.
        env = {k: v for k, v in sorted(launch.env.items()) if k.startswith("SGLANG_")}
        digest = json.dumps(
            {"version": info.get("version"), "server_args": reported, "env": env},
            sort_keys=True,
        )
        proven = [f"/server_info reports every requested flag ({len(want)})"]
        if live:
            said = ", ".join(f"{k} {v!r}" for k, v in sorted(live.items()))
            proven.append(f"its schedulers run {said} (/server_info internal_states)")
        return EngineProof(
            fingerprint=hashlib.sha256(digest.encode()).hexdigest(),
            version=str(info.get("version")) if info.get("version") else None,
            info={"engine": "sglang", "server_args": reported, "env": env},
            proven=tuple(proven),
            unproven=tuple(
                f"environment {name}: SGLang does not report it (proven from /proc only)"
                for name in sorted(launch.env)
                if name.startswith("SGLANG_")
            ),
        )

    @staticmethod
    def _server_info(client: httpx.Client, base_url: str) -> dict[str, Any]:
        for path in ("/server_info", "/get_server_info"):
            try:
                resp = client.get(base_url + path, timeout=10.0)
            except httpx.HTTPError as exc:
                raise EngineError(f"{path} unreadable: {exc}") from exc
            if resp.status_code == 404:
                continue
            try:
                resp.raise_for_status()
                data = resp.json()
            except (httpx.HTTPError, ValueError) as exc:
                raise EngineError(f"{path} unreadable: {exc}") from exc
            if isinstance(data, dict):
                return data
            raise EngineError(f"{path} is not a JSON object")
        raise EngineError("SGLang answers neither /server_info nor /get_server_info")

    def negotiate(
        self, client: httpx.Client, base_url: str, server_config: ServerConfig,
        probe: RequestSpec, model: str | None,
    ) -> Capabilities:  # fmt: skip
        speculative = server_config.mode == "speculative"
        caps = negotiate_sglang(self, client, base_url, speculative, probe, model)
        keys, said = negotiate_switchable(
            client, base_url, lambda: self._server_info(client, base_url)
        )
        details = {**caps.details, SWITCHABLE: list(keys)}
        return replace(caps, evidence=(*caps.evidence, *said), details=details)

    def switchable(self, capabilities: Capabilities | None) -> frozenset[str]:
        """The accept thresholds negotiation found this build's `/set_internal_state` takes
        and reads back (`sglang_switch`); none before negotiation."""
        found = capabilities.details.get(SWITCHABLE, ()) if capabilities else ()
        return frozenset(found)

    def switch(self, client: httpx.Client, base_url: str, sc: ServerConfig) -> None:
        """Set the running server's switchable knobs to `sc`'s (the launch's value where `sc`
        names none) through `/set_internal_state`, and read them back; EngineError with one
        line naming engine, build and key when the build cannot switch one or it did not
        take. The planner switches only between configs that differ in those knobs alone."""
        info = self._server_info(client, base_url)
        asked = self.expected(sc)
        wanted = {k: asked.get(k, info[k]) for k in SWITCH_KEYS if k in asked or k in info}
        version = info.get("version")
        named = build_named(self.name, str(version) if version else None, sc)
        switch_knobs(
            client,
            base_url,
            lambda: self._server_info(client, base_url),
            wanted,
            self.switchable(self.capabilities),
            named,
        )

    def negotiate_scoring(
        self, client: httpx.Client, base_url: str, server_config: ServerConfig,
        probe: RequestSpec, model: str | None, version: str | None,
    ) -> ScoringPath:  # fmt: skip
        return sglang_score.negotiate_scoring(self, client, base_url, server_config, model, version)

    def score(
        self,
        client: httpx.Client,
        base_url: str,
        spec: RequestSpec,
        continuation: list[int],
        model: str | None,
    ) -> Scored:
        return sglang_score.score(self, client, base_url, spec, continuation, model)

    def negotiate_features(
        self, client: httpx.Client, base_url: str, server_config: ServerConfig,
        probe: RequestSpec, wanted: Mapping[str, Any], model: str | None, build: str | None,
    ) -> tuple[str | None, list[str]]:  # fmt: skip
        """The probes (`feature_probes`), after one refusal no probe may find: a grammar
        (`response_format`, `regex`) on a CPU server whose grammar backend is xgrammar. Its
        mask has no CPU path in SGLang (`xgrammar_backend.apply_vocab_mask` raises
        "Unsupported device: cpu" on 0.5.15) and the scheduler dies with it, so it is refused
        from `/server_info`, never sent."""
        grammar = [name for name in wanted if name in GRAMMAR_FEATURES]
        if grammar:
            info = self._server_info(client, base_url)
            device, backend = info.get("device"), info.get("grammar_backend")
            if device == "cpu" and backend == "xgrammar":
                named = build_named(self.name, build, server_config)
                return (
                    f"{named} refuses {grammar[0]}: its xgrammar mask has no CPU path "
                    "(a grammar request kills the scheduler: 'Unsupported device: cpu')"
                ), [f"/server_info: device {device}, grammar_backend {backend}"]
        return super().negotiate_features(
            client, base_url, server_config, probe, wanted, model, build
        )

    def request(self, spec: RequestSpec, model: str | None) -> HttpRequest:
        caps = self.capabilities
        if caps is not None and caps.token_ids == "native":
            prompt: list[int] | str = spec.prompt
            if spec.prompt_token_ids is not None:  # a synthetic prompt: its ids as given
                prompt = list(spec.prompt_token_ids)
            elif caps.details.get(PROMPT_IDS_AT):
                prompt = self.prompt_ids(spec, model, str(caps.details[PROMPT_IDS_AT]))
            elif spec.chat:  # no ids for it anywhere: the same plain text for every config
                prompt = plain_chat_text(spec)
            return HttpRequest(
                GENERATE_PATH, generate_body(spec, prompt, margins=self.margins_allowed())
            )
        body = openai_body(spec, model, margins=self.margins_allowed(), engine=self.name)
        if caps is None or caps.acceptance == "requests":
            body["return_spec_tokens_details"] = True
        if spec.chat:
            # Chat refuses return_token_ids when streaming; ids come in sglext instead.
            body["return_output_ids_in_sglext"] = True
        else:
            body["return_token_ids"] = True
        return HttpRequest(api_path(spec), body)

    def prompt_ids(self, spec: RequestSpec, model: str | None, base_url: str) -> list[int]:
        """The prompt's ids from the first server asked (`_prompt_ids`), by the negotiated
        source; EngineError when the source that answered in negotiation no longer does."""
        key = json.dumps([self.runtime.model, spec.prompt, spec.messages, spec.chat], default=list)
        source = str(self.capabilities.details.get("prompt")) if self.capabilities else ""

        def ask() -> list[int]:
            with httpx.Client(timeout=30.0) as client:
                ids = prompt_ids(client, base_url, spec, model, source)
            if ids is None:
                raise EngineError(f"{base_url}: {source} gave none for {spec.prompt_id}")
            return ids

        return self._prompt_ids.get(key, ask)

    def reader(self, spec: RequestSpec) -> ChunkReader:
        return SGLangReader(spec.chat)

    def acceptance_counters(self, client: httpx.Client, base_url: str) -> dict[str, float] | None:
        if self.capabilities is not None and self.capabilities.acceptance != "metrics":
            return None
        try:
            resp = client.get(base_url + "/metrics", timeout=10.0)
        except httpx.HTTPError:
            return None
        return read_metrics(resp.text) if resp.status_code == 200 else None

    def requirements(self) -> HostRequirements:
        # A GPU unless the spec serves on the CPU (`runtime.device: cpu`, or --device in its args).
        args = self.runtime.extra_args
        on_cpu = (
            self.runtime.device == "cpu"
            or "--device=cpu" in args
            or ("--device", "cpu") in pairwise(args)
        )
        return HostRequirements(("torch", "transformers", "sglang"), gpu=not on_cpu)

    def startup_phases(self, log: str, info: Mapping[str, Any], started: float) -> list[StartPhase]:
        """From the log alone (`LOG_MARKS`); its ready is the health poll's (SGLang answers
        /health 503 until its own warm-up request is done)."""
        return log_phases(log, started, LOG_CLOCK, LOG_MARKS)
