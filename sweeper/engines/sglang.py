"""SGLang (`python -m sglang.launch_server`) as an engine: stock DFLASH, or DDTREE builds.

Ready: `/health` answers 503 until SGLang's warm-up request succeeded (its port opens only after
the weights loaded; `/v1/models` answers earlier, so it is no readiness signal). Identity:
`/server_info` (`/get_server_info` on older builds) reports SGLang's RESOLVED server args, typed;
every flag this engine passed must come back with its value, so a value SGLang's resolution
rules override (DFLASH forces topk and steps to 1 with only a warning) fails the point instead of
being measured under the wrong label. Environment variables (PR #29907's `SGLANG_DDTREE_MAX_TOPK`)
are not in /server_info: the /proc proof covers them. Streams: completions chunks carry
`token_ids`; a chat stream carries its output ids once, in a final `sglext.output_ids` chunk
(`return_output_ids_in_sglext`); both carry acceptance in `sglext.spec_tokens_details`
(`spec_accept_length` = tokens per verify step, bonus included: tau). Facts and file:line
references into SGLang 0.5.23: tests/engines_oracles and the oracle tests that check them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import httpx

from sweeper.engines.base import (
    EngineError,
    EngineProof,
    HostRequirements,
    HttpRequest,
    RequestSpec,
)
from sweeper.engines.common import (
    ModuleServer,
    api_path,
    mismatches,
    openai_body,
)
from sweeper.engines.stream import ChunkReader
from sweeper.plan import ServerConfig
from sweeper.services import Launch

#: SGLang's flags for the runtime settings (None: SGLang has no such setting).
SETTING_FLAGS: dict[str, str | None] = {
    "device": "--device",
    "dtype": "--dtype",
    "max_batch": "--max-running-requests",
    "max_model_len": "--context-length",
}
#: Grid flags named as the bundled runtime names them, in SGLang's words.
RENAMES = {"max_batch": "max_running_requests", "max_model_len": "context_length"}
#: CUDA graphs off, per phase: these spellings parse in 0.5.23 and in PR #29907's build (the
#: single --disable-cuda-graph is deprecated in the one and absent from the other's CLI).
CUDA_GRAPH_OFF = ["--disable-decode-cuda-graph", "--disable-prefill-cuda-graph"]


def server_args_of(argv: list[str]) -> dict[str, Any]:
    """What /server_info must report for these flags: `--x-y 8` -> {"x_y": 8}, `--flag` ->
    {"flag": True}. Numbers are compared by value, so text from argv is turned into them."""
    args: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        name = argv[i].removeprefix("--").replace("-", "_")
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            args[name] = _typed(argv[i + 1])
            i += 2
        else:
            args[name] = True
            i += 1
    return args


def _typed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


class SGLangReader(ChunkReader):
    """Reads ids from completions chunks, or from a chat stream's final `sglext` chunk, and the
    acceptance figures SGLang puts beside them."""

    def read_extension(self, chunk: Mapping[str, Any]) -> None:
        sglext = chunk.get("sglext") or {}
        ids = sglext.get("output_ids")
        if ids and not self.saw_ids:
            # Arrives once, after the finish chunk: the whole output of choice 0.
            self.token_ids = [int(t) for t in ids[0]]
            self.saw_ids = True
        details = sglext.get("spec_tokens_details")
        if isinstance(details, list):
            details = details[0] if details else None
        if details and details.get("spec_verify_ct"):
            # Of the exposure columns SGLang reports only the accepted-length histogram
            # (drafts accepted per verify step, bonus excluded: our accepted_hist); padding,
            # graph replay, batching and tree shapes stay unknown.
            histogram = details.get("spec_correct_drafts_histogram")
            self.acceptance = {
                "tau": details.get("spec_accept_length"),
                "verify_rounds": details.get("spec_verify_ct"),
                "accepted_hist": [int(n) for n in histogram] if histogram else None,
            }


class SGLang(ModuleServer):
    """See the module docstring."""

    name = "sglang"
    health_path = "/health"
    #: Output-length fields it takes (SGLang's OpenAI server takes both as extra sampling fields).
    length_control: tuple[str, ...] = ("ignore_eos", "min_tokens")
    module = "sglang.launch_server"
    model_flag = "--model-path"
    cuda_graph_off = tuple(CUDA_GRAPH_OFF)
    setting_flags = SETTING_FLAGS
    renames = RENAMES

    def expected(self, server_config: ServerConfig) -> dict[str, Any]:
        """What SGLang's resolved server args must say for this server config."""
        flags, _env = self.command(server_config)
        want = server_args_of(flags)
        if server_config.mode == "ar":
            want["speculative_algorithm"] = None  # a baseline must not be speculating
        return want

    def prove(
        self, client: httpx.Client, base_url: str, launch: Launch, server_config: ServerConfig
    ) -> EngineProof:
        info = self._server_info(client, base_url)
        want = self.expected(server_config)
        wrong = mismatches(want, info)
        if wrong:
            raise EngineError(
                "SGLang resolved other values than requested (its rules override some flags "
                "with only a warning): " + "; ".join(wrong)
            )
        reported = {key: info.get(key) for key in sorted(want)}
        digest = json.dumps(
            {"version": info.get("version"), "server_args": reported}, sort_keys=True
        )
        return EngineProof(
            fingerprint=hashlib.sha256(digest.encode()).hexdigest(),
            version=str(info.get("version")) if info.get("version") else None,
            info={"engine": "sglang", "server_args": reported},
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

    def request(self, spec: RequestSpec, model: str | None) -> HttpRequest:
        body = openai_body(spec, model)
        body["return_spec_tokens_details"] = True
        if spec.chat:
            # Chat refuses return_token_ids when streaming; ids come in sglext instead.
            body["return_output_ids_in_sglext"] = True
        else:
            body["return_token_ids"] = True
        return HttpRequest(api_path(spec), body)

    def reader(self, spec: RequestSpec) -> ChunkReader:
        return SGLangReader(spec.chat)

    def acceptance_counters(self, client: httpx.Client, base_url: str) -> dict[str, float] | None:
        return None

    def requirements(self) -> HostRequirements:
        return HostRequirements(("torch", "transformers", "sglang"), gpu=True)
