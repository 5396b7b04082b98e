"""A scripted scheduler + detokenizer behind SGLang's real TokenizerManager (SGLang Python).

SGLang's HTTP process hands each request to its scheduler over ZMQ (`TokenizedGenerateReqInput`)
and reads results back from its detokenizer (`BatchStrOutput`). This thread sits on both sockets,
speaking SGLang's own message types through its own `sock_send`/`sock_recv`, so everything above
it (routes, request models, serving_chat/serving_completions, the TokenizerManager's meta_info,
logprob and speculative-metric bookkeeping) is SGLang's code. What it answers is a script: per
generate request, the steps a real scheduler would stream (text delta, token ids, logprobs,
cumulative verify count and accepted drafts). It also answers GetInternalStateReq the way
SGLang's scheduler does (`InternalStateMixin.get_internal_state`), less the GPU-only parts.
"""

from __future__ import annotations

import queue
import threading
import time
from array import array
from typing import Any


class ScriptedScheduler:
    """Plays the scheduler and the detokenizer for one TokenizerManager (see module docstring)."""

    def __init__(self, port_args: Any, *, step_delay_s: float = 0.05) -> None:
        import zmq
        from sglang.srt.utils.network import get_zmq_socket

        self._context = zmq.Context(2)
        self._from_tokenizer = get_zmq_socket(
            self._context, zmq.PULL, port_args.scheduler_input_ipc_name, False
        )
        self._to_tokenizer = get_zmq_socket(
            self._context, zmq.PUSH, port_args.tokenizer_ipc_name, False
        )
        self._scripts: queue.Queue[dict[str, Any]] = queue.Queue()
        self.step_delay_s = step_delay_s
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
                elif isinstance(message, io.TokenizedGenerateReqInput):
                    if str(message.rid).startswith(HEALTH_CHECK_RID_PREFIX):
                        script: dict[str, Any] = {"steps": [{"text": "the", "ids": [6]}]}
                    else:
                        self.received.append(message)
                        script = self._scripts.get_nowait()
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
            output = io.BatchStrOutput(
                rids=[request.rid],
                finished_reasons=[finish],
                output_strs=[step["text"]],
                output_ids=[array("l", ids)],
                prompt_tokens=[prompt_tokens],
                completion_tokens=[done],
                reasoning_tokens=[0],
                cached_tokens=[0],
                input_token_logprobs_val=[],
                input_token_logprobs_idx=[],
                output_token_logprobs_val=[step["logprobs"]] if logprobs else [],
                output_token_logprobs_idx=[ids] if logprobs else [],
                input_top_logprobs_val=[],
                input_top_logprobs_idx=[],
                output_top_logprobs_val=[step.get("top_logprobs", [])] if logprobs else [],
                output_top_logprobs_idx=[step.get("top_ids", [])] if logprobs else [],
                input_token_ids_logprobs_val=[],
                input_token_ids_logprobs_idx=[],
                output_token_ids_logprobs_val=[],
                output_token_ids_logprobs_idx=[],
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
            io.sock_send(self._to_tokenizer, output)
            if not last:
                # A real scheduler streams one decode step at a time; without a pause the
                # TokenizerManager coalesces steps into one chunk (as SGLang does under load).
                time.sleep(self.step_delay_s)


def _internal_state() -> Any:
    """What SGLang's scheduler answers to GetInternalStateReq, less GPU-only state."""
    from sglang.srt.environ import envs, exportable_env_vars
    from sglang.srt.managers.io_struct import GetInternalStateReqOutput
    from sglang.srt.runtime_context import get_context
    from sglang.srt.utils.msgspec_utils import msgspec_to_builtins

    state = get_context().resolved_server_args_dict()
    if envs.SGLANG_EXPOSE_OWN_ENV_VARS.get():
        state["env_vars"] = exportable_env_vars()
    state.pop("custom_sigquit_handler", None)
    return GetInternalStateReqOutput(internal_state=msgspec_to_builtins(state))
