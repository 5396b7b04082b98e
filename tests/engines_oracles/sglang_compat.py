"""Where SGLang 0.5.15 and 0.5.23 differ in what the serve oracle wires by hand (SGLang Python).

The oracle builds SGLang's HTTP app as its own launch code does, less the scheduler process; the
steps moved between releases. 0.5.23 resolves server args in `resolve_once()` and publishes them
through `runtime_context.publish`; 0.5.15 resolves them in `ServerArgs.__post_init__` and keeps
them in the runtime context's `set_server_args` (`set_global_server_args_for_scheduler`). The
TemplateManager moved from `managers/` to `parser/`. The scheduler's messages gained fields:
`batch_output` fills what the running release declares and nothing else, so a field one release
lacks is never sent to it, and a field it requires but the script lacks fails loudly (msgspec).
"""

from __future__ import annotations

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


def batch_output(fields: dict[str, Any]) -> Any:
    """A BatchStrOutput of the running release from `fields`, keeping the ones it declares."""
    from sglang.srt.managers.io_struct import BatchStrOutput

    declared = set(BatchStrOutput.__struct_fields__)
    return BatchStrOutput(**{k: v for k, v in fields.items() if k in declared})
