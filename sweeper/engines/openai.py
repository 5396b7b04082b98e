"""An OpenAI-compatible endpoint that is already running (`engine: openai`): measured and judged,
never launched.

The sweeper starts and stops nothing, so the process, its flags and restarts cannot be proven;
the identity says so. What can be proven is what the server itself answers: the served models
(`/v1/models`), and, where the server is one whose reports are known, its version and config
(vLLM's `/version`, SGLang's `/server_info`, the bundled runtime's fingerprinted `/server_info`).
That also decides how token ids are asked for: servers known to return them get the request
field that does (vLLM and the runtime: `return_token_ids`; SGLang: its `sglext` ids); an unknown
server gets a plain OpenAI body. Without ids in the stream, ids are recovered from logprob
tokens spelled `token_id:N` (vLLM's `return_tokens_as_token_ids`), else by re-tokenizing the text
with the server's `/tokenize`, else as the text's UTF-8 bytes; the last two are marked
`approximate`, and the determinism verdicts say so. The AR baseline is a second endpoint
(`runtime.baseline_url`) or the AR points of an earlier run (`runtime.baseline_run`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from secrets import token_hex
from typing import Any

import httpx

from sweeper.config import ServerConfig
from sweeper.engines.base import (
    EngineError,
    EngineProof,
    HostRequirements,
    HttpRequest,
    Registered,
    RequestSpec,
    register,
)
from sweeper.engines.capabilities import Negotiated
from sweeper.engines.common import api_path, openai_body
from sweeper.engines.launch import Launch
from sweeper.engines.sglang import SGLangReader
from sweeper.engines.stream import ChunkReader
from sweeper.results.loads import StartPhase
from sweeper.spec import RuntimeSpec

#: What an endpoint the sweeper did not start can never prove.
UNPROVEN = (
    "the process, its command line and environment: the sweeper did not start it",
    "restarts: every point measures the one running server, nothing is restarted",
    "speculative settings: an OpenAI endpoint does not report them",
)


class EndpointReader(SGLangReader):
    """Ids from `token_ids` or SGLang's sglext when the server sends them, else recovered;
    acceptance from whichever extension a known server adds."""

    def __init__(self, chat: bool, model: str | None) -> None:
        super().__init__(chat)
        self.model = model
        self.logprob_ids: list[int] = []

    def read_extension(self, chunk: Mapping[str, Any]) -> None:
        super().read_extension(chunk)  # SGLang's sglext
        if chunk.get("usage") and chunk.get("ddtree"):  # the bundled runtime's
            self.acceptance = dict(chunk["ddtree"])

    def feed(self, chunk: Mapping[str, Any]) -> bool:
        for choice in chunk.get("choices") or []:
            self.logprob_ids += _logprob_ids(choice.get("logprobs") or {}, self.chat)
        return super().feed(chunk)

    async def finish(self, client: httpx.AsyncClient, base_url: str, model: str | None) -> None:
        if self.saw_ids:
            return
        if self.logprob_ids:
            self.token_ids, self.ids_source = list(self.logprob_ids), "logprobs"
            return
        self.ids_source = "approximate"
        try:
            resp = await client.post(
                f"{base_url}/tokenize",
                json={"model": model, "prompt": self.text, "add_special_tokens": False},
            )
            tokens = resp.json().get("tokens") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            tokens = None
        if isinstance(tokens, list) and all(isinstance(t, int) for t in tokens):
            self.token_ids = list(tokens)
        else:
            self.token_ids = list(self.text.encode("utf-8"))


def _logprob_ids(logprobs: Mapping[str, Any], chat: bool) -> list[int]:
    """Ids from logprob tokens spelled `token_id:N` (vLLM's return_tokens_as_token_ids)."""
    tokens = (
        [e.get("token") for e in logprobs.get("content") or []]
        if chat
        else logprobs.get("tokens") or []
    )
    ids = []
    for token in tokens:
        if not (isinstance(token, str) and token.startswith("token_id:")):
            return []
        ids.append(int(token.removeprefix("token_id:")))
    return ids


@register("openai")
class OpenAIEndpoint(Registered, Negotiated):
    """See the module docstring."""

    recovers_ids = True
    health_path = "/v1/models"
    #: Output-length fields it takes: none assumed of an endpoint nobody here wrote (what it
    #: returns is checked against the asked length instead).
    length_control: tuple[str, ...] = ()

    def __init__(self, runtime: RuntimeSpec, source_hash: str | None = None) -> None:
        self.runtime = runtime
        #: What the endpoint measured now turned out to be ("vllm", "sglang", ...), per URL.
        self.kind: dict[str, str] = {}
        self._current = "unknown"

    def launch(
        self,
        server_config: ServerConfig,
        *,
        python: str,
        listen_host: str,
        workdir: str | None,
        secrets: Mapping[str, str],
    ) -> Launch:
        url = self.runtime.base_url if server_config.mode == "speculative" else None
        url = url or self.runtime.baseline_url
        if url is None:
            raise EngineError("engine openai has no endpoint for this server config")
        return Launch(argv=(), port=0, launch_id=token_hex(8), url=url.rstrip("/"))

    def prove(
        self, client: httpx.Client, base_url: str, launch: Launch, server_config: ServerConfig
    ) -> EngineProof:
        try:
            models = client.get(f"{base_url}/v1/models", timeout=10.0).json()
            names = [str(m["id"]) for m in models["data"]]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise EngineError(f"{base_url}/v1/models unreadable: {exc}") from exc
        kind, version, info = _identify(client, base_url)
        self.kind[base_url] = self._current = kind
        proven = [f"/v1/models serves {', '.join(names)}"]
        if version:
            proven.append(f"the server reports itself as {kind} {version}")
        reported = {"models": names, "kind": kind, "version": version, "info": info}
        digest = json.dumps(reported, sort_keys=True, default=str)
        return EngineProof(
            fingerprint=hashlib.sha256(digest.encode()).hexdigest(),
            version=version,
            info={"engine": "openai", **reported},
            proven=tuple(proven),
            unproven=UNPROVEN + (() if version else ("what software the server is",)),
        )

    def request(self, spec: RequestSpec, model: str | None) -> HttpRequest:
        body = openai_body(spec, model, margins=self.margins_allowed(), engine=self.name)
        if self._current in ("vllm", "ddtree_runtime"):
            body["return_token_ids"] = True
        elif self._current == "sglang":
            body["return_output_ids_in_sglext" if spec.chat else "return_token_ids"] = True
        return HttpRequest(api_path(spec), body)

    def reader(self, spec: RequestSpec) -> ChunkReader:
        return EndpointReader(spec.chat, None)

    def acceptance_counters(self, client: httpx.Client, base_url: str) -> dict[str, float] | None:
        return None

    def requirements(self) -> HostRequirements:
        return HostRequirements((), gpu=False)

    def startup_phases(self, log: str, info: Mapping[str, Any], started: float) -> list[StartPhase]:
        """None: the sweeper did not start this server and sees no start of it."""
        return []


def _identify(client: httpx.Client, base_url: str) -> tuple[str, str | None, dict[str, Any]]:
    """What the server is, from reports known servers give: (kind, version, facts)."""
    info = _json(client, f"{base_url}/server_info")
    if isinstance(info, dict) and "fingerprint" in info:
        return "ddtree_runtime", info.get("runtime_version"), {"fingerprint": info["fingerprint"]}
    if isinstance(info, dict) and "launch_command" in info:
        return (
            "sglang",
            info.get("version"),
            {"speculative_algorithm": info.get("speculative_algorithm")},
        )
    version = _json(client, f"{base_url}/version")
    if isinstance(version, dict) and version.get("version"):
        return "vllm", str(version["version"]), {}
    return "unknown", None, {}


def _json(client: httpx.Client, url: str) -> Any:
    try:
        resp = client.get(url, timeout=5.0)
        return resp.json() if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
