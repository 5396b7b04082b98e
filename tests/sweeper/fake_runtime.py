"""A small real HTTP server on loopback that speaks the runtime's contract, with misbehaviours.

Used by the sweeper's tests and benches where the real runtime would be slow or cannot misbehave
on demand. It takes the same argv shape as `python -m ddtree_runtime serve` (any `--flag value`,
`--flag`, `--no-flag`), and its behaviour is steered through environment variables:

- FAKE_START_DELAY: seconds during which /health answers 503 "loading" (default 0.2);
- FAKE_CRASH: exit with this code at start, after printing a message;
- FAKE_BAD_FINGERPRINT=1: report a fingerprint that does not match its inputs;
- FAKE_LAUNCH_ID: report this launch id instead of the one passed;
- FAKE_CONFIG_OVERRIDE: JSON merged into the fingerprinted config (a server running other params);
- FAKE_TOKEN_DELAY: seconds between streamed tokens (default 0: as fast as it can);
- FAKE_DELAYS: JSON {"key=value[,key=value...]": seconds}: the first entry whose flags all match
  sets the token delay instead (a landscape of server configs of different speeds, to search);
- FAKE_FAIL_REQUESTS=1: answer completions with a 500;
- FAKE_WRONG_TOKENS=1: from the third token on, emit other tokens than the pure function of
  the prompt (a runtime that diverges from the AR baseline);
- FAKE_WHEN="key=value[,key=value...]": apply the misbehaviours above only when those flags
  have those values (e.g. "topk=4"), so one server config of a sweep misbehaves and the others
  do not;
- FAKE_WRONG_LATER_TURNS=1: like FAKE_WRONG_TOKENS, only for chat requests whose messages hold
  an assistant message (a later turn of a conversation: a fault that needs history to show);
- FAKE_SAMPLING=1: at temperature > 0 with a seed, tokens are a pure function of (prompt,
  position, seed) drawn evenly from 8 ids (a server that samples; coupled: the same seed gives
  the same tokens on every config), and logprobs carry a sample margin of 0.3 per token;
- FAKE_HOT_SAMPLING=1 (a misbehaviour, with FAKE_SAMPLING): draw from 12 ids instead (a
  server whose sampled distribution is shifted, greedy untouched);
- FAKE_UNCOUPLED=1: /server_info advertises no coupled sampling (a server that samples by
  rejection, or says nothing);
- FAKE_PLAIN=1: a plain OpenAI-compatible server knowing none of the extensions: no
  /server_info, no /tokenize, no `token_ids` in chunks, no `ddtree` acceptance (a server nobody
  here wrote);
- FAKE_REEXEC=argv|env: replace itself (same pid) by `python -m ddtree_runtime` with one more
  argument, or without the NOTE variable: a process that no longer runs what was launched;
- FAKE_REUSEPORT=1: bind its port with SO_REUSEPORT (as some engines do), so another process
  can listen on the same port beside it;
- FAKE_SOURCE_HASH: the source hash to report (the tests pass the bundled runtime's, since the
  fake stands in for it), or `self`: the hash of the `ddtree_runtime` package it was started
  through (a spec's `runtime.package`); FAKE_WRONG_SOURCE_HASH, a misbehaviour: report this one
  instead (a runtime whose code is not the manifest's).

`sweep_fixtures.fake_runtime_env` starts it exactly as the runtime is started
(`python -m ddtree_runtime serve ...`, through a shim package), so /proc shows the launched argv.

Tokens are a pure function of (prompt, position), so repeated requests are identical. A prompt
given as token ids is charged that many prompt tokens (usage), as a real server does; /tokenize
gives one id per word. The final
usage chunk's `ddtree` object carries the runtime's exposure keys too (`FakeRuntime.exposure`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

FINGERPRINTED = (
    "model",
    "draft",
    "speculative",
    "budget",
    "topk",
    "block_size",
    "cuda_graph",
    "dtype",
    "device",
    "max_batch",
    "max_model_len",
    "seed",
)


# Flags whose values are names, never numbers: a launch id is random hex, and one such as
# "840920654670e119" reads as a float (a CI run once failed on exactly that).
TEXT_FLAGS = frozenset({"launch_id", "host", "model", "served_model_name"})


def parse_flags(argv: list[str]) -> dict[str, Any]:
    """`--a 1 --b --no-c` -> {"a": 1, "b": True, "c": False}; numbers parsed (not in TEXT_FLAGS),
    dashes -> _."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--"):
            i += 1
            continue
        key = arg[2:].replace("-", "_")
        if "=" in key:
            key, raw = key.split("=", 1)
            out[key] = raw if key in TEXT_FLAGS else _value(raw)
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out[key] = argv[i + 1] if key in TEXT_FLAGS else _value(argv[i + 1])
            i += 1
        elif key.startswith("no_"):
            out[key[3:]] = False
        elif key.startswith("disable_"):
            out[key[8:]] = False
        else:
            out[key] = True
        i += 1
    return out


def _value(raw: str) -> Any:
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(raw.lower(), raw)


def own_source_hash() -> str:
    """The runtime's source hash (docs/runtime-api.md's recipe) of the `ddtree_runtime` package this
    process imported, as the real runtime reports its own: the shim it was started through."""
    import ddtree_runtime

    root = Path(next(iter(ddtree_runtime.__path__)))
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def token_ids(prompt: str, n: int) -> list[int]:
    seed = int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16)
    return [(seed + 7 * i) % 997 + 3 for i in range(n)]


class FakeRuntime:
    """The ASGI app: /health, /server_info, /v1/models, /v1/completions, /v1/chat/completions."""

    def __init__(self, argv: list[str]) -> None:
        flags = parse_flags(argv)
        self.port = int(flags.get("port", 8000))
        self.start_time = time.time()
        self.start_delay = float(os.environ.get("FAKE_START_DELAY", "0.2"))
        self.ready_at = self.start_time + self.start_delay
        self.token_delay = float(os.environ.get("FAKE_TOKEN_DELAY", "0"))
        for when, delay in json.loads(os.environ.get("FAKE_DELAYS", "{}")).items():
            if _flags_match(flags, when):
                self.token_delay = float(delay)
                break
        self.fail_requests = os.environ.get("FAKE_FAIL_REQUESTS") == "1"
        self.plain = os.environ.get("FAKE_PLAIN") == "1"
        #: Requests in flight -> whether another overlapped them (their rounds count as batched).
        self.overlapped: dict[int, bool] = {}
        self.started = 0
        config = {k: v for k, v in flags.items() if k not in ("host", "port", "launch_id")}
        config.setdefault("model", "fake")
        config.setdefault("speculative", "ddtree" if "budget" in config else "none")
        config.setdefault("cuda_graph", False)
        fp_config = {k: config.get(k) for k in FINGERPRINTED if k in config}
        fp_config.update(json.loads(os.environ.get("FAKE_CONFIG_OVERRIDE", "{}")))
        source = os.environ.get("FAKE_WRONG_SOURCE_HASH") or os.environ.get(
            "FAKE_SOURCE_HASH", "s0"
        )
        if source == "self":
            source = own_source_hash()
        inputs = {"config": fp_config, "weights_hash": "w0", "source_hash": source}
        canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
        fingerprint = hashlib.sha256(canonical.encode()).hexdigest()
        if os.environ.get("FAKE_BAD_FINGERPRINT") == "1":
            fingerprint = hashlib.sha256(b"something else").hexdigest()
        self.info: dict[str, Any] = {
            "config": config,
            "fingerprint": fingerprint,
            "fingerprint_inputs": inputs,
            "launch_id": os.environ.get("FAKE_LAUNCH_ID", str(flags.get("launch_id", ""))),
            "runtime_version": "0.0.0-fake",
            "source_hash": source,
            "pid": os.getpid(),
            "start_time": self.start_time,
            "ready_at": self.ready_at,
            "model": {"name": config["model"], "weights_hash": "w0"},
            "device": "cpu",
            "stats": {},
        }
        if os.environ.get("FAKE_UNCOUPLED") != "1":
            self.info["sampling"] = {"coupled": True}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path = scope["path"]
        if path == "/health":
            ready = time.time() >= self.ready_at
            body = {"status": "ok"} if ready else {"status": "loading"}
            await _json(send, 200 if ready else 503, body)
        elif path == "/server_info" and not self.plain:
            await _json(send, 200, self.info)
        elif path == "/tokenize" and not self.plain:
            text = json.loads(await _body(receive)).get("prompt", "")
            tokens = [int(hashlib.sha256(w.encode()).hexdigest()[:4], 16) for w in text.split()]
            await _json(send, 200, {"tokens": tokens, "count": len(tokens)})
        elif path == "/v1/models":
            model = {"id": self.info["config"]["model"], "object": "model", "owned_by": "fake"}
            await _json(send, 200, {"object": "list", "data": [model]})
        elif path in ("/v1/completions", "/v1/chat/completions"):
            raw = await _body(receive)
            await self.complete(json.loads(raw), send, chat=path.endswith("chat/completions"))
        else:
            await _json(send, 404, {"error": {"message": "not found", "type": "not_found"}})

    def exposure(self, rounds: int, *, shared: bool) -> dict[str, Any]:
        """The runtime's exposure keys, as its contract shapes them: under --cuda-graph every
        round is at the fixed width 1 + budget and (a one-token draft) padded; a request that
        overlapped another counts its rounds as batched."""
        config = self.info["config"]
        budget = int(config.get("budget") or 0)
        fixed = bool(config.get("cuda_graph")) and budget > 0
        block = int(config.get("block_size") or 2)
        nodes = min(1, budget)
        return {
            "padded_rounds": rounds if fixed and budget > nodes else 0,
            "padding_rows": rounds * (budget - nodes) if fixed else 0,
            "fixed_shape_rounds": rounds if fixed else 0,
            "cuda_graph_rounds": 0,
            "batched_rounds": rounds if shared else 0,
            "max_tree_depth": nodes,
            "max_tree_width": nodes,
            "max_tree_nodes": nodes,
            "max_verify_width": 1 + (budget if fixed else nodes),
            "accepted_hist": [0, rounds] + [0] * (block - 2) if nodes else [rounds],
        }

    async def complete(self, req: dict, send: Any, *, chat: bool) -> None:
        if self.fail_requests:
            await _json(send, 500, {"error": {"message": "injected failure", "type": "server"}})
            return
        messages = req.get("messages", []) if chat else []
        prompt = "\n".join(m.get("content", "") for m in messages) if chat else req["prompt"]
        prompt_tokens = len(prompt) if isinstance(prompt, list) else 3
        prompt = ",".join(map(str, prompt)) if isinstance(prompt, list) else prompt
        n = int(req.get("max_tokens", 16))
        ids = token_ids(prompt, n)
        sampled = sampling_fakes(req)
        if sampled is not None:
            ids = sampled_ids(prompt, n, int(req["seed"]), sampled)
        later_turn = any(m.get("role") == "assistant" for m in messages)
        wrong_later = later_turn and os.environ.get("FAKE_WRONG_LATER_TURNS") == "1"
        if os.environ.get("FAKE_WRONG_TOKENS") == "1" or wrong_later:
            ids = ids[:2] + [(t * 31 + 5) % 997 + 3 for t in ids[2:]]
        self.started += 1
        me = self.started
        for other in self.overlapped:
            self.overlapped[other] = True
        self.overlapped[me] = bool(self.overlapped)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for i, tok in enumerate(ids):
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            text = f"w{tok} "
            choice: dict[str, Any] = {"index": 0, "finish_reason": None}
            if not self.plain:
                choice["token_ids"] = [tok]
            lp: dict[str, Any] = {
                "token": text,
                "logprob": -0.1,
                "top_logprobs": [{"token": text, "logprob": -0.1}, {"token": "x", "logprob": -2.5}],
            }
            if sampled is not None:
                lp["sample_margin"] = 0.3
            if chat:
                choice["delta"] = {"content": text}
                choice["logprobs"] = {"content": [lp]}
            else:
                choice["text"] = text
                choice["logprobs"] = {
                    "tokens": [text],
                    "token_logprobs": [-0.1],
                    "top_logprobs": [{text: -0.1, "x": -2.5}],
                }
                if sampled is not None:
                    choice["logprobs"]["sample_margins"] = [0.3]
            if i == n - 1:
                choice["finish_reason"] = "length"
            await _chunk(send, {"id": "c", "object": "text_completion", "choices": [choice]})
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n,
            "total_tokens": n + prompt_tokens,
        }
        rounds = max(1, n // 2)
        ddtree = {
            "verify_rounds": rounds,
            "accepted_tokens": n // 2,
            "emitted_tokens": n,
            "tau": n / rounds,
            **self.exposure(rounds, shared=self.overlapped.pop(me)),
        }
        final: dict[str, Any] = {"id": "c", "choices": [], "usage": usage}
        if not self.plain:
            final["ddtree"] = ddtree
        await _chunk(send, final)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def _body(receive: Any) -> bytes:
    raw = b""
    while True:
        msg = await receive()
        raw += msg.get("body", b"")
        if not msg.get("more_body"):
            return raw


async def _chunk(send: Any, obj: dict) -> None:
    data = b"data: " + json.dumps(obj).encode() + b"\n\n"
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def _json(send: Any, status: int, obj: dict) -> None:
    body = json.dumps(obj).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def sampling_fakes(req: dict) -> int | None:
    """How many ids a sampled request draws from (FAKE_SAMPLING; 12 when FAKE_HOT_SAMPLING),
    or None: greedy, unseeded, or sampling not faked."""
    if os.environ.get("FAKE_SAMPLING") != "1" or req.get("seed") is None:
        return None
    if float(req.get("temperature") or 0) <= 0:
        return None
    return 12 if os.environ.get("FAKE_HOT_SAMPLING") == "1" else 8


def sampled_ids(prompt: str, n: int, seed: int, width: int) -> list[int]:
    """n ids, each a pure function of (prompt, position, seed), evenly over `width` ids."""
    out = []
    for i in range(n):
        digest = hashlib.sha256(f"{prompt}|{i}|{seed}".encode()).digest()
        out.append(3 + int.from_bytes(digest[:4], "big") % width)
    return out


#: Settings, not misbehaviours: kept when FAKE_WHEN does not match.
KEPT_WHEN_WELL = (
    "FAKE_SAMPLING",
    "FAKE_UNCOUPLED",
    "FAKE_START_DELAY",
    "FAKE_TOKEN_DELAY",
    "FAKE_DELAYS",
    "FAKE_SOURCE_HASH",
    "FAKE_PLAIN",
    "FAKE_REUSEPORT",
)


def _flags_match(flags: dict[str, Any], when: str) -> bool:
    """Whether every `key=value` of `when` (comma-separated) is among the flags."""
    conditions = [part.split("=", 1) for part in when.split(",")]
    return all(str(flags.get(key)) == value for key, value in conditions)


def _misbehaviour_applies(argv: list[str]) -> bool:
    when = os.environ.get("FAKE_WHEN")
    return not when or _flags_match(parse_flags(argv), when)


def main(argv: list[str]) -> None:
    import uvicorn

    if argv and argv[0] == "serve":
        argv = argv[1:]
    if not _misbehaviour_applies(argv):
        for name in list(os.environ):
            if name.startswith("FAKE_") and name not in KEPT_WHEN_WELL:
                del os.environ[name]
    crash = os.environ.get("FAKE_CRASH")
    if crash:
        print(f"fake runtime: injected start failure (exit {crash})", flush=True)
        sys.exit(int(crash))
    _reexec(argv)
    app = FakeRuntime(argv)
    host = str(parse_flags(argv).get("host", "127.0.0.1"))  # a Slurm node's server: 0.0.0.0
    print(f"fake runtime listening on {host}:{app.port}", flush=True)
    if os.environ.get("FAKE_REUSEPORT") == "1":
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, app.port))
        uvicorn.run(app, fd=sock.fileno(), log_level="warning", lifespan="on")
    else:
        uvicorn.run(app, host=host, port=app.port, log_level="warning", lifespan="on")


def _reexec(argv: list[str]) -> None:
    """FAKE_REEXEC: become another program in the same process (see the module docstring)."""
    how = os.environ.get("FAKE_REEXEC")
    if not how or os.environ.get("FAKE_REEXECED"):
        return
    env = {**os.environ, "FAKE_REEXECED": "1"}
    extra = ["--reexec"] if how == "argv" else []
    if how == "env":
        env.pop("NOTE", None)
    command = [sys.executable, "-m", "ddtree_runtime", "serve", *argv, *extra]
    os.execve(sys.executable, command, env)


if __name__ == "__main__":
    main(sys.argv[1:])
