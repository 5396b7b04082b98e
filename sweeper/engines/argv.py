"""The command line that starts one server config: a list of argv elements, never a shell string.

`serve_argv` gives the whole command for the spec's engine; `runtime_flags` the flags of the
bundled runtime (`python -m ddtree_runtime serve`). A host quotes every element when a shell is
involved (`shlex.join`), so a spec value reaches the runtime literally.

For `engine: sglang` the same server config maps onto SGLang's own speculative-decoding flags
(`--speculative-num-draft-tokens` for the budget, `--speculative-eagle-topk` for topk,
`--speculative-num-steps` for the block size, `--speculative-algorithm` from the runtime spec);
SGLang has no `--launch-id`, so that identity proof is the bundled runtime's alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sweeper.spec import RuntimeSpec

if TYPE_CHECKING:
    from sweeper.plan import ServerConfig

#: Runtime settings that a grid flag of the same name overrides, in the order they are rendered.
_SETTINGS = ("device", "dtype", "max_batch", "max_model_len")
#: SGLang's names for the bundled runtime's settings and speculative parameters.
_SGLANG_NAMES = {
    "max_batch": "max_running_requests",
    "max_model_len": "context_length",
    "budget": "speculative_num_draft_tokens",
    "topk": "speculative_eagle_topk",
    "block_size": "speculative_num_steps",
}


def runtime_flags(server_config: ServerConfig, runtime: RuntimeSpec) -> list[str]:
    """Flags for `python -m ddtree_runtime serve` (without --host/--port/--launch-id, which each
    launch adds). A grid flag that names a runtime setting (e.g. `dtype`) overrides the runtime's
    value; `extra_args` come last."""
    params, settings = _split(server_config, runtime)
    argv = ["--model", str(settings.pop("model")), "--draft", str(settings.pop("draft"))]
    if server_config.engine_mode == "ar":
        argv += ["--speculative", "none"]
    else:
        argv += ["--speculative", "ddtree"]
        argv += ["--budget", str(params.pop("budget")), "--topk", str(params.pop("topk"))]
        argv += ["--block-size", str(params.pop("block_size"))]
    argv.append("--cuda-graph" if params.pop("cuda_graph") else "--disable-cuda-graph")
    for key, value in [*settings.items(), *params.items()]:
        argv += _flag(key, value)
    return argv + list(runtime.extra_args)


def sglang_flags(server_config: ServerConfig, runtime: RuntimeSpec) -> list[str]:
    """Flags for `python -m sglang.launch_server` (without --host/--port)."""
    params, settings = _split(server_config, runtime)
    argv = ["--model-path", str(settings.pop("model"))]
    draft = str(settings.pop("draft"))
    if server_config.engine_mode == "ddtree":
        argv += ["--speculative-algorithm", str(runtime.speculative_algorithm)]
        if draft != "ngram":  # the n-gram drafter has no model
            argv += ["--speculative-draft-model-path", draft]
        for key in ("budget", "topk", "block_size"):
            argv += _flag(_SGLANG_NAMES[key], params.pop(key))
    else:
        for key in ("budget", "topk", "block_size"):
            params.pop(key, None)
    if not params.pop("cuda_graph"):
        argv.append("--disable-cuda-graph")
    for key, value in [*settings.items(), *params.items()]:
        argv += _flag(_SGLANG_NAMES.get(key, key), value)
    return argv + list(runtime.extra_args)


def sglang_server_args(server_config: ServerConfig, runtime: RuntimeSpec) -> dict[str, Any]:
    """What SGLang's /get_server_info must report for this config: its flags as server_args keys.

    `--speculative-num-steps 7` -> {"speculative_num_steps": "7"}, `--disable-cuda-graph` ->
    {"disable_cuda_graph": True}, `--no-x` -> {"x": False}; values stay strings (compared as text).
    """
    args: dict[str, Any] = {}
    flags = sglang_flags(server_config, runtime)
    i = 0
    while i < len(flags):
        name = flags[i].removeprefix("--").replace("-", "_")
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            args[name] = flags[i + 1]
            i += 2
        elif name.startswith("no_"):
            args[name.removeprefix("no_")] = False
            i += 1
        else:
            args[name] = True
            i += 1
    if server_config.engine_mode == "ar":
        args["speculative_algorithm"] = None  # a baseline must not be speculating
    return args


def serve_argv(
    server_config: ServerConfig,
    runtime: RuntimeSpec,
    *,
    python: str,
    host: str,
    port: int,
    launch_id: str,
) -> list[str]:
    """The whole command line that starts one server config with the spec's engine."""
    if runtime.engine == "sglang":
        flags = sglang_flags(server_config, runtime)
        return [python, "-m", "sglang.launch_server", *flags, "--host", host, "--port", str(port)]
    return [
        python,
        "-m",
        "ddtree_runtime",
        "serve",
        *runtime_flags(server_config, runtime),
        "--host",
        host,
        "--port",
        str(port),
        "--launch-id",
        launch_id,
    ]


def _split(
    server_config: ServerConfig, runtime: RuntimeSpec
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(grid params left to render, runtime settings with grid overrides applied)."""
    params = dict(server_config.params)
    settings: dict[str, Any] = {"model": runtime.model, "draft": runtime.draft}
    settings.update({key: getattr(runtime, key) for key in _SETTINGS})
    for key in list(settings):
        if key in params:
            settings[key] = params.pop(key)
    return params, settings


def _flag(key: str, value: Any) -> list[str]:
    """`max_batch=8` -> ['--max-batch', '8']; bools follow argparse's BooleanOptionalAction."""
    name = key.replace("_", "-")
    if value is None:
        return []
    if isinstance(value, bool):
        return [f"--{name}"] if value else [f"--no-{name}"]
    return [f"--{name}", str(value)]
