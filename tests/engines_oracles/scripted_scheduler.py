"""A scripted scheduler + detokenizer behind SGLang's real TokenizerManager (SGLang Python).

SGLang's HTTP process hands each request to its scheduler over ZMQ (`TokenizedGenerateReqInput`)
and reads results back from its detokenizer (`BatchStrOutput`). This thread sits on both sockets,
speaking SGLang's own message types through its own `sock_send`/`sock_recv`, so everything above
it (routes, request models, serving_chat/serving_completions, the TokenizerManager's meta_info,
logprob and speculative-metric bookkeeping) is SGLang's code. What it answers is a script: per
generate request, the steps a real scheduler would stream (text delta, token ids, logprobs,
cumulative verify count and accepted drafts). It also answers GetInternalStateReq the way
SGLang's scheduler does (`InternalStateMixin.get_internal_state`), less the GPU-only parts, and
SetInternalStateReq with the release's own handler on a shim scheduler
(`sglang_compat.internal_state_setter`), so `/set_internal_state` takes, refuses and reads back
as that release does.

`refuse_logprobs` plays PR #29907's scheduler-side check: its scheduler runs DFLASH's
`validate_dflash_request` on DDTREE requests, which (as in SGLang 0.5.15's dflash_utils.py:776)
refuses `return_logprob` with "DFLASH speculative decoding does not support return_logprob yet.";
the request then finishes at once with `FINISH_ABORT(message, 400, "BadRequestError")`
(`Req.set_finish_with_abort`), which is what this scheduler streams back for such a request.
0.5.23's validate_dflash_request no longer refuses logprobs, so only a scheduler can show it.

`auto` answers a request that has no queued script with `auto_script`: a fixed function of its
prompt ids, so every server config (and the AR baseline) gives the same output for the same
prompt, as a lossless speculative decoder must; a live oracle (`listen`) serves clients this way.
"""

from __future__ import annotations

import queue
import threading
import time
from array import array
from typing import Any

from sglang_compat import batch_output, internal_state, internal_state_setter

#: How PR #29907's scheduler finishes a DDTREE request that asks for logprobs (see docstring).
_REFUSAL = {
    "type": "abort",
    "message": "DFLASH speculative decoding does not support return_logprob yet.",
    "status_code": 400,
    "err_type": "BadRequestError",
}


class ScriptedScheduler:
    """Plays the scheduler and the detokenizer for one TokenizerManager (see module docstring)."""

    def __init__(
        self,
        port_args: Any,
        server_args: Any,
        *,
        step_delay_s: float = 0.05,
        refuse_logprobs: bool = False,
        auto: bool = False,
        speculative: bool = False,
    ) -> None:
        import zmq
        from sglang.srt.utils.network import get_zmq_socket

        self._context = zmq.Context(2)
        self._from_tokenizer = get_zmq_socket(
            self._context, zmq.PULL, port_args.scheduler_input_ipc_name, False
        )
        self._to_tokenizer = get_zmq_socket(
            self._context, zmq.PUSH, port_args.tokenizer_ipc_name, False
        )
        self._set_internal_state = internal_state_setter(server_args)
        self._scripts: queue.Queue[dict[str, Any]] = queue.Queue()
        self.step_delay_s = step_delay_s
        self.refuse_logprobs = refuse_logprobs
        self.auto = auto
        self.speculative = speculative
        #: Every generate request the scheduler received, in order (SGLang's own objects).
        self.received: list[Any] = []
        self.errors: list[str] = []
        threading.Thread(target=self._serve, name="scripted-scheduler", daemon=True).start()

    def expect(self, script: dict[str, Any]) -> None:
        """Queue the script that answers the next non-health generate request."""
        self._scripts.put(script)

    def _serve(self) -> None:
        from sglang.srt.constants import HEALTH_CHECK_RID_PREFIX
        from sglang.srt.managers import io_struct as io

        while True:
            message = io.sock_recv(self._from_tokenizer)
            try:
                if isinstance(message, io.GetInternalStateReq):
                    io.sock_send(self._to_tokenizer, _internal_state())
                elif isinstance(message, io.SetInternalStateReq):
                    io.sock_send(self._to_tokenizer, self._set_internal_state(message))
                elif isinstance(message, io.TokenizedGenerateReqInput):
                    if str(message.rid).startswith(HEALTH_CHECK_RID_PREFIX):
                        script: dict[str, Any] = {"steps": [{"text": "the", "ids": [6]}]}
                    else:
                        self.received.append(message)
                        if self.auto and self._scripts.empty():
                            script = auto_script(message, speculative=self.speculative)
                        else:
                            script = self._scripts.get_nowait()
                        refuse = self.refuse_logprobs or script.get("refuse_logprobs")
                        if refuse and message.return_logprob:
                            script = {"steps": [{"text": "", "ids": []}], "finish": _REFUSAL}
                            script["refused"] = True
                    self._answer(message, script)
            except Exception as error:  # reported in the oracle's answer, never swallowed
                self.errors.append(f"{type(error).__name__}: {error}")

    def _answer(self, request: Any, script: dict[str, Any]) -> None:
        from sglang.srt.managers import io_struct as io

        steps = script["steps"]
        prompt_tokens = len(request.input_ids or [])
        done = 0
        for k, step in enumerate(steps):
            ids = list(step["ids"])
            done += len(ids)
            last = k == len(steps) - 1
            finish = (script.get("finish") or {"type": "length", "length": done}) if last else None
            # Cumulative per request, as the scheduler reports them; a real scheduler sends them
            # on every output (0 without speculation), and SGLang indexes them unconditionally
            # under a speculative algorithm.
            spec = {
                "spec_verify_ct": [step.get("verify_ct", 0)],
                "spec_num_correct_drafts": [step.get("correct_drafts", 0)],
                "spec_correct_drafts_histogram": [step.get("correct_drafts_histogram", [])],
            }
            logprobs = "logprobs" in step
            # A refused request had return_logprob cleared (set_finish_with_abort), so its batch
            # carries no logprob lists at all (None), as the scheduler's OutputStreamer sends.
            empty: list[Any] | None = None if script.get("refused") else []
            output = batch_output(
                dict(
                    rids=[request.rid],
                    finished_reasons=[finish],
                    output_strs=[step["text"]],
                    output_ids=[array("l", ids)],
                    prompt_tokens=[prompt_tokens],
                    completion_tokens=[done],
                    reasoning_tokens=[0],
                    cached_tokens=[0],
                    input_token_logprobs_val=empty,
                    input_token_logprobs_idx=empty,
                    output_token_logprobs_val=[step["logprobs"]] if logprobs else empty,
                    output_token_logprobs_idx=[ids] if logprobs else empty,
                    input_top_logprobs_val=empty,
                    input_top_logprobs_idx=empty,
                    output_top_logprobs_val=[step.get("top_logprobs", [])] if logprobs else empty,
                    output_top_logprobs_idx=[step.get("top_ids", [])] if logprobs else empty,
                    input_token_ids_logprobs_val=empty,
                    input_token_ids_logprobs_idx=empty,
                    output_token_ids_logprobs_val=empty,
                    output_token_ids_logprobs_idx=empty,
                    output_token_entropy_val=None,
                    output_token_sampling_mask=None,
                    output_hidden_states=None,
                    routed_experts=None,
                    indexer_topk=None,
                    placeholder_tokens_idx=None,
                    placeholder_tokens_val=None,
                    retraction_counts=[0],
                    **spec,
                )
            )
            io.sock_send(self._to_tokenizer, output)
            if not last:
                # A real scheduler streams one decode step at a time; without a pause the
                # TokenizerManager coalesces steps into one chunk (as SGLang does under load).
                time.sleep(self.step_delay_s)


def auto_script(request: Any, *, speculative: bool) -> dict[str, Any]:
    """max_new_tokens words of the tiny vocabulary, chosen by the prompt; two tokens per step
    (one accepted draft + the bonus) on a speculative server, one on an AR server."""
    from tiny_checkpoint import VOCAB

    prompt = list(request.input_ids or [])
    count = int(request.sampling_params.max_new_tokens or 1)
    words = range(6, 12)  # "the" .. "out"
    start = sum(prompt) % len(words)
    ids = [words[(start + i) % len(words)] for i in range(count)]
    per_step = 2 if speculative else 1
    steps: list[dict[str, Any]] = []
    accepted = 0
    for k in range(0, count, per_step):
        chunk = ids[k : k + per_step]
        step: dict[str, Any] = {"text": "".join(" " + VOCAB[i] for i in chunk), "ids": chunk}
        if speculative:  # cumulative, as the scheduler reports them
            accepted += len(chunk) - 1
            step.update(verify_ct=len(steps) + 1, correct_drafts=accepted)
        if request.return_logprob:
            step["logprobs"] = [-0.1] * len(chunk)
            step["top_logprobs"] = [[-0.1, -3.0] for _ in chunk]
            step["top_ids"] = [[i, 6 if i != 6 else 7] for i in chunk]
        steps.append(step)
    return {"steps": steps}


def _internal_state() -> Any:
    """What SGLang's scheduler answers to GetInternalStateReq, less GPU-only state."""
    from sglang.srt.managers.io_struct import GetInternalStateReqOutput

    return GetInternalStateReqOutput(internal_state=internal_state())
