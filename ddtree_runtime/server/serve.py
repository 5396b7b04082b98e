"""`python -m ddtree_runtime serve`: flags -> model + engine -> warm-up -> uvicorn.

A bad flag, a missing model or a bad draft spec is one line on stderr and exit 2 at once (torch is
imported only after the flags parsed). /health turns 200 once a one-token generation succeeded.
Each start-up phase is logged as it is reached and kept for /server_info (`phases`).
SIGTERM: uvicorn stops accepting, gives in-flight requests a short grace period, then the engine
thread is stopped and the process exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
import threading
import time
from typing import Any, NoReturn

from pydantic import ValidationError

from ddtree_runtime.params import EngineConfig
from ddtree_runtime.server.config import ServeConfig, source_hash
from ddtree_runtime.server.phases import STARTUP, Phases, process_start_time

log = logging.getLogger("ddtree_runtime.serve")

EXIT_BAD_CONFIG = 2
# On SIGTERM, in-flight requests get this long to finish before they are aborted (their clients
# get a 503 error); uvicorn's own cancel is only the backstop. Both well under 10 s.
IN_FLIGHT_GRACE_S = 2.0
UVICORN_BACKSTOP_S = 6
WARMUP_TIMEOUT_S = 600.0


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line (no usage block), exit 2."""

    def error(self, message: str) -> NoReturn:
        fail(f"bad flag: {message} (see --help)")


def fail(message: str) -> NoReturn:
    one_line = " ".join(message.split("\n"))
    print(f"ddtree_runtime serve: error: {one_line}", file=sys.stderr, flush=True)
    sys.exit(EXIT_BAD_CONFIG)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="ddtree_runtime serve", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="smollm2-135m, tiny-random or a dir")
    p.add_argument("--served-model-name", default=None, help="default: the --model value")
    p.add_argument("--draft", default="ngram", help="ngram | dflash:PATH")
    p.add_argument("--speculative", choices=["ddtree", "none"], default="ddtree")
    p.add_argument("--budget", type=int, default=16, help="tree nodes per verify")
    p.add_argument("--topk", type=int, default=4, help="children per tree node")
    p.add_argument("--block-size", type=int, default=8, help="draft block size")
    graph = p.add_mutually_exclusive_group()
    graph.add_argument("--cuda-graph", dest="cuda_graph", action="store_true", default=False)
    graph.add_argument("--disable-cuda-graph", dest="cuda_graph", action="store_false")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default=None)
    p.add_argument("--device", default="auto", help="cpu | cuda | cuda:N | auto")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-batch", type=positive_int, default=8)
    p.add_argument("--max-model-len", type=positive_int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--accept-threshold",
        type=float,
        default=1.0,
        help="lossy below 1: at T > 0 accept a drafted token at least this probable",
    )
    p.add_argument("--launch-id", default="", help="echoed in /server_info, not fingerprinted")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def warm_up(state: Any, server: Any, outcome: dict[str, Any]) -> None:
    """The engine's warm-up (`switch.warm`) on the engine thread; /health turns 200 only if it
    succeeds. Marks the start-up's last phases."""
    from ddtree_runtime.server.switch import warm

    started = time.monotonic()
    engine = state.engine
    try:
        state.loop.call(lambda: warm(engine)).result(WARMUP_TIMEOUT_S)
    except Exception as error:  # noqa: BLE001 - reported, then the server exits non-zero
        log.error("warm-up failed, shutting down: %s", error)
        outcome["exit_code"] = 1
        server.should_exit = True
        return
    if engine.forward.graph_captured_at is not None:
        state.startup.mark("graphs_captured", engine.forward.graph_captured_at)
    state.startup.mark("ready")
    state.ready = True
    c = state.config
    line = (
        f"ddtree_runtime ready on http://{c.host}:{c.port} model={c.model} "
        f"served_as={c.served_model_name} speculative={c.speculative} device={c.device} "
        f"fingerprint={state.fingerprint} launch_id={c.launch_id or '-'} "
        f"warmup_s={time.monotonic() - started:.2f}"
    )
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    startup = Phases(STARTUP, process_start_time(), log_prefix="ddtree_runtime phase")
    args = build_parser().parse_args(argv)
    # The engine's one check of its settings (tree knobs: `ddtree_runtime.knobs`), before the
    # model loads: a bad flag costs a second, not a model load.
    try:
        EngineConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(EngineConfig)})
    except ValueError as error:
        fail(f"bad flag: {error}")
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    startup.mark("process_start", startup.origin)
    # Import torch-heavy modules only after the flags are known to be good.
    from ddtree_runtime.models import ModelNotFound, load_model
    from ddtree_runtime.server.switch import build_engine

    device = resolve_device(args.device)
    try:
        loaded = load_model(args.model, dtype=args.dtype, device=device)
    except (ModelNotFound, ValueError, OSError) as error:
        fail(f"cannot load model {args.model!r}: {error}")
    except Exception as error:  # noqa: BLE001 - e.g. a CUDA device on a machine without one
        fail(f"cannot load model {args.model!r} on {device}: {type(error).__name__}: {error}")
    startup.mark("weights_loaded")
    try:
        # Every flag is the config's field of the same name; what was resolved above replaces
        # what was asked (the loaded model's dtype, the device for `auto`).
        flags = {name: getattr(args, name) for name in ServeConfig.model_fields}
        flags["served_model_name"] = args.served_model_name or args.model
        flags["dtype"] = str(loaded.dtype).removeprefix("torch.")
        flags["device"] = device
        config = ServeConfig(**flags)
        engine = build_engine(loaded, config)
    except (ValueError, ValidationError) as error:
        fail(str(error).splitlines()[0])
    except Exception as error:  # noqa: BLE001 - a drafter that cannot load, say
        fail(f"cannot build the engine: {type(error).__name__}: {error}")
    return run_server(config, loaded, engine, startup)


def run_server(config: ServeConfig, loaded: Any, engine: Any, startup: Phases) -> int:
    import uvicorn

    from ddtree_runtime.server.app import create_app
    from ddtree_runtime.server.engine_loop import EngineLoop
    from ddtree_runtime.server.state import RuntimeState

    loop = EngineLoop(engine)
    state = RuntimeState(
        config=config, loaded=loaded, loop=loop, source_hash=source_hash(), startup=startup
    )

    class GracefulServer(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            asyncio.get_running_loop().call_later(IN_FLIGHT_GRACE_S, loop.stop, 0)
            await super().shutdown(sockets)

    server = GracefulServer(
        uvicorn.Config(
            create_app(state),
            host=config.host,
            port=config.port,
            log_config=None,
            access_log=False,
            use_colors=False,
            timeout_graceful_shutdown=UVICORN_BACKSTOP_S,
        )
    )
    # uvicorn re-raises a caught SIGTERM/SIGINT once it has shut down; a no-op handler underneath
    # makes that re-raise harmless, so a requested stop ends with exit code 0.
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, lambda *_: None)
    outcome: dict[str, Any] = {"exit_code": 0}
    loop.start()
    threading.Thread(
        target=warm_up, args=(state, server, outcome), name="ddtree-warmup", daemon=True
    ).start()
    try:
        server.run()
    finally:
        loop.stop()
    log.info("stopped")
    return int(outcome["exit_code"]) if server.started else 1
