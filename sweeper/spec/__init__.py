"""The sweep spec: the YAML schema (pydantic, unknown keys refused) and its loading.

A spec is plain data: `hosts`, `runtime`, `grid` (+ `exclude` / `include`), `baseline`,
`workload` (with its `load:`), `determinism`, `slo`. Each section's models live in their own
module; `load.py` reads a file into a validated `Spec` with `file:line: field: message` errors.
This package's names are the spec's public interface.
"""

from sweeper.spec.errors import SpecError, SpecIssue
from sweeper.spec.grid import REQUEST_KEYS, SERVER_KEYS, GridSpec
from sweeper.spec.hosts import HostSpec, LocalHostSpec, RemoteHostSpec, SlurmHostSpec, SSHHostSpec
from sweeper.spec.load import load_spec, parse_spec, spec_json_schema
from sweeper.spec.model import DeterminismSpec, Spec
from sweeper.spec.open_loop import LoadSpec, Rate
from sweeper.spec.runtime import RuntimeSpec, resolve_secrets, secret_source
from sweeper.spec.slo import SloSpec
from sweeper.spec.workload import Message, PromptSpec, WorkloadSpec

__all__ = [
    "DeterminismSpec",
    "GridSpec",
    "HostSpec",
    "LoadSpec",
    "LocalHostSpec",
    "Message",
    "PromptSpec",
    "REQUEST_KEYS",
    "Rate",
    "RemoteHostSpec",
    "RuntimeSpec",
    "SERVER_KEYS",
    "SlurmHostSpec",
    "SSHHostSpec",
    "SloSpec",
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
