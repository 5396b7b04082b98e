"""A lease on a host: one file on the host itself saying which run holds it, for that run's length.

GPU hosts are shared; two sweeps on one host start servers over each other (the identity gate
keeps a wrong measurement out, but every point of both fails, and a second server takes the
first one's memory). So a run takes the host's lease before any server starts there and gives
it back at the end, on Ctrl-C and on failure. The file (`lease.json` under the host's state
directory) holds the holder: sweep, run id, controller host, pid, start time and the host's boot
id, and what server the run keeps there (so whoever takes over a dead run's lease can stop it).

Taking is compare-and-swap on the host under `flock` (util-linux), so two controllers racing
for one host never both win, and a takeover replaces exactly the stale holder it read. A holder
is gone when the host booted since it was taken, or when its controller is this machine and its
pid is dead on the same boot (a recycled pid is told apart by its start time). A holder on
another controller cannot be checked from here: it holds until it gives the lease back.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ValidationError

from sweeper.hosts import Host, HostError
from sweeper.hosts.local import process_start_ticks

LEASE_FILE = "lease.json"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
#: Seconds the compare-and-swap waits for another controller's (a few ms long) swap.
GUARD_WAIT_S = 30
#: Exit status of the swap when the lease was not what the taker read (someone else moved).
_MOVED = 3
#: $1 the lease, $2 the new holder's file ("" to give the lease back), $3 the holder the taker
#: read ("" when it found none). The lease changes only if it is still that holder.
_SWAP = f"""
lease=$1 new=$2 expect=$3
exec 9>>"$lease.guard" || exit 5
flock -w {GUARD_WAIT_S} 9 || exit 5
if [ -e "$lease" ]; then
  current=$(cat "$lease")
  if [ -z "$expect" ] || [ "$current" != "$expect" ]; then
    [ -z "$new" ] || rm -f "$new"
    printf '%s' "$current"
    exit {_MOVED}
  fi
elif [ -n "$expect" ] && [ -z "$new" ]; then
  exit 0
fi
if [ -n "$new" ]; then mv -f "$new" "$lease"; else rm -f "$lease"; fi
"""


class Holder(BaseModel):
    """Who holds a host's lease (the file's content)."""

    sweep: str
    #: The run's id ("" while its run directory is being opened).
    run_id: str = ""
    controller: str
    controller_boot_id: str
    pid: int
    #: The controller process's start time in clock ticks since its boot (tells a recycled
    #: pid apart); None where /proc could not say.
    pid_start: int | None = None
    started_at: str
    host_boot_id: str
    #: What the run keeps running on the host, for a takeover to stop: `pidfile` (a local
    #: process service) or `unit` (+ `sudo`: a systemd unit); empty before the first start.
    server: dict[str, str] = {}
    token: str

    def describe(self) -> str:
        run = f"run {self.run_id}" if self.run_id else "a run starting"
        return (
            f"sweep {self.sweep!r} {run} (pid {self.pid} on {self.controller}, "
            f"since {self.started_at[:19].replace('T', ' ')} UTC)"
        )

    def text(self) -> str:
        """The file's content: one line, keys sorted (the swap compares it byte for byte)."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)


@dataclass(frozen=True)
class Controller:
    """This controller: its host name, boot id and process."""

    hostname: str
    boot_id: str
    pid: int
    pid_start: int | None

    @classmethod
    def here(cls) -> Controller:
        return cls(
            socket.gethostname(),
            Path(BOOT_ID).read_text().strip(),
            os.getpid(),
            process_start_ticks(os.getpid()),
        )


class LeaseBusy(RuntimeError):
    """A live run holds the host (or, from another controller, one that cannot be checked)."""

    def __init__(self, host: str, holder: Holder, checkable: bool) -> None:
        unsure = (
            ""
            if checkable
            else "; it runs on another controller, so it cannot be checked from here"
        )
        super().__init__(f"host {host} is leased to {holder.describe()}{unsure}")
        self.host = host
        self.holder = holder


@dataclass
class Lease:
    """A lease this controller holds on `host` (the file at `path` is `holder`)."""

    host: Host
    path: str
    holder: Holder
    #: Who held it before, and why that holder was gone (None: the lease was free).
    took_over: tuple[Holder, str] | None = None

    def update(self, **fields: object) -> None:
        """Rewrite the holder (its run id, its server) in place; HostError if it was lost."""
        new = self.holder.model_copy(update=fields)
        code, found = _swap(self.host, self.path, new, self.holder.text())
        if code != 0:
            raise HostError(f"{self.host.name}: lost its lease to {found or 'nobody'}")
        self.holder = new

    def release(self) -> bool:
        """Give the lease back; False when it was no longer ours (taken over meanwhile)."""
        code, _ = _swap(self.host, self.path, None, self.holder.text())
        return code == 0


def lease_path(state_dir: str) -> str:
    return f"{state_dir.rstrip('/')}/{LEASE_FILE}"


def new_holder(sweep: str, here: Controller, host_boot_id: str) -> Holder:
    return Holder(
        sweep=sweep,
        controller=here.hostname,
        controller_boot_id=here.boot_id,
        pid=here.pid,
        pid_start=here.pid_start,
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        host_boot_id=host_boot_id,
        token=uuid.uuid4().hex,
    )


def boot_id(host: Host) -> str:
    return host.read_file(BOOT_ID).decode().strip()


def read_lease(host: Host, path: str) -> tuple[str, Holder | None] | None:
    """The lease file's text and its holder (None: unreadable), or None when there is none."""
    try:
        text = host.read_file(path).decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return None
    try:
        return text, Holder.model_validate_json(text)
    except ValidationError:
        return text, None


def gone(holder: Holder, host_boot_id: str, here: Controller) -> str | None:
    """Why `holder` no longer holds (None: it lives, or cannot be checked from here)."""
    if holder.host_boot_id != host_boot_id:
        return "the host has booted since it was taken"
    if holder.controller != here.hostname:
        return None
    if holder.controller_boot_id != here.boot_id:
        return f"its controller {holder.controller} has booted since"
    if holder.pid == here.pid and holder.pid_start == here.pid_start:
        return None  # this very process (another host's lease of this run)
    start = process_start_ticks(holder.pid)
    if start is None or (holder.pid_start is not None and start != holder.pid_start):
        return f"its sweeper (pid {holder.pid}) is gone"
    return None


def take(host: Host, path: str, holder: Holder, here: Controller) -> Lease:
    """Take the lease at `path` on `host` for `holder`, or take over a gone holder's; raise
    LeaseBusy when a live (or uncheckable) run holds it."""
    for _ in range(5):
        found = read_lease(host, path)
        expect, previous, why = "", None, ""
        if found is not None:
            expect, previous = found
            if previous is None:
                why = "its lease file was unreadable"
            else:
                reason = gone(previous, holder.host_boot_id, here)
                if reason is None:
                    raise LeaseBusy(host.name, previous, previous.controller == here.hostname)
                why = reason
        code, _ = _swap(host, path, holder, expect)
        if code == 0:
            took = None
            if found is not None:
                took = (previous or _unreadable(expect), why)
            return Lease(host, path, holder, took)
    raise HostError(f"{host.name}: its lease at {path} kept changing while it was being taken")


def _swap(host: Host, path: str, new: Holder | None, expect: str) -> tuple[int, str]:
    """Replace the lease by `new` (None: remove it) if it is still `expect` ("": absent); the
    swap's exit status (0 done, `_MOVED` not done) and the lease it found instead."""
    staged = ""
    if new is not None:
        staged = f"{path}.{new.token}.new"
        host.put_file(staged, new.text().encode())
    result = host.run(["sh", "-c", _SWAP, "sh", path, staged, expect], check=False, timeout=60)
    if result.exit_code not in (0, _MOVED):
        raise HostError(
            f"{host.name}: cannot take or give back the lease at {path}: "
            f"{result.stderr.strip()[-300:] or f'exit {result.exit_code}'} (needs sh and flock)"
        )
    return result.exit_code, result.stdout


def _unreadable(text: str) -> Holder:
    return Holder(
        sweep="?",
        controller="?",
        controller_boot_id="",
        pid=0,
        started_at="?",
        host_boot_id="",
        token=text[:32],
    )
