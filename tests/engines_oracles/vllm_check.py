"""vLLM's own code as an oracle: resolve server argv offline, without starting a server.

Run by the vLLM venv's Python (``.venv-vllm/bin/python tests/engines_oracles/vllm_check.py``), JSON
on stdin, JSON on stdout. Each case's argv (the arguments after
``python -m vllm.entrypoints.openai.api_server``) goes through the same steps vLLM's server runs
before it loads a model: its argument parser (``make_arg_parser``), ``validate_parsed_serve_args``,
``AsyncEngineArgs.from_cli_args`` and ``create_engine_config``, which builds and validates
``SpeculativeConfig`` (pydantic, unknown keys forbidden) against the target's local config.json.
Environment variables of a case are set while it resolves (vLLM reads some, such as
VLLM_CPU_KVCACHE_SPACE, during resolution). Hub names are not fetched: HF_HUB_OFFLINE is set.

Input:  {"cases": [{"name": "ngram-k4", "argv": ["--model", DIR, ...], "env": {"K": "V"}}]}
Output: {"vllm_version": ..., "speculative_methods": [...], "speculative_fields": [...],
         "results": [{"name", "ok", "stage", "error", "resolved", "system_fingerprint"}]}
``resolved`` holds what vLLM made of the request (dtype, enforce_eager, KV bytes, attention
backend, every scalar SpeculativeConfig field); ``system_fingerprint`` is the string the server
puts on every response (``vllm-<version>-<compute_hash()[:8]>``), so a running server can be
compared with the request. Logs go to stderr; stdout carries only the JSON.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import io
import json
import os
import sys
import typing
from collections.abc import Iterator
from typing import Any


def _flatten_literal(tp: Any) -> list[str]:
    """All string values of a (nested) typing.Literal / Union."""
    out: list[str] = []
    for arg in typing.get_args(tp):
        if isinstance(arg, str):
            out.append(arg)
        else:
            out.extend(_flatten_literal(arg))
    return out


def _plain(value: Any) -> Any:
    """A JSON value for a config field, or a marker for objects the oracle does not expand."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return f"<{type(value).__name__}>"


@contextlib.contextmanager
def _environ(overrides: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in overrides}
    os.environ.update(overrides)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def resolve(argv: list[str]) -> dict[str, Any]:
    """One case through vLLM's own parser and config resolution; never raises."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.entrypoints.serve.utils.fingerprint import build_system_fingerprint
    from vllm.usage.usage_lib import UsageContext
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    stage = "parse"
    try:
        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm-api-server"))
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                args = parser.parse_args(argv)
        except SystemExit:  # argparse prints usage + "prog: error: ..." on stderr and exits
            lines = errors.getvalue().strip().splitlines()
            message = next((ln for ln in reversed(lines) if ": error: " in ln), lines[-1:])
            return {"ok": False, "stage": stage, "error": str(message)[-2000:]}
        stage = "validate"
        validate_parsed_serve_args(args)
        stage = "config"
        config = AsyncEngineArgs.from_cli_args(args).create_engine_config(
            usage_context=UsageContext.OPENAI_API_SERVER
        )
    except Exception as exc:  # any refusal by vLLM is the answer, not a crash of the oracle
        return {"ok": False, "stage": stage, "error": f"{type(exc).__name__}: {exc}"[:4000]}
    spec = config.speculative_config
    speculative = None
    if spec is not None:
        speculative = {
            f.name: _plain(getattr(spec, f.name))
            for f in dataclasses.fields(spec)
            if not f.name.startswith(("target_", "draft_model_config", "draft_parallel_config"))
        }
    attention = getattr(config.attention_config, "backend", None)
    mode = getattr(args, "fingerprint_mode", "full")
    return {
        "ok": True,
        "stage": "done",
        "error": None,
        "resolved": {
            "model": config.model_config.model,
            "dtype": str(config.model_config.dtype).removeprefix("torch."),
            "enforce_eager": config.model_config.enforce_eager,
            "max_model_len": config.model_config.max_model_len,
            "kv_cache_memory_bytes": config.cache_config.kv_cache_memory_bytes,
            "attention_backend": _plain(attention),
            "speculative": speculative,
        },
        "system_fingerprint": build_system_fingerprint(
            config, mode, getattr(args, "fingerprint_value", None)
        ),
    }


def main() -> int:
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # vLLM logs and prints on stdout; only the JSON answer goes there
    sys.stdout = sys.stderr
    try:
        request = json.load(sys.stdin)
        cases = request["cases"]
        if not isinstance(cases, list):
            raise TypeError("cases must be a list")
    except (ValueError, KeyError, TypeError) as exc:
        print(json.dumps({"error": f"bad request: {exc}"}), file=real_stdout)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import vllm
    from vllm.config.speculative import SpeculativeConfig, SpeculativeMethod

    results = []
    for case in cases:
        with _environ({str(k): str(v) for k, v in (case.get("env") or {}).items()}):
            result = resolve([str(a) for a in case["argv"]])
        results.append({"name": case.get("name"), **result})
    answer = {
        "vllm_version": vllm.__version__,
        "speculative_methods": sorted(set(_flatten_literal(SpeculativeMethod))),
        "speculative_fields": sorted(f.name for f in dataclasses.fields(SpeculativeConfig)),
        "results": results,
    }
    print(json.dumps(answer, indent=1), file=real_stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
