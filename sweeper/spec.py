"""The sweep spec: the YAML schema (pydantic, unknown keys refused) and its loading.

`load_spec(path)` reads a YAML file and returns a validated `Spec`, or raises one `SpecError` that
lists every problem as `file:line: field.path: message`. Line numbers come from PyYAML's composer
(`sweeper/yaml_lines.py`), so a pydantic error location maps back to the line the user must edit;
`sweeper/spec_errors.py` words the errors (unknown keys with a suggestion). Values that would make
a sweep meaningless (negative temperature, budget < 0, block size < 2, an empty grid list, a
missing prompts file...) are refused here, before anything starts.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from sweeper.spec_errors import (
    SpecError,
    SpecIssue,
    error_loc,
    error_message,
    problem,
    suggest,
)
from sweeper.yaml_lines import YamlLines

SLUG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Port = Annotated[StrictInt, Field(ge=1, le=65535)]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]

#: Where the `local` host shorthand and the default `hosts` point.
LOCAL_HOST_NAME = "local"


class StrictModel(BaseModel):
    """Base of every spec model: unknown keys are errors (`extra_forbidden`), which `_issue`
    words as "unknown key 'x' (did you mean 'y'?)" using the model found at the error's location.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


# --- hosts --------------------------------------------------------------------------------------


class LocalHostSpec(StrictModel):
    """This machine: the runtime runs as a managed local process."""

    kind: Literal["local"] = "local"
    name: Slug = LOCAL_HOST_NAME


class SSHHostSpec(StrictModel):
    """A remote host reached over SSH; the runtime runs there as a systemd unit."""

    kind: Literal["ssh"] = "ssh"
    name: Slug
    #: Host name, IP address, or an alias resolved through ~/.ssh/config.
    address: NonEmptyStr
    #: None: from ~/.ssh/config, else 22.
    port: Port | None = None
    user: NonEmptyStr | None = None
    key_file: NonEmptyStr | None = None
    #: direct: the controller reaches the runtime's port on `address`; tunnel: through SSH.
    access: Literal["direct", "tunnel"] = "direct"
    remote_root: NonEmptyStr = "/opt/ddtree-sweeper"
    #: The host's Python that runs the bundled runtime.
    python: NonEmptyStr = "python3"
    #: Use sudo for systemctl and unit files when the user is not root.
    sudo: StrictBool = False
    #: Strict host-key checking is the default; this accepts (and records) an unknown key once.
    accept_new_host_key: StrictBool = False
    known_hosts: NonEmptyStr | None = None
    connect_timeout_s: Annotated[float, Field(gt=0)] = 15.0

    @field_validator("remote_root")
    @classmethod
    def _absolute_root(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("remote_root must be an absolute path")
        return value


HostSpec = Annotated[LocalHostSpec | SSHHostSpec, Field(discriminator="kind")]


def _host_shorthand(item: Any, index: int) -> Any:
    """`local` (a string) means the local host; a mapping without `kind` is an SSH host."""
    if item == LOCAL_HOST_NAME:
        return {"kind": "local"}
    if isinstance(item, str):
        message = f"a host given as a string must be {LOCAL_HOST_NAME!r}; got {item!r}"
        raise problem(message, at=(index,))
    if isinstance(item, dict) and "kind" not in item:
        return {"kind": "ssh", **item}
    return item


# --- runtime ------------------------------------------------------------------------------------

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


# --- grid ---------------------------------------------------------------------------------------

#: Keys of the grid that change what a request asks for; never a restart.
REQUEST_KEYS = ("temperature", "top_p")
#: Keys of the grid that the runtime is started with; each distinct combination is a restart.
SERVER_KEYS = ("budget", "topk", "block_size", "cuda_graph")
#: Flags decided by the sweeper itself for each launch; a grid cannot set them.
RESERVED_FLAGS = ("host", "port", "launch_id", "speculative")
_FLAG_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _same_value(a: Any, b: Any) -> bool:
    """Equal and of the same kind: True and 1 are different grid values."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _dashed(name: str) -> str:
    return name.replace("_", "-")


class GridSpec(BaseModel):
    """Lists whose product is the sweep. Other runtime flags may be added as lists too.

    `exclude` drops grid points matching every key of a rule (a rule value may be a list of
    alternatives); `include` adds points: missing keys take every value of the grid's list.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    budget: list[Annotated[StrictInt, Field(ge=0)]] = Field(
        default_factory=lambda: [16], min_length=1
    )
    topk: list[Annotated[StrictInt, Field(ge=1)]] = Field(default_factory=lambda: [4], min_length=1)
    block_size: list[Annotated[StrictInt, Field(ge=2)]] = Field(
        default_factory=lambda: [8], min_length=1
    )
    cuda_graph: list[StrictBool] = Field(default_factory=lambda: [False], min_length=1)
    temperature: list[Annotated[float, Field(ge=0)]] = Field(
        default_factory=lambda: [0.0], min_length=1
    )
    top_p: list[Annotated[float, Field(gt=0, le=1)]] | None = Field(default=None, min_length=1)
    exclude: list[dict[str, Any]] = Field(default_factory=list)
    include: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _check_extra_flags(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        known = [k for k in cls.model_fields]
        for key, values in data.items():
            if key in known:
                continue
            if not isinstance(key, str) or difflib.get_close_matches(key, known, n=1, cutoff=0.75):
                raise problem(suggest(str(key), known), at=(key,))
            if key in RESERVED_FLAGS:
                raise problem(
                    f"{key!r} is set by the sweeper for each launch, not in the grid", at=(key,)
                )
            if not _FLAG_NAME.match(key):
                raise problem(
                    f"runtime flag {key!r} must be snake_case (it becomes --{_dashed(key)})",
                    at=(key,),
                )
            if not isinstance(values, list) or not values:
                raise problem(f"grid value for {key!r} must be a non-empty list", at=(key,))
            for index, value in enumerate(values):
                if value is None or not isinstance(value, (bool, int, float, str)):
                    raise problem(
                        "a runtime flag value must be a number, a string or a bool", at=(key, index)
                    )
        return data

    @model_validator(mode="after")
    def _check_rules(self) -> GridSpec:
        keys = self.keys()
        for key in keys:
            if key == "concurrency":
                continue
            values = self.values(key)
            for index, value in enumerate(values):
                if any(_same_value(value, earlier) for earlier in values[:index]):
                    raise problem(f"duplicate value {value!r}", at=(key, index))
        for rule_kind in ("exclude", "include"):
            for index, rule in enumerate(getattr(self, rule_kind)):
                if not rule:
                    raise problem("an empty rule matches everything", at=(rule_kind, index))
                for key, value in rule.items():
                    if key not in keys:
                        raise problem(suggest(key, keys), at=(rule_kind, index, key))
                    self._check_rule_value(key, value, at=(rule_kind, index, key))
        return self

    def _check_rule_value(self, key: str, value: Any, at: tuple[str | int, ...]) -> None:
        values = value if isinstance(value, list) else [value]
        if not values:
            raise problem("an empty list matches nothing", at=at)
        field = type(self).model_fields.get(key)
        if key == "concurrency":
            field = WorkloadSpec.model_fields["concurrency"]
        if field is None:  # an extra runtime flag: same shape check as the grid's own list
            if any(v is None or not isinstance(v, (bool, int, float, str)) for v in values):
                raise problem("a runtime flag value must be a number, a string or a bool", at=at)
            return
        try:
            TypeAdapter(field.annotation or Any).validate_python(values)
        except ValidationError as exc:
            raise problem(exc.errors()[0]["msg"], at=at) from None

    def extra_flags(self) -> dict[str, list[Any]]:
        """Runtime flags beyond the named ones, in spec order: name -> values."""
        return dict(self.model_extra or {})

    def keys(self) -> list[str]:
        """Every key a rule may name: the named parameters, concurrency, the extra runtime flags."""
        return [*SERVER_KEYS, *REQUEST_KEYS, "concurrency", *self.extra_flags()]

    def values(self, key: str) -> list[Any]:
        """The grid's list for `key` ([None] for an unset optional request key like top_p)."""
        if key in self.extra_flags():
            return list(self.extra_flags()[key])
        value = getattr(self, key)
        return [None] if value is None else list(value)


# --- workload -----------------------------------------------------------------------------------


class Message(StrictModel):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    content: str


class PromptSpec(StrictModel):
    """A prompt: `text` (completions, or one user message for chat) or chat `messages`."""

    id: Slug
    text: str | None = None
    messages: list[Message] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_form(self) -> PromptSpec:
        if (self.text is None) == (self.messages is None):
            raise problem("a prompt needs exactly one of 'text' or 'messages'")
        return self


class WorkloadSpec(StrictModel):
    """What is sent to every point: prompts x repeats at each concurrency level."""

    prompts: list[PromptSpec] = Field(default_factory=list)
    #: JSONL of prompts, relative to the spec file; `load_spec` appends them to `prompts`.
    prompts_file: NonEmptyStr | None = None
    api: Literal["chat", "completions"] = "chat"
    max_tokens: Annotated[StrictInt, Field(ge=1)] = 64
    repeats: Annotated[StrictInt, Field(ge=1)] = 1
    concurrency: list[Annotated[StrictInt, Field(ge=1)]] = Field(
        default_factory=lambda: [1], min_length=1
    )
    #: Requests sent and discarded after each restart, before measuring.
    warmup: Annotated[StrictInt, Field(ge=0)] = 1
    #: Sampling seed sent with every request (temperature > 0 repeats must then be identical).
    seed: StrictInt | None = None

    @model_validator(mode="after")
    def _check_prompts(self) -> WorkloadSpec:
        if not self.prompts and self.prompts_file is None:
            raise problem("the workload needs 'prompts' or 'prompts_file'")
        seen: set[str] = set()
        for index, prompt in enumerate(self.prompts):
            if prompt.id in seen:
                raise problem(f"duplicate prompt id {prompt.id!r}", at=("prompts", index, "id"))
            seen.add(prompt.id)
        for index, level in enumerate(self.concurrency):
            if level in self.concurrency[:index]:
                raise problem(f"duplicate concurrency level {level}", at=("concurrency", index))
        if self.api == "completions":
            for index, prompt in enumerate(self.prompts):
                if prompt.messages is not None:
                    message = "chat messages need api: chat (completions takes 'text')"
                    raise problem(message, at=("prompts", index, "messages"))
        return self


# --- determinism --------------------------------------------------------------------------------


class DeterminismSpec(StrictModel):
    """When a difference from the AR baseline is numerics and when it is a bug."""

    #: A divergence where the baseline's top-1 minus top-2 logprob is below this is a near tie.
    near_tie_margin: Annotated[float, Field(ge=0)] = 0.05
    #: Output is garbled when its garble score exceeds the baseline's by more than this...
    garble_margin: Annotated[float, Field(ge=0, le=1)] = 0.15
    #: ...and is at least this (so clean text that differs a little is never "garbled").
    garble_min_score: Annotated[float, Field(ge=0, le=1)] = 0.2
    #: Characters of text shown either side of a divergence.
    excerpt_chars: Annotated[StrictInt, Field(ge=1)] = 40


# --- the spec -----------------------------------------------------------------------------------


def _local_only() -> list[LocalHostSpec | SSHHostSpec]:
    return [LocalHostSpec()]


class Spec(StrictModel):
    """A whole sweep: where, what runtime, which grid, which workload, how to judge it."""

    name: Slug
    hosts: list[HostSpec] = Field(default_factory=lambda: _local_only(), min_length=1)
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    grid: GridSpec = Field(default_factory=GridSpec)
    #: Add the autoregressive server config (speculative none); it runs first on each host.
    baseline: StrictBool = True
    workload: WorkloadSpec
    determinism: DeterminismSpec = Field(default_factory=DeterminismSpec)
    #: Split the speculative server configs round-robin between (identical) hosts.
    shard: StrictBool = False
    #: Leave the last server config running at the end instead of stopping it.
    leave_running: StrictBool = False

    @field_validator("hosts", mode="before")
    @classmethod
    def _expand_host_shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [_host_shorthand(item, index) for index, item in enumerate(value)]
        return value

    @model_validator(mode="after")
    def _unique_hosts(self) -> Spec:
        seen: set[str] = set()
        for index, host in enumerate(self.hosts):
            if host.name in seen:
                raise problem(f"duplicate host name {host.name!r}", at=("hosts", index))
            seen.add(host.name)
        return self


# --- loading ------------------------------------------------------------------------------------


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read, validate and resolve a spec file; raise `SpecError` listing every problem."""
    spec_path = Path(path)
    try:
        text = spec_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(
            [SpecIssue(str(spec_path), None, "", f"cannot read spec: {exc.strerror}")]
        ) from None
    return parse_spec(text, source=str(spec_path), base_dir=spec_path.parent)


def parse_spec(text: str, *, source: str = "<spec>", base_dir: Path | None = None) -> Spec:
    """Validate spec text; `base_dir` resolves `prompts_file` (default: the current directory)."""
    lines = YamlLines.parse(text, source)
    data = lines.data
    if not isinstance(data, dict):
        raise SpecError(
            [SpecIssue(source, 1, "", "a spec must be a YAML mapping (key: value lines)")]
        )
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        issues = [_issue(lines, error) for error in exc.errors()]
        raise SpecError(sorted(issues, key=lambda issue: issue.line or 0)) from None
    if spec.workload.prompts_file is not None:
        spec = _with_prompts_file(spec, lines, base_dir or Path.cwd())
    return spec


def _issue(lines: YamlLines, error: Any) -> SpecIssue:
    line, field = lines.locate(error_loc(error))
    return SpecIssue(lines.source, line, field, error_message(error, Spec))


def _with_prompts_file(spec: Spec, lines: YamlLines, base_dir: Path) -> Spec:
    """Append the prompts of the JSONL file (relative to the spec) to the inline prompts."""
    at = ("workload", "prompts_file")
    line, field = lines.locate(at)
    assert spec.workload.prompts_file is not None
    path = (base_dir / spec.workload.prompts_file).resolve()
    try:
        raw_lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SpecError(
            [
                SpecIssue(
                    lines.source,
                    line,
                    field,
                    f"cannot read prompts file {str(path)!r}: {exc.strerror}",
                )
            ]
        ) from None
    prompts = list(spec.workload.prompts)
    issues: list[SpecIssue] = []
    for number, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            prompts.append(PromptSpec.model_validate(json.loads(raw)))
        except json.JSONDecodeError as exc:
            issues.append(SpecIssue(str(path), number, "", f"not JSON: {exc.msg}"))
        except ValidationError as exc:
            for error in exc.errors():
                where = ".".join(str(part) for part in error_loc(error))
                message = error_message(error, PromptSpec)
                issues.append(SpecIssue(str(path), number, where, message))
    if not prompts and not issues:
        issues.append(
            SpecIssue(lines.source, line, field, f"prompts file {str(path)!r} has no prompts")
        )
    if issues:
        raise SpecError(issues)
    workload = spec.workload.model_dump()
    workload.update(prompts=[p.model_dump() for p in prompts], prompts_file=str(path))
    try:
        return spec.model_copy(update={"workload": WorkloadSpec.model_validate(workload)})
    except ValidationError as exc:
        raise SpecError(
            [SpecIssue(str(path), None, "", error["msg"]) for error in exc.errors()]
        ) from None


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema of a spec file (what `sweeper schema` prints)."""
    return Spec.model_json_schema()


__all__ = [
    "DeterminismSpec",
    "GridSpec",
    "HostSpec",
    "LocalHostSpec",
    "Message",
    "PromptSpec",
    "REQUEST_KEYS",
    "RuntimeSpec",
    "SERVER_KEYS",
    "SSHHostSpec",
    "Spec",
    "SpecError",
    "SpecIssue",
    "WorkloadSpec",
    "load_spec",
    "parse_spec",
    "resolve_secrets",
    "secret_source",
    "spec_json_schema",
]
