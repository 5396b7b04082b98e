"""The run's manifest (`manifest.json`: what was run, with which code, where, when, how far it
got; each host's facts and how each server config's instance was proven), and reading rows
written before the `mode` column existed. The rows themselves are `records.py`'s.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sweeper.results.loads import LoadRecord

#: The engine of a run whose spec names none (the spec's default before `runtime.engine`).
DEFAULT_ENGINE = "ddtree_runtime"


def legacy_mode(engine_column: Any) -> str:
    """The `mode` of a row written before the column existed, when `engine` said ar|ddtree."""
    return "ar" if str(engine_column) == "ar" else "speculative"


def upgrade_legacy_row(row: dict[str, Any], engine: str) -> dict[str, Any]:
    """A row written before `mode` existed, in today's columns (`engine` names the engine)."""
    if "mode" in row:
        return row
    return {**row, "engine": engine, "mode": legacy_mode(row.get("engine"))}


RunStatus = Literal["running", "complete", "failed", "interrupted"]


class HostFacts(BaseModel):
    """What the run learned about one host and the runtime it served."""

    model_config = ConfigDict(extra="allow")

    name: str
    address: str = ""
    runtime_version: str | None = None
    reported_source_hash: str | None = None
    model: dict[str, Any] = Field(default_factory=dict)
    device: str | None = None
    #: The engine that served there (`runtime.engine`).
    engine: str | None = None
    #: Content hash of the runtime bundle deployed there (SSH hosts; None when run in place).
    bundle_sha256: str | None = None
    #: The machine the sweeper itself ran on.
    controller: str | None = None
    #: uname, cpus, mem_total as the host reports them.
    system: dict[str, str] = Field(default_factory=dict)


#: How a server was sent the written prompts: an identity's `capabilities.details.prompt`
#: (SGLang's negotiation names it, `sweeper.engines.sglang_negotiate`; the report shows it).
PROMPT_TOKENIZE = "input_ids from /tokenize"
PROMPT_CHAT_ROUTE = "input_ids from the chat route (return_prompt_token_ids)"
PROMPT_TEXT = "text"
PROMPT_MESSAGES = "chat messages (the server's chat template)"
#: Chat messages as `role: content` lines: NOT the model's chat template, so the acceptance
#: measured is not that of chat use (only exactness and relative speed are comparable).
PROMPT_PLAIN_CHAT = "chat messages as plain text (no /tokenize)"


class IdentityRecord(BaseModel):
    """How a server config's instance was proven to be the one requested, and what was not."""

    model_config = ConfigDict(extra="allow")

    fingerprint: str | None = None
    pid: int | None = None
    proven: list[str] = Field(default_factory=list)
    unproven: list[str] = Field(default_factory=list)
    #: What the server gives and the paths chosen, with the probes' evidence
    #: (`sweeper.engines.capabilities.Capabilities.to_dict`); None before negotiation.
    capabilities: dict[str, Any] | None = None
    #: How the config came to be served: a `load` (a fresh process) or an in-place `switch`
    #: of the process serving the config before it (`sweeper.plan.loads`).
    served_by: Literal["load", "switch"] = "load"
    #: Why a switch the plan allowed was refused at run time, so the config was loaded.
    switch_refused: str | None = None


class Manifest(BaseModel):
    """`manifest.json`: what was run, with which code, where, when, and how far it got."""

    sweep: str
    run_id: str
    sweeper_version: str
    spec_path: str | None = None
    spec: dict[str, Any]
    runtime_source_hash: str
    #: The git commit the runtime package's source is at (`<sha>`, `<sha>-dirty`), None when
    #: it is not in a git work tree: what a nightly regression is bisected between.
    runtime_commit: str | None = None
    hosts: dict[str, HostFacts] = Field(default_factory=dict)
    #: "<host>/<server config label>" -> how its (latest) instance was proven.
    identities: dict[str, IdentityRecord] = Field(default_factory=dict)
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    resumed_at: list[str] = Field(default_factory=list)
    status: RunStatus = "running"
    exit_code: int | None = None
    #: Why a failed run stopped (a host's error, the disk full...), None otherwise.
    error: str | None = None
    points_total: int = 0
    points_done: int = 0
    points_ok: int = 0
    points_failed: int = 0
    timings: dict[str, float] = Field(default_factory=dict)
    #: The run directory this run follows up (`sweeper diagnose`), when it is a follow-up.
    follows: str | None = None
    #: sha256 of every input file's bytes (datasets, prompts_file), by path: a resume with
    #: any of them changed is another experiment (`sweeper.results.pinned`).
    input_files: dict[str, str] = Field(default_factory=dict)
    #: Every start of a server in this run, in order, with where its time went
    #: (`sweeper.results.loads`); empty in a run written before they were recorded.
    loads: list[LoadRecord] = Field(default_factory=list)

    @property
    def engine(self) -> str:
        """The engine the run drives (rows written before the `mode` column are upgraded)."""
        return str((self.spec.get("runtime") or {}).get("engine") or DEFAULT_ENGINE)
