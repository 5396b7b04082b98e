"""A lease on a host: one file on the host itself saying which run holds it, for that run's length.

GPU hosts are shared; two sweeps on one host start servers over each other (the identity gate
keeps a wrong measurement out, but every point of both fails, and a second server takes the
first one's memory). So a run takes the host's lease before any server starts there and gives
it back at the end, on Ctrl-C and on failure. The file (`lease.json` under the host's state
directory) holds the holder: sweep, run id, controller host, pid, start time and the host's boot
id, and what server the run keeps there (so whoever takes over a dead run's lease can stop it).

Taking is compare-and-swap on the host under `flock` (util-linux), so two controllers racing
for one host never both win, and a takeover replaces exactly the stale holder it read: the swap
compares the sha256 of the file's bytes with that of the bytes read (never a normalised reading,
and never the text itself in argv, which a large file would overflow). A lease that cannot be
read as one (empty, cut, not UTF-8, not a holder, over `MAX_LEASE_BYTES`, a directory, under a
state directory that is a file) is `LeaseDamaged`: the run stops naming the file, never reading
it as no lease and never taking the host without one. A holder
is gone when the host booted since it was taken, or when its controller is this machine and its
pid is dead on the same boot (a recycled pid is told apart by its start time). A holder on
another controller, or in another PID namespace of this one (a container: its pid names another
process here), cannot be checked from here: it holds until it gives the lease back. A swap that
fails leaves no staged holder behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sweeper.hosts import Host, HostError
from sweeper.hosts.local import process_start_ticks

LEASE_FILE = "lease.json"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
PID_NS = "/proc/self/ns/pid"
#: Seconds the compare-and-swap waits for another controller's (a few ms long) swap.
GUARD_WAIT_S = 30
#: Exit status of the swap when the lease was not what the taker read (someone else moved).
_MOVED = 3
#: Exit status of the swap when the lease is there but not a regular file.
_NOT_A_FILE = 6
#: Larger than any lease this tool writes (a holder is under 1 KiB): a damaged one.
MAX_LEASE_BYTES = 64 * 1024
#: $1 the lease, $2 the new holder's file ("" to give the lease back), $3 the sha256 of the
#: lease the taker read ("" when it found none). The lease changes only if it still has those
#: exact bytes; the new holder's file is gone when it ends, moved into place or removed.
_SWAP = f"""
lease=$1 new=$2 expect=$3
[ -z "$new" ] || trap 'rm -f "$new"' EXIT
exec 9>>"$lease.guard" || exit 5
flock -w {GUARD_WAIT_S} 9 || exit 5
if [ -e "$lease" ] || [ -L "$lease" ]; then
  [ -f "$lease" ] || exit {_NOT_A_FILE}
  current=$(sha256sum < "$lease") || exit 5
  [ "${{current%% *}}" = "$expect" ] || exit {_MOVED}
elif [ -n "$expect" ] && [ -z "$new" ]; then
  exit 0
fi
if [ -n "$new" ]; then mv -f "$new" "$lease"; else rm -f "$lease"; fi
"""
#: What lies at $1 (the lease): `absent`, `file SIZE` (a regular file), `directory`,
#: `special` (a fifo, a device: never read, it could block or never end), or `parent PATH`
#: (the nearest existing ancestor is not a directory: the state directory cannot be made).
_PROBE = """
p=$1
if [ -d "$p" ]; then echo directory; exit 0; fi
if [ -e "$p" ] || [ -L "$p" ]; then
  if [ -f "$p" ]; then printf 'file '; wc -c < "$p"; else echo special; fi
  exit 0
fi
d=${p%/*}
while [ -n "$d" ] && [ ! -e "$d" ]; do d=${d%/*}; done
if [ -n "$d" ] && [ ! -d "$d" ]; then printf 'parent %s\\n' "$d"; exit 0; fi
echo absent
"""


class Holder(BaseModel):
    """Who holds a host's lease (the file's content; strict: a lease is what this tool wrote,
    never a coerced reading of something else)."""

    model_config = ConfigDict(strict=True)

    sweep: str
    #: The run's id ("" while its run directory is being opened).
    run_id: str = ""
    controller: str
    controller_boot_id: str
    pid: int = Field(gt=0)
    #: The PID namespace `pid` is counted in (`pid:[4026531836]`): a holder in another one (a
    #: container) cannot be checked from here, its pid naming another process. None in a
    #: lease written before it was recorded: read as this controller's own namespace.
    pid_ns: str | None = None
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
    #: This process's PID namespace (`Holder.pid_ns`).
    pid_ns: str | None = None

    @classmethod
    def here(cls) -> Controller:
        return cls(
            socket.gethostname(),
            Path(BOOT_ID).read_text().strip(),
            os.getpid(),
            process_start_ticks(os.getpid()),
            pid_namespace(),
        )


def pid_namespace() -> str | None:
    """This process's PID namespace (`pid:[inode]`), None where /proc cannot say."""
    try:
        return os.readlink(PID_NS)
    except OSError:
        return None


class LeaseBusy(RuntimeError):
    """A live run holds the host (or, from another controller, one that cannot be checked)."""

    def __init__(self, host: str, holder: Holder, unsure: str = "") -> None:
        unsure = f"; it runs {unsure}, so it cannot be checked from here" if unsure else ""
        super().__init__(f"host {host} is leased to {holder.describe()}{unsure}")
        self.host = host
        self.holder = holder


class LeaseDamaged(HostError):
    """A lease that cannot be read or taken as one: which file, what is wrong, what to do (one
    line). Never read as absent: nobody can tell who holds the host."""

    def __init__(self, host: str, path: str, problem: str, todo: str = "") -> None:
        todo = todo or f"if no run is using host {host}, remove it (rm {path}) and start again"
        super().__init__(f"host {host}: the lease file {path} {problem}; {todo}")
        self.path = path


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
        if _swap(self.host, self.path, new, self.holder.text().encode()) != 0:
            raise HostError(f"{self.host.name}: lost its lease to {self._now_held()}")
        self.holder = new

    def release(self) -> bool:
        """Give the lease back; False when it was no longer ours (taken over meanwhile)."""
        return _swap(self.host, self.path, None, self.holder.text().encode()) == 0

    def _now_held(self) -> str:
        try:
            found = read_lease(self.host, self.path)
        except HostError as exc:
            return f"nobody that can be told ({exc})"
        return "nobody" if found is None else found[1].describe()


def lease_path(state_dir: str) -> str:
    return f"{state_dir.rstrip('/')}/{LEASE_FILE}"


def new_holder(sweep: str, here: Controller, host_boot_id: str) -> Holder:
    return Holder(
        sweep=sweep,
        controller=here.hostname,
        controller_boot_id=here.boot_id,
        pid=here.pid,
        pid_ns=here.pid_ns,
        pid_start=here.pid_start,
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        host_boot_id=host_boot_id,
        token=uuid.uuid4().hex,
    )


def boot_id(host: Host) -> str:
    return host.read_file(BOOT_ID).decode().strip()


def read_lease(host: Host, path: str) -> tuple[bytes, Holder] | None:
    """The lease file's exact bytes and its holder, or None when there is none; LeaseDamaged
    when something lies there that is not a lease (see the module docstring)."""
    name = host.name
    what = _probe(host, path)
    if what == "absent":
        return None
    if what.startswith("parent "):
        parent = what.removeprefix("parent ")
        raise LeaseDamaged(
            name, path, f"cannot exist: {parent} is a file, not a directory",
            f"move {parent} away (the host's state directory must be a directory)",
        )  # fmt: skip
    if what == "directory":
        raise LeaseDamaged(
            name, path, "is a directory, not a file",
            f"if no run is using host {name}, remove that directory and start again",
        )  # fmt: skip
    if what == "special":
        raise LeaseDamaged(name, path, "is not a regular file (a fifo, a device, a broken link)")
    size = int(what.removeprefix("file "))
    if size > MAX_LEASE_BYTES:
        raise LeaseDamaged(name, path, f"holds {size} bytes, more than any lease")
    try:
        data = host.read_file(path)
    except FileNotFoundError:
        return None  # given back between the look and the read
    except (HostError, OSError) as exc:
        raise LeaseDamaged(name, path, f"cannot be read ({exc})") from None
    return data, parse_holder(name, path, data)


def parse_holder(host: str, path: str, data: bytes) -> Holder:
    """The holder a lease's bytes name; LeaseDamaged when they name none."""
    if not data.strip():
        raise LeaseDamaged(host, path, "is empty" if not data else "holds only white space")
    if len(data) > MAX_LEASE_BYTES:
        raise LeaseDamaged(host, path, f"holds {len(data)} bytes, more than any lease")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LeaseDamaged(host, path, f"is not UTF-8 text (byte {exc.start})") from None
    try:
        return Holder.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        said = f"{where}: {first['msg']}" if where else first["msg"]
        raise LeaseDamaged(host, path, f"is not a lease ({said})") from None


def _probe(host: Host, path: str) -> str:
    result = host.run(["sh", "-c", _PROBE, "sh", path], check=False, timeout=60)
    said = result.stdout.strip()
    if not result.ok or not said:
        problem = result.stderr.strip()[-300:] or f"exit {result.exit_code}"
        raise LeaseDamaged(host.name, path, f"cannot be looked at ({problem})", "check the host")
    return " ".join(said.split())


def uncheckable(holder: Holder, here: Controller) -> str:
    """Where `holder` runs that its process cannot be checked from here ("" where it can): on
    another controller, or in another PID namespace of this one (its pid names another
    process here: a container's pid 1 is this machine's init)."""
    if holder.controller != here.hostname:
        return "on another controller"
    if (holder.pid_ns or here.pid_ns) != here.pid_ns:
        return f"in another PID namespace ({holder.pid_ns}; this controller's: {here.pid_ns})"
    return ""


def gone(holder: Holder, host_boot_id: str, here: Controller) -> str | None:
    """Why `holder` no longer holds (None: it lives, or cannot be checked from here)."""
    if holder.host_boot_id != host_boot_id:
        return "the host has booted since it was taken"
    if holder.controller != here.hostname:
        return None
    if holder.controller_boot_id != here.boot_id:
        return f"its controller {holder.controller} has booted since"
    if uncheckable(holder, here):
        return None
    if holder.pid == here.pid and holder.pid_start == here.pid_start:
        return None  # this very process (another host's lease of this run)
    start = process_start_ticks(holder.pid)
    if start is None or (holder.pid_start is not None and start != holder.pid_start):
        return f"its sweeper (pid {holder.pid}) is gone"
    return None


def take(
    host: Host,
    path: str,
    holder: Holder,
    here: Controller,
    vet: Callable[[Holder], None] | None = None,
) -> Lease:
    """Take the lease at `path` on `host` for `holder`, or take over a gone holder's; raise
    LeaseBusy when a live (or uncheckable) run holds it, LeaseDamaged when it is no lease or
    cannot be written. `vet(previous)` runs before a takeover and may refuse it by raising."""
    for _ in range(5):
        found = read_lease(host, path)
        expect, previous, why = b"", None, ""
        if found is not None:
            expect, previous = found
            reason = gone(previous, holder.host_boot_id, here)
            if reason is None:
                raise LeaseBusy(host.name, previous, uncheckable(previous, here))
            why = reason
            if vet is not None:
                vet(previous)
        if _swap(host, path, holder, expect if found is not None else None) == 0:
            return Lease(host, path, holder, None if previous is None else (previous, why))
    raise LeaseDamaged(
        host.name, path, "kept changing while it was being taken (5 times)",
        "another controller keeps rewriting it: find it, or try again",
    )  # fmt: skip


def _swap(host: Host, path: str, new: Holder | None, expect: bytes | None) -> int:
    """Replace the lease by `new` (None: remove it) if it still has the bytes `expect` (None:
    absent); the swap's exit status (0 done, `_MOVED` not done)."""
    staged = ""
    if new is not None:
        staged = f"{path}.{new.token}.new"
        try:
            host.put_file(staged, new.text().encode())
        except (HostError, OSError) as exc:
            raise LeaseDamaged(
                host.name, path, f"cannot be written ({exc})", "make its directory writable"
            ) from None
    digest = "" if expect is None else hashlib.sha256(expect).hexdigest()
    result = host.run(["sh", "-c", _SWAP, "sh", path, staged, digest], check=False, timeout=60)
    if result.exit_code == _NOT_A_FILE:
        raise LeaseDamaged(host.name, path, "is not a regular file")
    if result.exit_code not in (0, _MOVED):
        problem = result.stderr.strip()[-300:] or f"exit {result.exit_code}"
        raise LeaseDamaged(
            host.name, path, f"cannot be swapped ({problem})", "the host needs sh, flock and "
            "sha256sum, and its state directory must be writable",
        )  # fmt: skip
    return result.exit_code
