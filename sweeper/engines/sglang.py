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
it. Sampled outputs are scored by an AR server's input-token logprobs (`sglang_score`). Facts
and file:line references into SGLang 0.5.23: tests/engines_oracles and the oracle tests that
check them.
"""

from __future__ import annotations

import hashlib
import json
import threading
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
    api_path,
    mismatches,
    openai_body,
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
from sweeper.engines.stream import ChunkReader

#: SGLang's /metrics counters (`--enable-metrics`): tau = generation tokens / verify calls, as
#: SGLang's own per-request `spec_accept_length` counts it.
GENERATION_TOKENS = "sglang:generation_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"

__all__ = ["SGLang", "SGLangReader", "read_metrics"]


def read_metrics(text: str) -> dict[str, float] | None:
    """`drafts` (verify calls) and `accepted_tokens` (generated tokens beyond one per verify)
    from a Prometheus page, summed over label sets; None without speculative counters."""
    sums = {GENERATION_TOKENS: 0.0, VERIFY_CALLS: 0.0}
    seen = False
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in sums:
            sums[name] += float(line.rsplit(" ", 1)[1])
            seen = seen or name == VERIFY_CALLS
    if not seen:
        return None
    verify = sums[VERIFY_CALLS]
    return {"drafts": verify, "accepted_tokens": sums[GENERATION_TOKENS] - verify}


@register("sglang")
class SGLang(ModuleServer):
    """See the module docstring (its command line: the catalog's record)."""

    health_path = "/health"
    #: Output-length fields it takes (SGLang's OpenAI server takes both as extra sampling fields).
    length_control: tuple[str, ...] = ("ignore_eos", "min_tokens")

    #: Prompt text (or messages) -> token ids from /tokenize or the chat route, shared by every
    #: server config and host of the run (the AR baseline, which starts first, asks), so all
    #: get the same.
    _prompt_ids: dict[str, list[int]] = {}
    _prompt_lock = threading.Lock()

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
        info = self._server_info(client, base_url)
        want = launch.expected
        wrong = mismatches(want, info)
        if wrong:
            raise EngineError(
                "SGLang resolved other values than requested (its rules override some flags "
                "with only a warning): " + "; ".join(wrong)
            )
        reported = {key: info.get(key) for key in sorted(want)}
        # Environment SGLang reads at start (PR #29907's topk cap) is not in /server_info: its
        # values, proven from /proc, enter the fingerprint so two caps are two servers.
        env = {k: v for k, v in sorted(launch.env.items()) if k.startswith("SGLANG_")}
        digest = json.dumps(
            {"version": info.get("version"), "server_args": reported, "env": env},
            sort_keys=True,
        )
        return EngineProof(
            fingerprint=hashlib.sha256(digest.encode()).hexdigest(),
            version=str(info.get("version")) if info.get("version") else None,
            info={"engine": "sglang", "server_args": reported, "env": env},
            proven=(f"/server_info reports every requested flag ({len(want)})",),
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
        return negotiate_sglang(self, client, base_url, speculative, probe, model)

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
        with self._prompt_lock:
            if key not in self._prompt_ids:
                with httpx.Client(timeout=30.0) as client:
                    ids = prompt_ids(client, base_url, spec, model, source)
                if ids is None:
                    raise EngineError(f"{base_url}: {source} gave none for {spec.prompt_id}")
                self._prompt_ids[key] = ids
            return list(self._prompt_ids[key])

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
