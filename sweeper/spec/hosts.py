"""Where a sweep runs: the `hosts:` entries (`local`, an SSH host by address or alias, or a Slurm
cluster reached through its login host)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, field_validator

from sweeper.spec.base import LOCAL_HOST_NAME, Int, NonEmptyStr, Number, Port, Slug, StrictModel
from sweeper.spec.errors import problem

#: A host name, an IPv4 address or an ssh_config alias; or an IPv6 address (bare or [bracketed]).
HOST_ADDRESS = re.compile(r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,252})|\[?[0-9A-Fa-f:.]+\]?)$")
#: sbatch's --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
SLURM_TIME = re.compile(r"^(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+)(?::(\d+)(?::(\d+))?)?)$")
#: sbatch options the sweeper sets itself for every allocation (see sweeper/hosts/slurm_commands).
RESERVED_SBATCH = (
    "--job-name",
    "-J",
    "--wrap",
    "--parsable",
    "--output",
    "-o",
    "--nodes",
    "-N",
    "--requeue",
    "--no-requeue",
    "--time",
    "-t",
    "--gres",
    "--partition",
    "-p",
    "--account",
    "-A",
    "--qos",
    "-q",
    "--constraint",
    "-C",
)


class LocalHostSpec(StrictModel):
    """This machine: the runtime runs as a managed local process."""

    kind: Literal["local"] = "local"
    name: Slug = LOCAL_HOST_NAME


class _SSHLogin(StrictModel):
    """How the controller reaches a machine over SSH (an SSH host, or a cluster's login host)."""

    name: Slug
    #: Host name, IP address, or an alias resolved through ~/.ssh/config.
    address: NonEmptyStr
    #: None: from ~/.ssh/config, else 22.
    port: Port | None = None
    user: NonEmptyStr | None = None
    key_file: NonEmptyStr | None = None
    #: direct: the controller reaches the runtime's port itself; tunnel: through SSH.
    access: Literal["direct", "tunnel"] = "direct"
    #: The Python that runs the bundled runtime (on a Slurm cluster: on the compute nodes).
    python: NonEmptyStr = "python3"
    #: Strict host-key checking is the default; this accepts (and records) an unknown key once.
    accept_new_host_key: StrictBool = False
    known_hosts: NonEmptyStr | None = None
    connect_timeout_s: Annotated[Number, Field(gt=0)] = 15.0

    @field_validator("address")
    @classmethod
    def _address_is_a_host_name(cls, value: str) -> str:
        if "@" in value:
            raise problem("the address must not carry a user: put it in 'user:'")
        if not HOST_ADDRESS.match(value):
            raise problem(f"{value!r} is not a host name, an IP address or an ~/.ssh/config alias")
        return value


class SSHHostSpec(_SSHLogin):
    """A remote host reached over SSH; the runtime runs there as a systemd unit."""

    kind: Literal["ssh"] = "ssh"
    remote_root: NonEmptyStr = "/opt/ddtree-sweeper"
    #: Use sudo for systemctl and unit files when the user is not root.
    sudo: StrictBool = False

    @field_validator("remote_root")
    @classmethod
    def _absolute_root(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("remote_root must be an absolute path")
        return value


class SlurmHostSpec(_SSHLogin):
    """A Slurm cluster: `address` is its login host (SSH, strict host keys). Each of up to
    `allocations` workers holds one node (a job named `sweeper-<run id>`) and runs server
    configs there as job steps; the configs are spread over the workers."""

    kind: Literal["slurm"] = "slurm"
    #: A directory every compute node and the login host see at this path (bundle, step logs).
    shared_dir: NonEmptyStr
    partition: NonEmptyStr | None = None
    account: NonEmptyStr | None = None
    qos: NonEmptyStr | None = None
    #: sbatch --time of each allocation (M, H:M:S, D-H:M:S...); None: the partition's default.
    time_limit: NonEmptyStr | None = None
    #: GPUs per node (--gres=gpu:N); every server step takes all of them.
    gpus_per_node: Annotated[Int, Field(ge=0)] = 0
    constraint: NonEmptyStr | None = None
    #: Further sbatch options, passed as given (each one word, e.g. "--reservation=bench").
    sbatch_args: list[NonEmptyStr] = Field(default_factory=list)
    #: How many allocations (nodes) at once: one worker each.
    allocations: Annotated[Int, Field(ge=1, le=256)] = 1
    #: Longest wait in the queue for a worker's first allocation; None: as long as it takes.
    queue_wait_s: Annotated[Number, Field(gt=0)] | None = None
    #: Longest wait for a replacement allocation (after a lost node, or one too short for the
    #: next config); past it the worker retires and its configs go to the other workers.
    replace_wait_s: Annotated[Number, Field(gt=0)] = 600.0
    #: Slack added to a config's expected duration when deciding whether it fits in the time an
    #: allocation has left.
    time_margin_s: Annotated[Number, Field(ge=0)] = 60.0

    @field_validator("shared_dir")
    @classmethod
    def _absolute_shared_dir(cls, value: str) -> str:
        if not value.startswith("/"):
            raise problem("shared_dir must be an absolute path (the same on every node)")
        return value.rstrip("/") or "/"

    @field_validator("time_limit")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        if value is not None and slurm_time_seconds(value) is None:
            raise problem(
                f"{value!r} is not a Slurm time limit: minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S"
            )
        return value

    @field_validator("sbatch_args")
    @classmethod
    def _own_options_stay_ours(cls, value: list[str]) -> list[str]:
        for index, arg in enumerate(value):
            if not arg.startswith("-"):
                raise problem(f"{arg!r} is not an option: one sbatch option per item", at=(index,))
            flag = arg.split("=", 1)[0]
            if flag in RESERVED_SBATCH:
                message = f"{flag} is set by the sweeper (or by this host's own keys); remove it"
                raise problem(message, at=(index,))
        return value


def slurm_time_seconds(text: str) -> float | None:
    """sbatch --time as seconds; None when it is not a Slurm time."""
    found = SLURM_TIME.match(text.strip())
    if found is None:
        return None
    days, d_hours, d_minutes, d_seconds, minutes, m_seconds, h_seconds = found.groups()
    if days is not None:
        total = ((int(days) * 24 + int(d_hours)) * 60 + int(d_minutes or 0)) * 60
        return float(total + int(d_seconds or 0))
    if h_seconds is not None:  # H:M:S
        return float((int(minutes) * 60 + int(m_seconds)) * 60 + int(h_seconds))
    return float(int(minutes) * 60 + int(m_seconds or 0))


HostSpec = Annotated[LocalHostSpec | SSHHostSpec | SlurmHostSpec, Field(discriminator="kind")]
#: A host reached over SSH: an SSH host itself, or a Slurm cluster's login host.
RemoteHostSpec = SSHHostSpec | SlurmHostSpec


def host_shorthand(item: Any, index: int) -> Any:
    """`local` (a string) means the local host; a mapping without `kind` is an SSH host."""
    if item == LOCAL_HOST_NAME:
        return {"kind": "local"}
    if isinstance(item, str):
        message = f"a host given as a string must be {LOCAL_HOST_NAME!r}; got {item!r}"
        raise problem(message, at=(index,))
    if isinstance(item, dict) and "kind" not in item:
        return {"kind": "ssh", **item}
    return item
