"""The bundled DDTree runtime (`python -m ddtree_runtime serve`) as an engine.

Ready: `/health` answers 200 only after the model loaded and a warm-up generation ran. Identity:
`/server_info` must echo this start's `--launch-id`, report a fingerprint that is the sha256 of
its own inputs, the requested fingerprinted config, and the source hash the manifest names (the
code that runs is the code the run says ran). Token ids ride on every chunk (`return_token_ids`);
per-request acceptance on the `ddtree` extension of the final usage chunk. Sampled outputs are
scored exactly by its `POST /score` (the prompt sent as the request sent it, so the server makes
the same ids), on any server, speculative or not: it is a plain prefill. It switches its
speculative config in place (`POST /admin/switch`, docs/runtime-api.md): the fields its record
declares (`ServerCommand.switchable`), AR (speculative none) included.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import httpx

from sweeper.config import ServerConfig
from sweeper.engines.base import (
    EngineError,
    EngineProof,
    HostRequirements,
    RequestSpec,
    Scored,
    ScoringError,
    ScoringPath,
    register,
)
from sweeper.engines.capabilities import error_message
from sweeper.engines.common import LaunchedServer, get_json, mismatches
from sweeper.engines.launch import Launch
from sweeper.engines.render import Rendered, extra_args_of, split_config
from sweeper.engines.scoring import exact_positions, post_json, score_fields
from sweeper.engines.stream import ChunkReader
from sweeper.proof.scored.catalog import SCORING
from sweeper.results.loads import PHASES, PhaseName, StartPhase
from sweeper.spec import RuntimeSpec

#: The runtime's names of its start's phases (`/server_info` `startup` keys and its log lines)
#: -> the sweeper's (`sweeper.results.loads`).
STARTUP_PHASES: dict[str, PhaseName] = {
    "process_start": "process_up",
    "weights_loaded": "weights_loaded",
    "graphs_captured": "graphs_captured",
    "ready": "ready",
}
#: `ddtree_runtime phase weights_loaded at +3.21s`: seconds since its own process start.
PHASE_LINE = re.compile(r"ddtree_runtime phase (?P<name>\w+) at \+(?P<at>\d+(?:\.\d+)?)s")


def startup_phases(log: str, info: Mapping[str, Any]) -> list[StartPhase]:
    """The runtime's own account of its start, in seconds since its own process start:
    `/server_info`'s `startup` (unix seconds, counted from its `process_start`; a null
    `graphs_captured`: none captured), else its `ddtree_runtime phase NAME at +S.SSs` lines."""
    block = info.get("startup")
    if isinstance(block, Mapping) and _seconds(block.get("process_start")) is not None:
        zero = float(block["process_start"])
        return [
            StartPhase(name=name, at_s=at - zero, source="api", evidence=f"startup.{key}")
            for key, name in STARTUP_PHASES.items()
            if (at := _seconds(block.get(key))) is not None
        ]
    found = {
        STARTUP_PHASES[m["name"]]: StartPhase(
            name=STARTUP_PHASES[m["name"]], at_s=float(m["at"]), source="log", evidence=m[0]
        )
        for m in PHASE_LINE.finditer(log)
        if m["name"] in STARTUP_PHASES
    }
    return [found[name] for name in PHASES if name in found]


def _seconds(value: Any) -> float | None:
    """A JSON number as float (never a bool), else None."""
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if is_number else None


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

    def reader(self, spec: RequestSpec) -> ChunkReader:
        return DDTreeReader(spec.chat)

    def scoring_path(
        self, client: httpx.Client, base_url: str, probe: RequestSpec, model: str | None,
        version: str | None,
    ) -> ScoringPath:  # fmt: skip
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

    def switch_body(self, server_config: ServerConfig) -> dict[str, Any]:
        """The `/admin/switch` body: every switchable field, the config's rendered value where
        it has one, else the value a start without that flag runs with, so a switch leaves
        nothing of the previous config (an AR switch resets the tree knobs as a fresh AR
        start has them)."""
        expected = self.render(server_config).expected
        return {key: expected.get(key, start) for key, start in self.server.switchable.items()}

    def switch(self, client: httpx.Client, base_url: str, sc: ServerConfig) -> None:
        """POST the switch and wait for it (it drains in-flight requests and captures what the
        new config needs: as long as a start may take); EngineError naming the runtime's
        build and the field it refused."""
        build = f"ddtree_runtime (source {self.source_hash or 'not named'})"
        try:
            resp = client.post(
                f"{base_url}/admin/switch",
                json=self.switch_body(sc),
                timeout=self.runtime.ready_timeout_s,
            )
        except httpx.HTTPError as exc:
            raise EngineError(f"{build}: switch to {sc.label} failed: {exc}") from None
        if resp.status_code != 200:
            said = error_message(resp.text) or f"HTTP {resp.status_code}"
            raise EngineError(f"{build} refuses to switch to {sc.label}: {said}")

    def requirements(self) -> HostRequirements:
        gpu = (self.runtime.device or "").startswith("cuda")
        return HostRequirements(("torch", "transformers"), gpu)

    def startup_phases(self, log: str, info: Mapping[str, Any], started: float) -> list[StartPhase]:
        """`startup_phases` above: the runtime counts from its own process start."""
        return startup_phases(log, info)
