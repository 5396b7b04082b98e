"""Where an SSH host is and how its key is trusted: `SSHTarget`, ~/.ssh/config resolution
(HostName, User, Port, IdentityFile, ProxyJump chains) and the known_hosts policy that records a
new key only when the spec's `accept_new_host_key` says so."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from sweeper.hosts import HostError


class HostKeyError(HostError):
    """The host's key is unknown or changed: nothing was run, the message says how to fix it."""


class PermanentHostError(HostError):
    """A connection failure that trying again cannot fix (a name that does not resolve, keys
    the host refuses): raised at once, not after the reconnection backoff."""


def permanent_reason(exc: BaseException) -> str | None:
    """Why a failed connection attempt will fail the same way again, or None (worth a retry:
    a refused or dropped connection, a resolver that is only temporarily unavailable)."""
    if isinstance(exc, socket.gaierror) and exc.errno in (socket.EAI_NONAME, _EAI_NODATA):
        return f"the host name does not resolve ({exc.strerror})"
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed ({exc}); check user, key_file and the agent's keys"
    return None


#: glibc's "no address associated with hostname" (not exported by every Python build).
_EAI_NODATA = getattr(socket, "EAI_NODATA", -5)


def changed_key_message(name: str, t: SSHTarget, key: paramiko.PKey) -> str:
    """What to tell about a host whose key changed (it may be an attack)."""
    return (
        f"{name}: the host key of {t.hostname}:{t.port} CHANGED (got "
        f"{key.get_name()} {key.get_fingerprint().hex()}); this may be an attack. "
        f"If the host was reinstalled, verify its new key out of band, then run "
        f"`ssh-keygen -R {known_hosts_name(t)} -f {t.known_hosts}` and "
        f"`ssh-keyscan -p {t.port} {t.hostname} >> {t.known_hosts}`."
    )


def unknown_key_message(name: str, t: SSHTarget) -> str:
    """What to tell about a host whose key is not in known_hosts."""
    return (
        f"{name}: {t.hostname}:{t.port} is not in {t.known_hosts}, so its "
        f"identity cannot be checked and nothing was run. Verify its key out of band "
        f"and add it: `ssh-keyscan -p {t.port} {t.hostname} >> {t.known_hosts}` (or "
        f"log in once with ssh), or set `accept_new_host_key: true` on this host in "
        f"the spec to accept and record it."
    )


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
