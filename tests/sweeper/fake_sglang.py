"""A fake SGLang server that behaves as the PR #29907 build does, for the sweeper's edge cases.

What it mimics of that build (sgl-project/sglang at 93e9850e, read with the code-search tool;
the real-SGLang oracles are in tests/engines_oracles):
- OpenAI routes without the id extensions of July 2026: `return_token_ids`,
  `return_output_ids_in_sglext` and `return_spec_tokens_details` are ignored (SGLang's request
  models ignore unknown fields); chunks carry text only.
- Logprobs refused on speculative requests (the scheduler's `validate_dflash_request` on
  DDTREE): an OpenAI route answers 400 with SGLang's top-level `ErrorResponse`, `/generate`
  a 400 `{"error": {"message"}}`.
- Native `/generate` not streamed (`"stream": false`) with input-token logprobs from
  `logprob_start_len` on, the first entry None (as SGLang 0.5.15 answers; `scored`), on an AR
  server only: how the AR server scores the speculative configs' samples;
  FAKE_DIE_AFTER_SCORES=<file> (while the file exists) exits after the number of them it holds.
- Native streamed `/generate` (`text` or `input_ids`, `sampling_params`; an unknown sampling
  key is a 400 as in 0.5.23): `output_ids` cumulative, or deltas under
  `--incremental-streaming-output`; `meta_info.completion_tokens` in every event; the final
  event's `meta_info` has `spec_verify_ct`, `spec_accept_length` and the drafts figures under
  the PR build's names (`spec_accepted_drafts`, `spec_proposed_drafts`,
  `spec_accept_histogram`), or 0.5.23's (`spec_num_correct_drafts`, ...) with
  FAKE_SPELLING=0.5.23; none with FAKE_NO_META_ACCEPTANCE=1 (a fork that dropped them).
- `/server_info` with the resolved args: every flag passed, typed, the accept thresholds (1.0
  by default) and `speculative_algorithm` (None without one), and the scheduler's copy in
  `internal_states`, which `/set_internal_state` changes for the keys its handler takes (the
  accept thresholds, `pp_max_micro_batch_size`; any other: `[false]`, nothing set);
  FAKE_NO_SET_INTERNAL_STATE=1 removes the route (a build before it: 404); `/tokenize`;
  `/metrics` (`--enable-metrics`) with `sglang:generation_tokens_total` and
  `sglang:spec_verify_calls_total`; FAKE_NO_TOKENIZE=1 removes `/tokenize` (a build without it:
  404), FAKE_NO_GENERATE=1 `/generate`.
- A non-streamed chat completion with `return_prompt_token_ids` (SGLang >= PR #19731, March
  2026) carries the prompt's ids as the chat route rendered them in `choices[0]`;
  FAKE_NO_PROMPT_IDS=1 ignores the field (an older build or a fork), as SGLang ignores unknown
  fields. FAKE_REQUEST_LOG=<file> appends each `/generate` and OpenAI body received, one JSON
  line `{"algorithm", "path", "body"}` per request (every config of a sweep may share the file).
- DDTREE's effective behaviour: a chain at budget <= block_size - 1 (topk unused), else a tree
  of width min(max(budget // (block_size - 1) + 1, 2), vocab, SGLANG_DDTREE_MAX_TOPK (6)).
  Acceptance is a pure function of that behaviour, so two labels of one behaviour answer alike.

Outputs are a pure function of the prompt's token ids, the same on every config: greedy DDTREE
is exact. Started as `python -m sglang.launch_server ...` through a shim package
(`sglang_shim_env`), so /proc shows the launched argv.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

VOCAB = 997
VERSION = "0.5.10.pr29907-fake"
SAMPLING_KEYS = {"max_new_tokens", "min_new_tokens", "ignore_eos", "temperature", "top_p"}
SAMPLING_KEYS |= {"top_k", "sampling_seed", "stop"}
#: The keys the build's `Scheduler.set_internal_state` takes (93e9850e, as in 0.5.15).
SWITCHABLE = {"pp_max_micro_batch_size", "speculative_accept_threshold_single"}
SWITCHABLE |= {"speculative_accept_threshold_acc"}


def parse_args(argv: list[str]) -> dict[str, Any]:
    """`--a-b 1 --flag` -> {"a_b": 1, "flag": True}, values typed as SGLang's parser would."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        name = argv[i].removeprefix("--").replace("-", "_")
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            raw = argv[i + 1]
            try:
                out[name] = json.loads(raw)
            except ValueError:
                out[name] = raw
            i += 2
        else:
            out[name] = True
            i += 1
    return out


def tokenize(text: str) -> list[int]:
    return [int(hashlib.sha256(w.encode()).hexdigest()[:6], 16) % VOCAB + 3 for w in text.split()]


def render_chat(messages: list[dict[str, Any]]) -> str:
    return " ".join(f"<{m.get('role')}> {m.get('content')}" for m in messages) + " <assistant>"


def output_ids(prompt_ids: list[int], n: int) -> list[int]:
    seed = int(hashlib.sha256(",".join(map(str, prompt_ids)).encode()).hexdigest()[:8], 16)
    return [(seed + 7 * i) % VOCAB + 3 for i in range(n)]


class FakeSGLang:
    """The ASGI app; see the module docstring."""

    def __init__(self, argv: list[str]) -> None:
        self.args = parse_args(argv)
        self.port = int(self.args.get("port", 30000))
        self.ready_at = time.time() + float(os.environ.get("FAKE_START_DELAY", "0.2"))
        self.algorithm = self.args.get("speculative_algorithm")
        self.incremental = bool(self.args.get("incremental_streaming_output"))
        self.metrics = bool(self.args.get("enable_metrics"))
        self.spelling = os.environ.get("FAKE_SPELLING", "pr29907")
        self.generated = 0
        self.verify_calls = 0
        block = int(self.args.get("speculative_num_draft_tokens") or 16)
        budget = int(self.args.get("speculative_ddtree_budget") or block - 1)
        cap = int(os.environ.get("SGLANG_DDTREE_MAX_TOPK", "6"))
        if self.algorithm == "DDTREE" and budget > block - 1:
            width = min(max(budget // (block - 1) + 1, 2), VOCAB, cap)
            self.depth = min(block - 1, budget)
        else:
            width, self.depth = 1, min(budget, block - 1)
        # Tokens per verify step: one more accepted draft per extra branch, within the depth.
        self.per_step = min(1 + self.depth, 1 + width + self.depth // 4) if self.algorithm else 1
        self.info = {
            **{key: 1.0 for key in SWITCHABLE if key.startswith("speculative")},
            **self.args,
            "speculative_algorithm": self.algorithm,
            "version": VERSION,
            "effective": {"width": width, "depth": self.depth},
        }
        # The scheduler's copy of the args, the one /set_internal_state changes.
        self.scheduler = {k: v for k, v in self.info.items() if k != "version"}

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
            await _json(send, 200 if ready else 503, {})
        elif path in ("/server_info", "/get_server_info"):
            await _json(send, 200, {**self.info, "internal_states": [dict(self.scheduler)]})
        elif path == "/set_internal_state" and not os.environ.get("FAKE_NO_SET_INTERNAL_STATE"):
            wanted = (await _body(receive))["server_args"]
            taken = all(key in SWITCHABLE for key in wanted)
            if taken:
                self.scheduler.update(wanted)
            await _json(send, 200, [taken])
        elif path == "/v1/models":
            model = {"id": str(self.args.get("model_path")), "object": "model"}
            await _json(send, 200, {"object": "list", "data": [model]})
        elif path == "/metrics" and self.metrics:
            text = (
                f'sglang:generation_tokens_total{{model_name="m",is_streaming="true"}} '
                f"{float(self.generated)}\n"
                f'sglang:spec_verify_calls_total{{model_name="m"}} {float(self.verify_calls)}\n'
            )
            await _text(send, 200, text)
        elif path in ("/tokenize", "/v1/tokenize") and not os.environ.get("FAKE_NO_TOKENIZE"):
            body = await _body(receive)
            text = render_chat(body["messages"]) if body.get("messages") else body["prompt"]
            ids = tokenize(text)
            await _json(send, 200, {"tokens": ids, "count": len(ids), "max_model_len": 4096})
        elif path == "/generate" and not os.environ.get("FAKE_NO_GENERATE"):
            await self.generate(self._logged(path, await _body(receive)), send)
        elif path in ("/v1/completions", "/v1/chat/completions"):
            body = self._logged(path, await _body(receive))
            await self.openai(body, send, chat=path.endswith("chat/completions"))
        else:
            await _json(send, 404, {"detail": "Not Found"})

    def _logged(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        log = os.environ.get("FAKE_REQUEST_LOG")
        if log:
            line = json.dumps({"algorithm": self.algorithm, "path": path, "body": body})
            with open(log, "a") as f:  # one write per line: appends do not interleave
                f.write(line + "\n")
        return body

    def _acceptance(self, n: int) -> dict[str, Any]:
        steps = max(1, -(-(n - 1) // self.per_step)) if n > 1 else 1
        accepted = max(0, n - 1 - steps)
        histogram = [0] * (self.depth + 1)
        histogram[min(self.depth, self.per_step - 1)] = steps
        names = (
            ("spec_accepted_drafts", "spec_proposed_drafts", "spec_accept_histogram")
            if self.spelling == "pr29907"
            else (
                "spec_num_correct_drafts",
                "spec_num_proposed_drafts",
                "spec_correct_drafts_histogram",
            )
        )
        return {
            "spec_verify_ct": steps,
            "spec_accept_length": n / steps,
            names[0]: accepted,
            names[1]: steps * self.depth,
            names[2]: histogram,
        }

    async def generate(self, body: dict[str, Any], send: Any) -> None:
        sampling = body.get("sampling_params") or {}
        unknown = set(sampling) - SAMPLING_KEYS
        if unknown:
            message = f"unknown sampling_params {sorted(unknown)}"
            await _json(send, 400, {"error": {"message": message}})
            return
        if self.algorithm and body.get("return_logprob"):
            message = "DDTREE does not support return_logprob"
            await _json(send, 400, {"error": {"message": message}})
            return
        prompt = body.get("input_ids") or tokenize(str(body.get("text", "")))
        n = int(sampling.get("max_new_tokens", 16))
        ids = output_ids(list(prompt), n)
        if body.get("stream") is False:
            await self.scored(body, list(prompt), ids, send)
            return
        await _start_stream(send)
        sent = 0
        step = self.per_step
        while sent < n:
            new = ids[sent : sent + step] if sent else ids[:1]
            sent += len(new)
            meta: dict[str, Any] = {"id": "r", "prompt_tokens": len(prompt)}
            meta["completion_tokens"] = sent
            meta["finish_reason"] = {"type": "length", "length": n} if sent == n else None
            if body.get("return_logprob"):
                tops = [[[-0.1, t, None], [-2.5, 1, None]] for t in ids[:sent]]
                meta["output_top_logprobs"] = tops[-len(new) :] if self.incremental else tops
            if sent == n and self.algorithm and not os.environ.get("FAKE_NO_META_ACCEPTANCE"):
                meta.update(self._acceptance(n))
            if self.incremental:
                event: dict[str, Any] = {"text": "".join(f"w{t} " for t in new), "output_ids": new}
            else:
                text = "".join(f"w{t} " for t in ids[:sent]) if sent == n else None
                event = {"text": text, "output_ids": ids[:sent]}
            await _event(send, {**event, "meta_info": meta, "index": 0})
        self._count(n)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    async def scored(
        self, body: dict[str, Any], prompt: list[int], ids: list[int], send: Any
    ) -> None:
        """A non-streamed `/generate`, with input-token logprobs from `logprob_start_len` on as
        SGLang gives them (the first entry None): the fake's model gives the token its outputs
        would have there -0.1, any other -5.0, and names it first in the top logprobs."""
        die = os.environ.get("FAKE_DIE_AFTER_SCORES")
        if die and Path(die).exists() and body.get("return_logprob"):
            self.scores_left = getattr(self, "scores_left", int(Path(die).read_text()))
            self.scores_left -= 1
            if self.scores_left < 0:
                os._exit(9)  # a crash mid-scoring (what a kill does to the run)
        meta: dict[str, Any] = {"id": "r", "prompt_tokens": len(prompt)}
        if body.get("return_logprob"):
            start = int(body.get("logprob_start_len", -1))
            start = max(start, 0)
            expected = output_ids(prompt[: start + 1], len(prompt) - start - 1)
            tokens: list[Any] = [[None, prompt[start], None]]
            tops: list[Any] = [None]
            for token, want in zip(prompt[start + 1 :], expected, strict=True):
                tokens.append([-0.1 if token == want else -5.0, token, None])
                tops.append([[-0.1, want, None], [-2.5, 1, None]][: body.get("top_logprobs_num")])
            meta.update(input_token_logprobs=tokens, input_top_logprobs=tops)
        text = "".join(f"w{t} " for t in ids)
        await _json(send, 200, {"text": text, "output_ids": ids, "meta_info": meta})

    def _count(self, n: int) -> None:
        self.generated += n
        if self.algorithm:
            self.verify_calls += int(self._acceptance(n)["spec_verify_ct"])

    async def openai(self, body: dict[str, Any], send: Any, *, chat: bool) -> None:
        wants_logprobs = bool(body.get("logprobs"))
        if self.algorithm and wants_logprobs:
            error = {
                "object": "error",
                "message": "DDTREE does not support logprobs (validate_dflash_request)",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
            await _json(send, 400, error)
            return
        text = render_chat(body["messages"]) if chat else str(body.get("prompt", ""))
        n = int(body.get("max_tokens", 16))
        ids = output_ids(tokenize(text), n)
        if not body.get("stream"):
            await self.whole(body, send, text, ids, chat=chat)
            return
        await _start_stream(send)
        for i, tok in enumerate(ids):
            piece = f"w{tok} "
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length" if i == n - 1 else None}
            if chat:
                choice["delta"] = {"content": piece}
            else:
                choice["text"] = piece
            if wants_logprobs and not chat:
                choice["logprobs"] = {"tokens": [piece], "top_logprobs": [{piece: -0.1, "x": -2.5}]}
            await _event(send, {"id": "c", "choices": [choice]})
        usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": n + 3}
        await _event(send, {"id": "c", "choices": [], "usage": usage})
        self._count(n)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    async def whole(
        self, body: dict[str, Any], send: Any, prompt: str, ids: list[int], *, chat: bool
    ) -> None:
        """A non-streamed answer (its prompt's ids where a chat asks and the build gives them)."""
        text = "".join(f"w{t} " for t in ids)
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
            if body.get("return_prompt_token_ids") and not os.environ.get("FAKE_NO_PROMPT_IDS"):
                choice["prompt_token_ids"] = tokenize(prompt)
        else:
            choice["text"] = text
        usage = {"prompt_tokens": 3, "completion_tokens": len(ids)}
        await _json(send, 200, {"id": "c", "choices": [choice], "usage": usage})
        self._count(len(ids))


async def _body(receive: Any) -> dict[str, Any]:
    raw = b""
    while True:
        msg = await receive()
        raw += msg.get("body", b"")
        if not msg.get("more_body"):
            return dict(json.loads(raw or b"{}"))


async def _start_stream(send: Any) -> None:
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})


async def _event(send: Any, obj: dict) -> None:
    data = b"data: " + json.dumps(obj).encode() + b"\n\n"
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def _json(send: Any, status: int, obj: dict | list) -> None:
    await _text(send, status, json.dumps(obj), b"application/json")


async def _text(send: Any, status: int, text: str, kind: bytes = b"text/plain") -> None:
    headers = [(b"content-type", kind)]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text.encode()})


def shim_env(tmp: Path) -> dict[str, str]:
    """Write a `sglang` shim package under `tmp` whose `launch_server` runs this fake; the
    environment under which `python -m sglang.launch_server` imports it."""
    shim = tmp / "sglang-shim" / "sglang"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "__init__.py").write_text("")
    here = str(Path(__file__).resolve())
    (shim / "launch_server.py").write_text(
        "import runpy, sys\n"
        f"sys.argv[0] = {here!r}\n"
        f"runpy.run_path({here!r}, run_name='__main__')\n"
    )
    return {"PYTHONSAFEPATH": "1", "PYTHONPATH": str(shim.parent)}


def main(argv: list[str]) -> None:
    import uvicorn

    app = FakeSGLang(argv)
    host = str(app.args.get("host", "127.0.0.1"))
    print(f"fake sglang {VERSION} listening on {host}:{app.port}", flush=True)
    uvicorn.run(app, host=host, port=app.port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main(sys.argv[1:])
