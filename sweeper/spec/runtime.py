"""How the server is started: the `runtime:` section, and the secrets resolved from the
controller's environment at run time (never stored in results or logs)."""

from __future__ import annotations

import os
import re
from typing import Annotated, Literal

from pydantic import Field, StrictInt, model_validator

from sweeper.spec.base import EnvName, NonEmptyStr, Port, StrictModel
from sweeper.spec.errors import problem

_SECRET_REF = re.compile(
    r"^(?:\$\{env:(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))$"
)


def secret_source(reference: str) -> str:
    """The controller environment variable a secret reference names (`${env:X}` or `X`)."""
    match = _SECRET_REF.match(reference)
    if not match:
        raise ValueError(
            f"secret reference {reference!r} must be a variable name or '${{env:NAME}}'"
        )
    return match.group("braced") or match.group("plain")


class RuntimeSpec(StrictModel):
    """How the runtime is started: engine, model, and what every server config shares."""

    engine: Literal["ddtree_runtime", "sglang"] = "ddtree_runtime"
    model: NonEmptyStr = "smollm2-135m"
    draft: NonEmptyStr = "ngram"
    port: Port = 8000
    #: None: the controller's own Python locally, the host's `python` remotely.
    python: NonEmptyStr | None = None
    extra_args: list[str] = Field(default_factory=list)
    env: dict[EnvName, str] = Field(default_factory=dict)
    #: Server env var -> controller env var holding the value (`${env:HF_TOKEN}` or `HF_TOKEN`).
    #: Resolved at run time (`resolve_secrets`), never stored in results or logs.
    secrets: dict[EnvName, str] = Field(default_factory=dict)
    ready_timeout_s: Annotated[float, Field(gt=0)] = 300.0
    device: NonEmptyStr | None = None
    dtype: NonEmptyStr | None = None
    max_batch: Annotated[StrictInt, Field(ge=1)] | None = None
    max_model_len: Annotated[StrictInt, Field(ge=1)] | None = None
    #: engine sglang only: its --speculative-algorithm for speculative configs (e.g. EAGLE3).
    speculative_algorithm: NonEmptyStr | None = None

    @model_validator(mode="after")
    def _check_engine_and_secrets(self) -> RuntimeSpec:
        if self.engine == "sglang" and self.speculative_algorithm is None:
            raise problem(
                "engine 'sglang' needs runtime.speculative_algorithm (e.g. EAGLE3)", at=("engine",)
            )
        if self.engine != "sglang" and self.speculative_algorithm is not None:
            message = "speculative_algorithm is for engine 'sglang' only"
            raise problem(message, at=("speculative_algorithm",))
        for name, reference in self.secrets.items():
            try:
                secret_source(reference)
            except ValueError as exc:
                raise problem(str(exc), at=("secrets", name)) from None
            if name in self.env:
                raise problem(f"{name!r} is both in env and in secrets", at=("secrets", name))
        return self


def resolve_secrets(runtime: RuntimeSpec, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Secret values for the server's environment, read from the controller's environment.

    Raises ValueError naming the missing variables (never their values).
    """
    source = dict(os.environ) if environ is None else environ
    resolved: dict[str, str] = {}
    missing: list[str] = []
    for name, reference in runtime.secrets.items():
        var = secret_source(reference)
        if var in source:
            resolved[name] = source[var]
        else:
            missing.append(var)
    if missing:
        raise ValueError(
            f"secrets need these controller environment variables: {', '.join(missing)}"
        )
    return resolved
