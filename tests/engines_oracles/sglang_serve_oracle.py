"""Oracle: send requests to SGLang's own HTTP app, with a scripted scheduler behind it.

stdin:  {"argv": [...server flags...], "env": {...}, "ready": bool, "step_delay_s": float,
         "refuse_logprobs": bool, "listen": port (instead of "requests"),
         "requests": [{"name", "method", "path", "headers", "body",
                       "steps": [{"text", "ids", "logprobs", "top_logprobs", "top_ids",
                                  "verify_ct", "correct_drafts"}],
                       "finish": {"type": "stop" | "length", ...}}
                      | {"name", "mark_warmed_up": true}]}
stdout: {"sglang_version", "scheduler_errors", "responses": [{"name", "status", "content_type",
         "body", "reached_scheduler", "scheduler_request"} | {"name", "status": null, "raised"}]}

The app is `sglang.srt.entrypoints.http_server.app`, wired as its lifespan wires it: the argv is
parsed and resolved by SGLang (placeholders "{target}"/"{draft}" become tiny local checkpoints),
published, and served by a real TokenizerManager, TemplateManager and the OpenAI serving classes.
Requests go through httpx's ASGI transport (no socket), so routing, request-model validation
(400 on a bad body), the serving code's own checks and its SSE output are all SGLang's. Only the
scheduler and detokenizer are scripted (scripted_scheduler.py): each request's `steps` are what
they stream back. `ready` (default true) marks the server warmed up, as a successful warm-up
request does (`_execute_server_warmup`); false leaves it Starting, as before warm-up, until a
`mark_warmed_up` entry in `requests` does it between two requests.
`scheduler_request` is what reached the scheduler (prompt ids, sampling params, logprob flags),
null when SGLang rejected the request before scheduling it. A request SGLang's app raised on
(behind uvicorn: a 500 or a cut stream) answers `raised` with the exception instead.
`refuse_logprobs` makes the scheduler refuse logprob requests as PR #29907's does
(scripted_scheduler.py). With `listen`, the same app is served over HTTP on 127.0.0.1:port
until the process is killed (one JSON line on stdout when it listens), answering every request
with the scheduler's `auto_script`: a live SGLang a client (the sweeper) can probe and measure.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scripted_scheduler import ScriptedScheduler
from sglang_compat import server_args_and_templates
from tiny_checkpoint import write_target_and_draft


def build_app(
    argv: list[str],
    *,
    ready: bool,
    step_delay_s: float,
    refuse_logprobs: bool = False,
    auto: bool = False,
) -> tuple[Any, Any]:
    """SGLang's HTTP app with a real TokenizerManager over a ScriptedScheduler."""
    import sglang.srt.entrypoints.http_server as http_server
    from sglang.srt.entrypoints.openai.serving_completions import OpenAIServingCompletion
    from sglang.srt.entrypoints.openai.serving_tokenize import OpenAIServingTokenize
    from sglang.srt.managers.tokenizer_manager import ServerStatus

    server_args, port_args, tokenizer_manager, template_manager = server_args_and_templates(argv)
    scheduler = ScriptedScheduler(
        port_args,
        server_args,
        step_delay_s=step_delay_s,
        refuse_logprobs=refuse_logprobs,
        auto=auto,
        speculative=server_args.speculative_algorithm is not None,
    )
    context_length = tokenizer_manager.model_config.context_len
    # The scheduler's handshake (Scheduler.get_init_info), with this script's capacity.
    scheduler_info = {
        "status": "ready",
        "max_total_num_tokens": context_length,
        "max_req_input_len": context_length - 1,
        "startup_time": time.time(),
        "hicache_object_layout": None,
    }
    tokenizer_manager.max_req_input_len = scheduler_info["max_req_input_len"]
    if hasattr(tokenizer_manager, "set_startup_time"):  # 0.5.23; 0.5.15 has no such record
        tokenizer_manager.set_startup_time(scheduler_info["startup_time"])
    http_server.set_global_state(
        http_server._GlobalState(
            tokenizer_manager=tokenizer_manager,
            template_manager=template_manager,
            scheduler_info=scheduler_info,
        )
    )
    app = http_server.app
    app.state.openai_serving_completion = OpenAIServingCompletion(
        tokenizer_manager, template_manager
    )
    app.state.openai_serving_chat = tokenizer_manager.serving_chat_class(
        tokenizer_manager, template_manager
    )
    app.state.openai_serving_tokenize = OpenAIServingTokenize(tokenizer_manager, template_manager)
    if ready:
        tokenizer_manager.server_status = ServerStatus.Up
    return app, scheduler


def http_server_state() -> Any:
    import sglang.srt.entrypoints.http_server as http_server

    return http_server.get_global_state()


def _scheduler_request(message: Any) -> dict[str, Any]:
    from sglang.srt.utils.msgspec_utils import msgspec_to_builtins

    sampling = message.sampling_params
    return {
        "input_ids": list(message.input_ids or []),
        "sampling_params": msgspec_to_builtins(
            {name: getattr(sampling, name) for name in vars(sampling) if not name.startswith("_")}
            if hasattr(sampling, "__dict__")
            else sampling
        ),
        "return_logprob": message.return_logprob,
        "top_logprobs_num": message.top_logprobs_num,
        "stream": message.stream,
    }


async def _send_all(app: Any, scheduler: ScriptedScheduler, requests: list[dict[str, Any]]):
    import httpx

    transport = httpx.ASGITransport(app=app)
    answers = []
    async with httpx.AsyncClient(transport=transport, base_url="http://sglang") as client:
        for request in requests:
            if request.get("mark_warmed_up"):
                # What _execute_server_warmup does once its warm-up request returned 200.
                from sglang.srt.managers.tokenizer_manager import ServerStatus

                http_server_state().tokenizer_manager.server_status = ServerStatus.Up
                answers.append({"name": request.get("name"), "status": None})
                continue
            seen = len(scheduler.received)
            if request.get("steps"):
                scheduler.expect(
                    {
                        "steps": request["steps"],
                        "finish": request.get("finish"),
                        "refuse_logprobs": request.get("refuse_logprobs", False),
                    }
                )
            headers = request.get("headers", {})
            body = request.get("body")
            method = request.get("method", "GET" if body is None else "POST")
            try:
                response = await client.request(
                    method,
                    request["path"],
                    headers=headers,
                    **({} if body is None else {"json": body}),
                )
            except Exception as error:  # SGLang raised out of its app: a real server's 500
                answers.append(
                    {
                        "name": request.get("name"),
                        "status": None,
                        "raised": f"{type(error).__name__}: {error}",
                        "reached_scheduler": len(scheduler.received) > seen,
                    }
                )
                continue
            reached = len(scheduler.received) > seen
            answers.append(
                {
                    "name": request.get("name"),
                    "status": response.status_code,
                    "content_type": response.headers.get("content-type"),
                    "body": response.text,
                    "reached_scheduler": reached,
                    "scheduler_request": (
                        _scheduler_request(scheduler.received[-1]) if reached else None
                    ),
                }
            )
    return answers


def _listen(app: Any, port: int, out: Any) -> None:
    """Serve the app on 127.0.0.1:port with uvicorn (no lifespan: nothing to warm up, the app is
    wired above); one JSON line on stdout says it is up. The socket listens before that line,
    so a client that connects while uvicorn is still starting (seconds on a loaded machine)
    waits in the backlog instead of being refused (a socket only bound answers ECONNREFUSED)."""
    import socket

    import sglang
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(config.backlog)
    out.write(json.dumps({"listening": port, "sglang_version": sglang.__version__}) + "\n")
    out.flush()
    uvicorn.Server(config).run(sockets=[sock])
    os._exit(0)


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # SGLang prints; only our JSON goes to the real stdout
    request = json.load(sys.stdin)
    os.environ.update(request.get("env", {}))
    import sglang

    with tempfile.TemporaryDirectory(prefix="sglang-oracle-") as tmp:
        target, draft = write_target_and_draft(Path(tmp))
        argv = [
            arg.replace("{target}", str(target)).replace("{draft}", str(draft))
            for arg in request.get("argv", ["--model-path", "{target}", "--device", "cuda"])
        ]
        app, scheduler = build_app(
            argv,
            ready=request.get("ready", True),
            step_delay_s=request.get("step_delay_s", 0.05),
            refuse_logprobs=request.get("refuse_logprobs", False),
            auto="listen" in request,
        )
        if "listen" in request:
            _listen(app, int(request["listen"]), out)  # until the test kills this process
        responses = asyncio.run(_send_all(app, scheduler, request["requests"]))
    answer = {
        "sglang_version": sglang.__version__,
        "scheduler_errors": scheduler.errors,
        "responses": responses,
    }
    json.dump(answer, out)
    out.flush()
    # SGLang's TokenizerManager leaves non-daemon threads and ZMQ contexts behind.
    os._exit(0)


if __name__ == "__main__":
    main()
