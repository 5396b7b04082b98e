"""Oracle: parse and resolve server argv lists with SGLang's own code (run by the SGLang Python).

stdin:  {"cases": [{"name": str, "argv": [str, ...], "env": {str: str}}],
         "draft_block_size": int | null}
stdout: {"sglang_version": str, "cases": [{"name", "ok", "error_type", "error", "requested",
         "resolved", "overridden", "not_fields", "warnings", "server_info"}]}

Each argv goes through `prepare_server_args` (what `python -m sglang.launch_server` calls) and
`ServerArgs.resolve_once()`, under the case's environment variables. The placeholders
"{target}" and "{draft}" in an argv become tiny local checkpoints (tiny_checkpoint.py): the
resolver reads both config.json files, and a test host has no hub access. The answer says:
- requested: each flag present in the argv as its argparse dest and parsed value;
- resolved: `resolved_dict()`, the values SGLang runs with (and reports in /server_info);
- overridden: requested fields whose resolved value differs, {dest: {requested, resolved}};
- not_fields: requested dests that are not ServerArgs fields (deprecated spellings);
- warnings: what SGLang logged at WARNING or above while parsing (deprecated flags) and
  resolving (overrides);
- server_info: `build_server_info` as /server_info builds it, less the live scheduler state.
A case SGLang rejects (argparse exit, ValueError in resolution) is ok=false with the error.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tiny_checkpoint import write_target_and_draft


class _Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(re.sub(r"\x1b\[[0-9;]*m", "", record.getMessage()))


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """The case's variables on top of the process's; everything restored afterwards, since
    SGLang's resolution itself writes variables (e.g. SGLANG_USE_CUDA_IPC_TRANSPORT=0) that
    would otherwise leak into the next case."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _requested(parser: Any, argv: list[str], server_args: Any) -> dict[str, Any]:
    """argparse dest -> the value SGLang parsed, for every option that appears in argv."""
    requested = {}
    for token in argv:
        action = parser._option_string_actions.get(token.split("=", 1)[0])
        if action is not None:
            requested[action.dest] = getattr(server_args, action.dest, None)
    return requested


def _plain(value: Any) -> Any:
    from sglang.srt.utils.msgspec_utils import msgspec_to_builtins

    return json.loads(json.dumps(msgspec_to_builtins(value), default=str))


def resolve_case(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """One argv through SGLang's parser and resolver; see the module docstring."""
    import argparse

    from sglang.srt.server_args import ServerArgs, prepare_server_args
    from sglang.srt.utils.common import build_server_info

    captured = _Captured()
    answer: dict[str, Any] = {"ok": False, "error_type": None, "error": None}
    # On the "sglang" logger, not the root: prepare_server_args resets the root's handlers.
    sglang_logger = logging.getLogger("sglang")
    sglang_logger.addHandler(captured)
    try:
        with _environment(env):
            parser = argparse.ArgumentParser(prog="sglang serve")
            ServerArgs.add_cli_args(parser)
            stderr = io.StringIO()
            try:
                with contextlib.redirect_stderr(stderr):
                    server_args = prepare_server_args(argv)
            except SystemExit:
                answer.update(error_type="ArgumentError", error=stderr.getvalue().strip())
                return answer
            answer["requested"] = _plain(_requested(parser, argv, server_args))
            try:
                server_args.resolve_once()
            except Exception as error:  # the resolver's refusals: ValueError, assert, ...
                answer.update(error_type=type(error).__name__, error=str(error))
                return answer
            resolved = _plain(server_args.resolved_dict())
    finally:
        sglang_logger.removeHandler(captured)
    answer.update(
        ok=True,
        resolved=resolved,
        overridden={
            dest: {"requested": value, "resolved": resolved[dest]}
            for dest, value in answer["requested"].items()
            if dest in resolved and resolved[dest] != value
        },
        not_fields=sorted(dest for dest in answer["requested"] if dest not in resolved),
        warnings=captured.messages,
        server_info=_plain(build_server_info(server_args, {})),
    )
    return answer


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # SGLang prints; only our JSON goes to the real stdout
    request = json.load(sys.stdin)
    import sglang

    with tempfile.TemporaryDirectory(prefix="sglang-oracle-") as tmp:
        target, draft = write_target_and_draft(
            Path(tmp), draft_block_size=request.get("draft_block_size", 16)
        )
        cases = []
        for case in request["cases"]:
            argv = [
                arg.replace("{target}", str(target)).replace("{draft}", str(draft))
                for arg in case["argv"]
            ]
            cases.append({"name": case.get("name"), **resolve_case(argv, case.get("env", {}))})
    json.dump({"sglang_version": sglang.__version__, "cases": cases}, out)


if __name__ == "__main__":
    main()
