"""Who answers on a port: proof from /proc that the process is the one launched, needing no
help from the engine, and `Identity`, what that proof and the engine's own found (proven in
`sweeper.services.readiness`; the workers pass it on as a config's "previous" instance).

A small probe runs on the host with the host's own Python (through `Host.run`, so locally as a
subprocess and remotely over the host's SSH connection: one code path for both). It reads the
launched pid's cmdline, start time and the requested environment variables, the process tree
below it, and every listening TCP socket on the port (`/proc/net/tcp*` inodes matched to
`/proc/*/fd` links). `check_process` then demands: the process is alive; its cmdline is the
requested argv; each requested variable has its value (extra ones, such as systemd's, are fine);
and every listening socket on the port belongs to the launched tree and nothing else. The last
is what a pid check alone cannot give: vLLM binds with SO_REUSEPORT, so a lingering instance can
share the port and the kernel would split connections between the two. A socket whose owner the
probe cannot see (another user's process) fails too: the check fails closed.

Secret values never travel back: the probe reports the sha256 of those variables, and a reason
names a secret's variable, never its value.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sweeper.engines.base import Capabilities, EngineProof
from sweeper.hosts import Host

#: The probe, run as `python -c PROBE PID PORT NAMES_JSON HASHED_JSON`; prints one JSON object.
PROBE = r"""
import hashlib, json, os, sys
pid, port = int(sys.argv[1]), int(sys.argv[2])
names, hashed = json.loads(sys.argv[3]), set(json.loads(sys.argv[4]))
def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None
def stat(p):
    raw = read("/proc/%d/stat" % p)
    return raw.rsplit(b")", 1)[1].split() if raw else None
def cmdline(p):
    raw = read("/proc/%d/cmdline" % p)
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0")[:-1]] if raw else None
out = {"pid": pid, "alive": False}
own = stat(pid)
if own is not None and own[0] not in (b"Z", b"X"):
    out.update(alive=True, start_ticks=int(own[19]), cmdline=cmdline(pid))
    raw = read("/proc/%d/environ" % pid)
    if raw is None:
        out["env_error"] = "cannot read /proc/%d/environ" % pid
    else:
        env = dict(i.split(b"=", 1) for i in raw.split(b"\0") if b"=" in i)
        def shown(n):
            v = env.get(n.encode())
            if v is None:
                return None
            return hashlib.sha256(v).hexdigest() if n in hashed else v.decode("utf-8", "replace")
        out["env"] = {n: shown(n) for n in names}
parents = {}
for entry in os.listdir("/proc"):
    if entry.isdigit():
        s = stat(int(entry))
        if s:
            parents[int(entry)] = int(s[1])
tree, grew = {pid}, True
while grew:
    more = {p for p, parent in parents.items() if parent in tree} - tree
    tree |= more
    grew = bool(more)
out["tree"] = sorted(tree) if out["alive"] else []
sockets = {}
for family in ("tcp", "tcp6"):
    for line in (read("/proc/net/" + family) or b"").decode().splitlines()[1:]:
        f = line.split()
        if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
            sockets[int(f[9])] = {"family": family, "local": f[1], "pids": []}
for p in parents:
    try:
        fds = os.listdir("/proc/%d/fd" % p)
    except OSError:
        continue
    for fd in fds:
        try:
            link = os.readlink("/proc/%d/fd/%s" % (p, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inode = int(link[8:-1])
            if inode in sockets and p not in sockets[inode]["pids"]:
                sockets[inode]["pids"].append(p)
out["listeners"] = list(sockets.values())
strangers = {p for s in sockets.values() for p in s["pids"]} - tree
out["strangers"] = {str(p): cmdline(p) for p in sorted(strangers)}
print(json.dumps(out))
"""


class ProbeError(RuntimeError):
    """The probe could not run on the host."""


@dataclass(frozen=True)
class Listener:
    """A listening TCP socket on the port and the processes holding it."""

    family: str
    local: str
    pids: tuple[int, ...]


@dataclass(frozen=True)
class ProcessFacts:
    """What /proc says about a launched process and its port."""

    pid: int
    alive: bool
    start_ticks: int | None = None
    cmdline: tuple[str, ...] | None = None
    #: Requested variable -> value (sha256 hex for a secret), None when unset.
    env: Mapping[str, str | None] | None = None
    env_error: str | None = None
    tree: tuple[int, ...] = ()
    listeners: tuple[Listener, ...] = ()
    #: Listeners' owners outside the tree -> their cmdline (None when unreadable).
    strangers: Mapping[int, Sequence[str] | None] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessFacts:
        return cls(
            pid=int(data["pid"]),
            alive=bool(data.get("alive")),
            start_ticks=data.get("start_ticks"),
            cmdline=tuple(data["cmdline"]) if data.get("cmdline") is not None else None,
            env=data.get("env"),
            env_error=data.get("env_error"),
            tree=tuple(data.get("tree") or ()),
            listeners=tuple(
                Listener(s["family"], s["local"], tuple(s["pids"]))
                for s in data.get("listeners") or ()
            ),
            strangers={int(k): v for k, v in (data.get("strangers") or {}).items()},
        )


@dataclass(frozen=True)
class Identity:
    """Who answered: the process /proc showed and what the engine reported."""

    launch_id: str
    process: ProcessFacts | None
    proof: EngineProof
    #: What was proven and what could not be, in words (the manifest records both).
    proven: tuple[str, ...] = ()
    unproven: tuple[str, ...] = ()
    model: str | None = field(default=None)
    #: What the server gives and the paths chosen (None until `negotiate`).
    capabilities: Capabilities | None = None

    @property
    def fingerprint(self) -> str | None:
        return self.proof.fingerprint


def read_process(
    host: Host,
    python: str,
    pid: int,
    port: int,
    env_names: Sequence[str],
    secret_names: Sequence[str] = (),
    *,
    sudo: bool = False,
) -> ProcessFacts:
    """Run the probe on `host` for `pid` and `port`."""
    argv = [python, "-c", PROBE, str(pid), str(port), json.dumps(list(env_names))]
    argv.append(json.dumps(sorted(secret_names)))
    result = host.run(argv, timeout=60.0, check=False, sudo=sudo)
    if not result.ok:
        raise ProbeError(f"the /proc probe failed on {host.name}: {result.stderr.strip()[-500:]}")
    try:
        return ProcessFacts.from_json(json.loads(result.stdout.strip().splitlines()[-1]))
    except (ValueError, KeyError, IndexError) as exc:
        raise ProbeError(f"the /proc probe gave no result on {host.name}: {exc}") from None


def secret_digest(value: str) -> str:
    """How the probe reports a secret: sha256 hex of its UTF-8 bytes."""
    return hashlib.sha256(value.encode()).hexdigest()


def check_process(
    facts: ProcessFacts,
    *,
    argv: Sequence[str],
    env: Mapping[str, str],
    secret_env: Mapping[str, str],
    port: int,
    previous: ProcessFacts | None = None,
) -> list[str]:
    """Every way the probed process differs from the launch; [] when it is the one launched."""
    if not facts.alive:
        return [f"the launched process (pid {facts.pid}) is gone"]
    problems: list[str] = []
    if facts.cmdline is not None and tuple(facts.cmdline) != tuple(argv):
        problems.append(
            f"cmdline differs: requested {list(argv)}, pid {facts.pid} runs {list(facts.cmdline)}"
        )
    problems += _env_problems(facts, env, secret_env)
    problems += _port_problems(facts, port)
    if (
        previous is not None
        and previous.pid == facts.pid
        and previous.start_ticks == facts.start_ticks
    ):
        problems.append(f"the previous instance (pid {facts.pid}) is still the one running")
    return problems


def _env_problems(
    facts: ProcessFacts, env: Mapping[str, str], secret_env: Mapping[str, str]
) -> list[str]:
    if not env and not secret_env:
        return []
    if facts.env is None:
        return [f"cannot prove the environment: {facts.env_error or 'not reported'}"]
    problems = []
    for name, want in env.items():
        got = facts.env.get(name)
        if got != want:
            shown = "it is unset" if got is None else f"it has {got!r}"
            problems.append(f"environment {name}: requested {want!r}, {shown}")
    for name, secret in secret_env.items():
        got = facts.env.get(name)
        if got != secret_digest(secret):
            state = "unset" if got is None else "a different value"
            problems.append(f"environment {name}: the secret is {state} in the process (masked)")
    return problems


def _port_problems(facts: ProcessFacts, port: int) -> list[str]:
    if not facts.listeners:
        return [f"nothing of pid {facts.pid}'s process tree listens on port {port}"]
    problems = []
    tree = set(facts.tree)
    ours = False
    for listener in facts.listeners:
        if not listener.pids:
            problems.append(
                f"a listening socket on port {port} ({listener.local}) has an owner this probe "
                "cannot see (another user's process?)"
            )
        for pid in listener.pids:
            if pid in tree:
                ours = True
                continue
            command = facts.strangers.get(pid)
            shown = " ".join(command) if command else "unreadable cmdline"
            problems.append(
                f"port {port} is also held by pid {pid} ({shown}), outside the launched process "
                "tree: with SO_REUSEPORT the kernel would split connections between the two"
            )
    if not ours:
        problems.append(f"no listening socket on port {port} belongs to pid {facts.pid}'s tree")
    return problems
