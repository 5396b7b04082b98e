"""Where an SSH host is and how its key is trusted: `SSHTarget`, ~/.ssh/config resolution
(HostName, User, Port, IdentityFile, ProxyJump chains) and the known_hosts policy that records a
new key only when the spec's `accept_new_host_key` says so."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from sweeper.hosts import HostError


class HostKeyError(HostError):
    """The host's key is unknown or changed: nothing was run, the message says how to fix it."""


@dataclass(frozen=True)
class SSHTarget:
    """Where and as whom to connect, after ~/.ssh/config is applied."""

    hostname: str
    port: int = 22
    user: str = "root"
    key_files: tuple[str, ...] = ()
    proxy_jump: SSHTarget | None = None
    known_hosts: str = field(default_factory=lambda: os.path.expanduser("~/.ssh/known_hosts"))


def resolve_target(
    address: str,
    *,
    port: int | None = None,
    user: str | None = None,
    key_file: str | None = None,
    known_hosts: str | None = None,
    ssh_config: str | None = None,
) -> SSHTarget:
    """Apply ~/.ssh/config (HostName, User, Port, IdentityFile, ProxyJump) to an address or alias.

    Values given explicitly (from the spec) win over the config file.
    """
    config_path = Path(os.path.expanduser(ssh_config or "~/.ssh/config"))
    config = paramiko.SSHConfig.from_path(str(config_path)) if config_path.exists() else None
    found = config.lookup(address) if config else {"hostname": address}
    keys = [key_file] if key_file else list(found.get("identityfile", []))
    jump = None
    if found.get("proxyjump") and found["proxyjump"].lower() != "none":
        # ProxyJump may chain (a,b): the first hop is the outermost; user@host:port allowed.
        hops = [h.strip() for h in found["proxyjump"].split(",")]
        for hop in hops:
            hop_user, _, rest = hop.rpartition("@")
            hop_host, _, hop_port = rest.partition(":")
            base = resolve_target(hop_host, ssh_config=ssh_config, known_hosts=known_hosts)
            jump = SSHTarget(
                hostname=base.hostname,
                port=int(hop_port) if hop_port else base.port,
                user=hop_user or base.user,
                key_files=base.key_files,
                proxy_jump=jump,
                known_hosts=base.known_hosts,
            )
    return SSHTarget(
        hostname=found.get("hostname", address),
        port=port or int(found.get("port", 22)),
        user=user or found.get("user") or os.environ.get("USER", "root"),
        key_files=tuple(os.path.expanduser(k) for k in keys),
        proxy_jump=jump,
        known_hosts=os.path.expanduser(known_hosts or "~/.ssh/known_hosts"),
    )


class RecordNewKey(paramiko.MissingHostKeyPolicy):
    """Accept an unknown key (only when the spec says so) and append it to known_hosts."""

    def __init__(self, known_hosts: str) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        Path(self.known_hosts).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.known_hosts, "a", encoding="ascii") as fh:
            fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


def known_hosts_name(target: SSHTarget) -> str:
    return target.hostname if target.port == 22 else f"[{target.hostname}]:{target.port}"
