"""The bundled DDTree runtime (`python -m ddtree_runtime serve`) as an engine.

Ready: `/health` answers 200 only after the model loaded and a warm-up generation ran. Identity:
`/server_info` must echo this start's `--launch-id`, report a fingerprint that is the sha256 of
its own inputs, the requested fingerprinted config, and the source hash the manifest names (the
code that runs is the code the run says ran). Token ids ride on every chunk (`return_token_ids`);
per-request acceptance on the `ddtree` extension of the final usage chunk.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from sweeper.catalog.mapping import render
from sweeper.engines.base import (
    EngineError,
    EngineProof,
    HostRequirements,
    HttpRequest,
    RequestSpec,
    register,
)
from sweeper.engines.common import (
    LaunchedServer,
    api_path,
    extra_args_of,
    get_json,
    mismatches,
    openai_body,
    settings_argv,
    split_config,
)
from sweeper.engines.launch import Launch
from sweeper.engines.stream import ChunkReader
from sweeper.plan import ServerConfig
from sweeper.spec import RuntimeSpec


def fingerprint_of(inputs: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of `fingerprint_inputs` (README's contract)."""
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def runtime_package_dir(package: str | Path | None = None) -> Path:
    """The `ddtree_runtime` package directory: the one inside `package` (a spec's
    `runtime.package`, a patched copy), else the installed one, located without importing it
    (the controller never imports `ddtree_runtime`). The one place either is looked up: the
    manifest's source hash, the bundle deployed to hosts and the run command all ask here."""
    if package is not None:
        return Path(package) / "ddtree_runtime"
    found = importlib.util.find_spec("ddtree_runtime")
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError("the ddtree_runtime package is not installed next to sweeper")
    return Path(next(iter(found.submodule_search_locations)))


def runtime_source_hash(package_dir: Path | None = None) -> str:
    """sha256 over the runtime package's .py files (sorted relative path + NUL + bytes + NUL)
    of `package_dir`, else of the installed package; "" when none is installed."""
    if package_dir is None:
        try:
            package_dir = runtime_package_dir()
        except FileNotFoundError:
            return ""
    digest = hashlib.sha256()
    files = sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)
    for path in files:
        digest.update(path.relative_to(package_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


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

    def flags(self, server_config: ServerConfig) -> list[str]:
        """`python -m ddtree_runtime serve` flags, without --host/--port/--launch-id."""
        parts = split_config(server_config, self.runtime)
        server = self.server
        argv = [server.model_flag, self.runtime.model, "--draft", self.runtime.draft]
        if server_config.mode == "ar":
            argv += ["--speculative", "none"]
        else:
            speculative, _env = render(self.mapping, parts.speculative, None)
            argv += speculative
        if parts.cuda_graph is not None:
            argv += server.cuda_graph_on if parts.cuda_graph else server.cuda_graph_off
        argv += settings_argv(parts, server.setting_flags)
        return argv + extra_args_of(server_config, self.runtime)

    def command(self, server_config: ServerConfig) -> tuple[list[str], dict[str, str]]:
        # The mapping's environment is not passed: the runtime reads none.
        return self.flags(server_config), {}

    def expected(self, server_config: ServerConfig) -> dict[str, Any]:
        """What /server_info must report for this server config (its fingerprinted config, else
        its full config: README, "Runtime HTTP API")."""
        parts = split_config(server_config, self.runtime)
        want: dict[str, Any] = {"model": self.runtime.model, "draft": self.runtime.draft}
        want.update({k: v for k, v in parts.settings.items() if v is not None})
        if server_config.mode == "ar":
            want["speculative"] = "none"
        else:
            args = self.mapping.speculative_args
            if "--speculative" in args[:-1]:
                want["speculative"] = args[args.index("--speculative") + 1]
            want.update(parts.speculative)
        if parts.cuda_graph is not None:
            want["cuda_graph"] = parts.cuda_graph
        # /server_info's config holds every effective flag: an extra grid flag is checked too.
        want.update(parts.extras)
        return want

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
        wrong = mismatches(self.expected(server_config), config)
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
        body = openai_body(spec, model, margins=self.margins_allowed())
        return HttpRequest(api_path(spec), {**body, "return_token_ids": True})

    def reader(self, spec: RequestSpec) -> ChunkReader:
        return DDTreeReader(spec.chat)

    def acceptance_counters(self, client: httpx.Client, base_url: str) -> dict[str, float] | None:
        return None

    def requirements(self) -> HostRequirements:
        gpu = (self.runtime.device or "").startswith("cuda")
        return HostRequirements(("torch", "transformers"), gpu)
