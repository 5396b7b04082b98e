"""Where a sweep runs: the `hosts:` entries (`local`, or an SSH host by address or alias)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, field_validator

from sweeper.spec.base import LOCAL_HOST_NAME, NonEmptyStr, Port, Slug, StrictModel
from sweeper.spec.errors import problem

#: A host name, an IPv4 address or an ssh_config alias; or an IPv6 address (bare or [bracketed]).
HOST_ADDRESS = re.compile(r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,252})|\[?[0-9A-Fa-f:.]+\]?)$")


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

    @field_validator("address")
    @classmethod
    def _address_is_a_host_name(cls, value: str) -> str:
        if "@" in value:
            raise problem("the address must not carry a user: put it in 'user:'")
        if not HOST_ADDRESS.match(value):
            raise problem(f"{value!r} is not a host name, an IP address or an ~/.ssh/config alias")
        return value

    @field_validator("remote_root")
    @classmethod
    def _absolute_root(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("remote_root must be an absolute path")
        return value


HostSpec = Annotated[LocalHostSpec | SSHHostSpec, Field(discriminator="kind")]


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
