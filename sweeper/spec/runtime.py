"""How the server is started: the `runtime:` section, and the secrets resolved from the
controller's environment at run time (never stored in results or logs)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StrictBool, model_validator

from sweeper.catalog.mapping import EngineMapping
from sweeper.catalog.records import PRESETS, RECORDS, presets_of
from sweeper.spec.base import EnvName, HttpURL, Int, NonEmptyStr, Number, Port, StrictModel
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


#: The engines a spec can drive: the catalog's records, in their order (pydantic's message for
#: another name lists them). A type checker sees plain text: the names are data.
if TYPE_CHECKING:
    EngineName = str
else:
    EngineName = Literal[tuple(RECORDS)]


class SourceSpec(StrictModel):
    """An engine run from a git checkout on its hosts (a SGLang or vLLM fork): its package is
    put first on the server's PYTHONPATH (`sweeper.services.engine_source`)."""

    #: The git work tree on the host (every host of the spec has it at this path).
    repo: NonEmptyStr
    #: The directory of the checkout that goes first on PYTHONPATH: SGLang's `python`, vLLM's
    #: top (`.`).
    path: NonEmptyStr = "."
    #: A commit (full sha) to run instead of the work tree: written with `git archive` beside
    #: the checkout, never touching it (`sweeper bisect` sets it at every step).
    rev: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")] | None = None
    #: A shell command run in a commit's tree (`rev`) before its first start (a build step);
    #: the work tree, run as it is without `rev`, is the user's to build.
    install: NonEmptyStr | None = None

    @model_validator(mode="after")
    def _relative_path(self) -> SourceSpec:
        if self.path.startswith("/") or ".." in self.path.split("/"):
            raise problem(
                "path is a directory inside the checkout (relative, no '..')", at=("path",)
            )
        return self


class RuntimeSpec(StrictModel):
    """How the server is started: engine, model, and what every server config shares."""

    engine: EngineName = "ddtree_runtime"
    #: A built-in parameter mapping (`sweeper.catalog.presets`); each engine has a default or
    #: needs one named.
    preset: NonEmptyStr | None = None
    #: A spec's own mapping for a fork (instead of a preset): where each grid key goes.
    mapping: EngineMapping | None = None
    model: NonEmptyStr = "smollm2-135m"
    draft: NonEmptyStr = "ngram"
    port: Port = 8000
    #: None: the controller's own Python locally, the host's `python` remotely.
    python: NonEmptyStr | None = None
    extra_args: list[str] = Field(default_factory=list)
    #: A speed baseline apart from the exactness one: AR servers started with these
    #: `extra_args` flags changed (`attention_backend: fa3`; null drops the flag, leaving the
    #: engine's default), e.g. the production attention backend where the speculative configs
    #: need another. Points then carry `speed_speedup` against it beside `speedup`.
    speed_baseline: dict[NonEmptyStr, str | None] | None = None
    env: dict[EnvName, str] = Field(default_factory=dict)
    #: Server env var -> controller env var holding the value (`${env:HF_TOKEN}` or `HF_TOKEN`).
    #: Resolved at run time (`resolve_secrets`), never stored in results or logs.
    secrets: dict[EnvName, str] = Field(default_factory=dict)
    ready_timeout_s: Annotated[Number, Field(gt=0)] = 300.0
    #: Switch server configs in place where the engine can (`sweeper.plan.loads`): one load
    #: per group of configs that differ only in knobs it switches; off loads every config.
    inplace: StrictBool = True
    device: NonEmptyStr | None = None
    dtype: NonEmptyStr | None = None
    max_batch: Annotated[Int, Field(ge=1)] | None = None
    max_model_len: Annotated[Int, Field(ge=1)] | None = None
    #: engine openai: the running endpoint to measure (the sweeper starts nothing).
    base_url: HttpURL | None = None
    #: engine openai: a second endpoint serving the same model without speculation, the AR
    #: baseline its outputs are judged against.
    baseline_url: HttpURL | None = None
    #: An earlier run directory whose AR points serve as the baseline: an endpoint's (engine
    #: openai), or a trusted runtime's for any engine, so a fault the run's own AR path shares
    #: (budget 0 runs through the same verify) cannot hide; the run's own AR points are then
    #: judged against it too.
    baseline_run: NonEmptyStr | None = None
    #: engine ddtree_runtime: a directory holding a `ddtree_runtime` package (a patched copy)
    #: that is THE runtime of this run: what `python -m ddtree_runtime` imports locally, the
    #: bundle deployed to SSH hosts, and the source hash the manifest names. Relative to the
    #: spec file; `load_spec` makes it absolute and checks the package is there.
    package: NonEmptyStr | None = None
    #: Engines that run their own code (SGLang, vLLM): a git checkout on the hosts to run
    #: instead of the installed package.
    source: SourceSpec | None = None

    @model_validator(mode="after")
    def _check_engine_and_secrets(self) -> RuntimeSpec:
        self._check_mapping()
        self._check_endpoint()
        for name, reference in self.secrets.items():
            try:
                secret_source(reference)
            except ValueError as exc:
                raise problem(str(exc), at=("secrets", name)) from None
            if name in self.env:
                raise problem(f"{name!r} is both in env and in secrets", at=("secrets", name))
        return self

    def _check_mapping(self) -> None:
        if self.preset is not None and self.mapping is not None:
            raise problem("give a preset or a mapping, not both", at=("mapping",))
        record = RECORDS[self.engine]
        if not record.launched:
            for key in ("preset", "mapping"):
                if getattr(self, key) is not None:
                    message = f"engine {self.engine!r} starts no server, so it takes no {key}"
                    raise problem(message, at=(key,))
            return
        if self.preset is not None:
            owner = PRESETS.get(self.preset, (None, None))[0]
            if owner != self.engine:
                known = ", ".join(presets_of(self.engine)) or "none"
                message = f"unknown preset {self.preset!r} for engine {self.engine!r} ({known})"
                raise problem(message, at=("preset",))
        elif self.mapping is None and record.default_preset is None:
            known = ", ".join(presets_of(self.engine))
            raise problem(f"engine {self.engine!r} needs a preset ({known}) or a mapping")

    def _check_endpoint(self) -> None:
        record = RECORDS[self.engine]
        endpoint = not record.launched
        if endpoint and self.base_url is None:
            message = f"engine {self.engine!r} needs base_url (the running endpoint to measure)"
            raise problem(message)
        for key in ("base_url", "baseline_url"):
            if not endpoint and getattr(self, key) is not None:
                message = f"{key} is for an endpoint the sweeper does not start (engine 'openai')"
                raise problem(message, at=(key,))
        if self.baseline_url is not None and self.baseline_run is not None:
            raise problem("give baseline_url or baseline_run, not both", at=("baseline_run",))
        if self.package is not None and not record.runs_bundled_runtime:
            message = f"package is the bundled runtime's; engine {self.engine!r} runs its own code"
            raise problem(message, at=("package",))
        if self.source is not None and (record.runs_bundled_runtime or not record.launched):
            message = (
                "source is for engines that run their own code (sglang, vllm); the bundled "
                "runtime's source is runtime.package"
                if record.launched
                else f"engine {self.engine!r} starts no server, so it runs no source"
            )
            raise problem(message, at=("source",))

    def engine_mapping(self) -> EngineMapping | None:
        """The parameter mapping in force: the spec's own, its preset, or the engine's default."""
        if self.mapping is not None:
            return self.mapping
        name = self.preset or RECORDS[self.engine].default_preset
        return PRESETS[name][1] if name else None


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
