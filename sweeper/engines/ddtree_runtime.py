"""The bundled DDTree runtime (`python -m ddtree_runtime serve`) as an engine.

Ready: `/health` answers 200 only after the model loaded and a warm-up generation ran. Identity:
`/server_info` must echo this start's `--launch-id`, report a fingerprint that is the sha256 of
its own inputs, the requested fingerprinted config, and the source hash the manifest names (the
code that runs is the code the run says ran). Token ids ride on every chunk (`return_token_ids`);
per-request acceptance on the `ddtree` extension of the final usage chunk. Sampled outputs are
scored exactly by its `POST /score` (the prompt sent as the request sent it, so the server makes
the same ids), on any server, speculative or not: it is a plain prefill.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import httpx

from sweeper.config import ServerConfig
from sweeper.engines.base import (
    EngineError,
    EngineProof,
    HostRequirements,
    HttpRequest,
    RequestSpec,
    Scored,
    ScoringError,
    ScoringPath,
    register,
)
from sweeper.engines.common import LaunchedServer, api_path, get_json, mismatches, openai_body
from sweeper.engines.launch import Launch
from sweeper.engines.render import Rendered, extra_args_of, split_config
from sweeper.engines.scoring import exact_positions, not_asked, post_json, score_fields
from sweeper.engines.stream import ChunkReader
from sweeper.proof.scored.catalog import SCORING
from sweeper.spec import RuntimeSpec


def fingerprint_of(inputs: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of `fingerprint_inputs` (docs/runtime-api.md's contract)."""
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class DDTreeReader(ChunkReader):
    """Reads the runtime's `ddtree` extension (tau, verify rounds) from the usage chunk."""

    def read_extension(self, chunk: Mapping[str, Any]) -> None:
        if chunk.get("usage") and chunk.get("ddtree"):
            self.acceptance = dict(chunk["ddtree"])


@register("ddtree_runtime")
class DDTreeRuntime(LaunchedServer):
    """See the module docstring."""

    health_path = "/health"
    #: Output-length fields it takes (the bundled runtime takes both, under vLLM's names).
    length_control: tuple[str, ...] = ("ignore_eos", "min_tokens")

    def __init__(self, runtime: RuntimeSpec, source_hash: str | None) -> None:
        super().__init__(runtime)
        #: The manifest's runtime source hash; the server must report the same.
        self.source_hash = source_hash

    def render(self, server_config: ServerConfig) -> Rendered:
        """`python -m ddtree_runtime serve` flags (without --host/--port/--launch-id), and
        what /server_info must report for them: its fingerprinted config, else its full config
        (docs/runtime-api.md), where every flag is the field of its own name. The
        mapping's environment is not passed: the runtime reads none."""
        parts = split_config(server_config, self.runtime)
        server, out = self.server, Rendered()
        out.flag(server.model_flag, self.runtime.model)
        out.flag("--draft", self.runtime.draft)
        if server_config.mode == "ar":
            out.flag("--speculative", "none")
        else:
            out.speculative(self.mapping, parts.speculative, None)
            out.env.clear()
        if parts.cuda_graph is not None:
            out.snippet(
                server.cuda_graph_on if parts.cuda_graph else server.cuda_graph_off, reported=False
            )
            out.expect("cuda_graph", parts.cuda_graph)
        out.settings(parts, server.setting_flags)
        # Extra arguments are passed, not checked: /server_info's config has no log level.
        out.snippet(extra_args_of(server_config, self.runtime), reported=False)
        return out

    def flags(self, server_config: ServerConfig) -> list[str]:
        """The server's flags, without --host/--port/--launch-id."""
        return self.render(server_config).argv

    def expected(self, server_config: ServerConfig) -> dict[str, Any]:
        """What /server_info must report for this server config (`render`)."""
        return self.render(server_config).expected

    def prove(
        self, client: httpx.Client, base_url: str, launch: Launch, server_config: ServerConfig
    ) -> EngineProof:
        info = get_json(client, f"{base_url}/server_info")
        if not isinstance(info, dict):
            raise EngineError("/server_info is not a JSON object")
        if info.get("launch_id") != launch.launch_id:
            raise EngineError(
                f"launch id mismatch: server reports {info.get('launch_id')!r}, expected "
                f"{launch.launch_id!r} (another instance is answering on this port)"
            )
        inputs = info.get("fingerprint_inputs")
        if not isinstance(inputs, Mapping):
            raise EngineError("/server_info has no fingerprint_inputs")
        reported = info.get("fingerprint")
        if reported != fingerprint_of(inputs):
            raise EngineError(
                f"fingerprint mismatch: server reports {reported!r} but its inputs hash to "
                f"{fingerprint_of(inputs)!r}"
            )
        config = {**(info.get("config") or {}), **(inputs.get("config") or {})}
        wrong = mismatches(launch.expected, config)
        if wrong:
            raise EngineError("config mismatch: " + "; ".join(wrong))
        source = info.get("source_hash")
        if self.source_hash and source != self.source_hash:
            raise EngineError(
                f"source hash mismatch: the server runs runtime code {source!r}, the manifest "
                f"names {self.source_hash!r} (another ddtree_runtime was imported)"
            )
        return EngineProof(
            fingerprint=str(reported),
            version=info.get("runtime_version"),
            source_hash=source,
            info=info,
            proven=(
                "launch id echoed by /server_info",
                "fingerprint is the sha256 of its reported inputs",
                "fingerprinted config equals the request",
                "source hash equals the manifest's" if self.source_hash else "source hash recorded",
            ),
        )

    def request(self, spec: RequestSpec, model: str | None) -> HttpRequest:
        body = openai_body(spec, model, margins=self.margins_allowed(), engine=self.name)
        return HttpRequest(api_path(spec), {**body, "return_token_ids": True})

    def reader(self, spec: RequestSpec) -> ChunkReader:
        return DDTreeReader(spec.chat)

    def negotiate_scoring(
        self, client: httpx.Client, base_url: str, server_config: ServerConfig,
        probe: RequestSpec, model: str | None, version: str | None,
    ) -> ScoringPath:  # fmt: skip
        skipped = not_asked(self.name, server_config)
        if skipped is not None:
            return skipped
        try:
            # The probe is greedy; the route scores sampled outputs: ask at temperature 1.
            scored = self.score(client, base_url, replace(probe, temperature=1.0), [0], model)
        except ScoringError as exc:
            return "none", None, (), f"scoring: none (POST /score: {exc})"
        # A runtime older than `top_logprobs` ignores it: its tokens are scored exactly, but
        # without a position's best tokens the test's power cannot be stated.
        if scored.k is None:
            return "exact", None, scored.order, "scoring: exact (POST /score, no top logprobs)"
        return "exact", scored.k, scored.order, f"scoring: exact (POST /score), top {scored.k}"

    def score(
        self,
        client: httpx.Client,
        base_url: str,
        spec: RequestSpec,
        continuation: list[int],
        model: str | None,
    ) -> Scored:
        body: dict[str, Any] = {"model": model, "continuation": list(continuation)}
        body.update(score_fields(spec), top_logprobs=SCORING[self.name].top_k)
        prompt: list[int] | None = None
        if spec.prompt_token_ids is not None:
            prompt = list(spec.prompt_token_ids)
        elif not spec.chat:  # as the completion route encodes it, so the ids scored are known
            said = post_json(
                client, base_url + "/tokenize", {"model": model, "prompt": spec.prompt}
            )
            prompt = [int(t) for t in said.get("tokens") or []] or None
        if prompt is not None:
            body["prompt"] = prompt
        elif spec.chat:
            body["messages"] = list(spec.messages or [{"role": "user", "content": spec.prompt}])
        else:
            body["prompt"] = spec.prompt
        answer = post_json(client, base_url + "/score", body)
        return exact_positions(answer, continuation, prompt)

    def acceptance_counters(self, client: httpx.Client, base_url: str) -> dict[str, float] | None:
        return None

    def requirements(self) -> HostRequirements:
        gpu = (self.runtime.device or "").startswith("cuda")
        return HostRequirements(("torch", "transformers"), gpu)
