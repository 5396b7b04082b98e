"""Where SGLang 0.5.15 and 0.5.23 differ in what the serve oracle wires by hand (SGLang Python).

The oracle builds SGLang's HTTP app as its own launch code does, less the scheduler process; the
steps moved between releases. 0.5.23 resolves server args in `resolve_once()` and publishes them
through `runtime_context.publish`; 0.5.15 resolves them in `ServerArgs.__post_init__` and keeps
them in the runtime context's `set_server_args` (`set_global_server_args_for_scheduler`). The
TemplateManager moved from `managers/` to `parser/`. The scheduler's messages gained fields:
`batch_output` fills what the running release declares and nothing else, so a field one release
lacks is never sent to it, and a field it requires but the script lacks fails loudly (msgspec).

`/set_internal_state` is answered by each release's own handler, called on a shim scheduler
(`internal_state_setter`): 0.5.15's `Scheduler.set_internal_state` (scheduler.py:3788, called
unbound; it sets the global server args) and 0.5.23's `SchedulerInternalStateController
.set_internal_state` (scheduler_components/internal_state.py; it overrides the runtime context).
Real: the allow-list, the validation, the statistics reset, where the value lands and the
answer. Shimmed: the `Scheduler` attributes those handlers read, as a scheduler that runs one
scripted request at a time and holds none between messages has them (`max_running_requests` 1,
pipeline size from the args, the args' speculative algorithm, zeroed acceptance counters; on
0.5.23 empty batches and queues, no draft worker, no disaggregation). `internal_state` reads
the value back where GetInternalStateReq's handler does. On 0.5.15 the global args become a copy
of the launch's once the scheduler is built, as a scheduler process's unpickled copy is: a switch
then shows in `/server_info`'s `internal_states` only, never in its top-level (the
TokenizerManager's) fields. 0.5.15's entrypoints and TokenizerManager only set the global args,
never read them, so the HTTP side is unaffected by the swap.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any


def is_new_layout() -> bool:
    """0.5.23's launch steps (resolve_once + publish), not 0.5.15's."""
    from sglang.srt.server_args import ServerArgs

    return hasattr(ServerArgs, "resolve_once")


def server_args_and_templates(argv: list[str]) -> tuple[Any, Any, Any, Any]:
    """(server_args, port_args, tokenizer_manager, template_manager), as SGLang launches them."""
    from sglang.srt.managers.tokenizer_manager import TokenizerManager
    from sglang.srt.server_args import PortArgs, prepare_server_args

    server_args = prepare_server_args(argv)
    if is_new_layout():
        from sglang.srt.parser.template_manager import TemplateManager
        from sglang.srt.runtime_context import get_model, get_serving, publish

        server_args.resolve_once()
        publish(server_args, role="tokenizer")
        model_path = get_model().model_path
        chat_template = get_serving().chat_template
        completion_template = get_serving().completion_template
    else:
        from sglang.srt.managers.template_manager import TemplateManager
        from sglang.srt.server_args import set_global_server_args_for_scheduler

        set_global_server_args_for_scheduler(server_args)
        model_path = server_args.model_path
        chat_template = server_args.chat_template
        completion_template = server_args.completion_template
    port_args = PortArgs.init_new(server_args)
    tokenizer_manager = TokenizerManager(server_args, port_args)
    template_manager = TemplateManager()
    template_manager.initialize_templates(
        tokenizer_manager=tokenizer_manager,
        model_path=model_path,
        chat_template=chat_template,
        completion_template=completion_template,
    )
    return server_args, port_args, tokenizer_manager, template_manager


def internal_state() -> dict[str, Any]:
    """The resolved server args a scheduler reports to GetInternalStateReq, GPU-only parts left
    out (0.5.23: `resolved_server_args_dict` + env vars when exported; 0.5.15: `vars()` of the
    global server args less `model_config`, as `Scheduler.get_internal_state` does)."""
    from sglang.srt.utils.msgspec_utils import msgspec_to_builtins

    if is_new_layout():
        from sglang.srt.environ import envs, exportable_env_vars
        from sglang.srt.runtime_context import get_context

        state = get_context().resolved_server_args_dict()
        if envs.SGLANG_EXPOSE_OWN_ENV_VARS.get():
            state["env_vars"] = exportable_env_vars()
    else:
        from sglang.srt.server_args import get_global_server_args

        state = dict(vars(get_global_server_args()))
        state.pop("model_config", None)
        state = {k: v for k, v in state.items() if not k.startswith("_")}
    state.pop("custom_sigquit_handler", None)
    result: dict[str, Any] = msgspec_to_builtins(state)
    return result


def internal_state_setter(server_args: Any) -> Callable[[Any], Any]:
    """The running release's own SetInternalStateReq handler, bound to a shim scheduler that
    carries only the attributes it reads (see module docstring); one shim per server, so its
    acceptance counters persist between requests as a scheduler's do."""
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    counters = SimpleNamespace(spec_total_num_forward_ct=0, spec_total_num_accept_tokens=0)
    shim = SimpleNamespace(
        max_running_requests=1,  # one scripted request at a time
        spec_algorithm=SpeculativeAlgorithm.from_string(server_args.speculative_algorithm),
        metrics_reporter=counters,
    )
    if is_new_layout():
        from sglang.srt.disaggregation.utils import DisaggregationMode
        from sglang.srt.managers.scheduler_components.internal_state import (
            SchedulerInternalStateController,
        )

        # What `_has_active_sampling_mask_request` scans: nothing is queued between messages.
        shim.__dict__.update(
            running_batch=None,
            last_batch=None,
            waiting_queue=[],
            grammar_manager=SimpleNamespace(grammar_queue=[]),
            chunked_req=None,
            disaggregation_mode=DisaggregationMode.NULL,
            draft_worker=None,
        )
        controller = SchedulerInternalStateController(shim, record_step_time=False)
        return controller.set_internal_state
    from sglang.srt.managers.scheduler import Scheduler
    from sglang.srt.server_args import set_global_server_args_for_scheduler

    # The scheduler's own copy, as its process sets the args it unpickles (model_runner.py:535);
    # the TokenizerManager set its own object global when it was built.
    set_global_server_args_for_scheduler(copy.deepcopy(server_args))
    shim.ps = SimpleNamespace(pp_size=server_args.pp_size)
    return lambda request: Scheduler.set_internal_state(shim, request)


def batch_output(fields: dict[str, Any]) -> Any:
    """A BatchStrOutput of the running release from `fields`, keeping the ones it declares."""
    from sglang.srt.managers.io_struct import BatchStrOutput

    declared = set(BatchStrOutput.__struct_fields__)
    return BatchStrOutput(**{k: v for k, v in fields.items() if k in declared})
