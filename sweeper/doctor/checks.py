"""`sweeper doctor`: is each host of a spec ready to run a sweep? One `Check` per question.

Connectivity (and the host key), systemd, the host's Python with torch / transformers (and
sglang when asked), GPUs (nvidia-smi when present), free disk under the remote root, whether the
runtime's port is free, who holds the host's lease, and the bundled runtime's own `selftest` run
on the host with a small config. Every check runs even when an earlier one failed, except those
that need a connection.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from sweeper.engines.registry import engine_for
from sweeper.hosts import Host, HostError
from sweeper.services.bundle import deploy, pack_runtime
from sweeper.spec import LocalHostSpec, Spec, SSHHostSpec
from sweeper.workers.leases import lease_state, site_of

#: Below this much free space under the remote root a sweep may fail mid-way (logs, bundle).
MIN_FREE_BYTES = 2 * 1024**3
SELFTEST_TIMEOUT_S = 600.0
#: A small selftest config: seconds on a CPU, still AR-vs-DDTree token identity end to end.
SELFTEST_ARGS: tuple[str, ...] = ("--model", "tiny-random", "--budgets", "4", "--topk", "2")
SELFTEST_ARGS += ("--block-size", "4", "--max-new-tokens", "8")
#: Prints the versions of the packages the runtime needs, as JSON, on the host's Python.
VERSIONS_SCRIPT = """
import importlib, json, platform, sys
out = {"python": platform.python_version(), "executable": sys.executable}
for name in sys.argv[1:]:
    try:
        out[name] = getattr(importlib.import_module(name), "__version__", "?")
    except Exception as exc:
        out[name] = None
        out[name + "_error"] = f"{type(exc).__name__}: {exc}"[:300]
if out.get("torch"):
    import torch
    out["cuda"] = torch.cuda.is_available()
    out["cuda_devices"] = torch.cuda.device_count() if out["cuda"] else 0
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Check:
    """One answer: what was checked, whether it passed, and what was found."""

    host: str
    name: str
    ok: bool
    detail: str


def check_host(
    host: Host,
    host_spec: LocalHostSpec | SSHHostSpec,
    spec: Spec,
    *,
    python: str,
    sglang: bool = False,
    selftest: bool = True,
    selftest_args: tuple[str, ...] = SELFTEST_ARGS,
) -> list[Check]:
    """Run every check against one host; never raises for a failing check."""
    checks = Checks(host_spec.name)
    add = checks.add
    remote = isinstance(host_spec, SSHHostSpec)
    if not add("connectivity", lambda: connectivity(host)):
        return checks.found
    if remote:
        add("systemd", lambda: _systemd(host))
    add("python", lambda: python_packages(host, python, needed_packages(spec, sglang)))
    add("gpus", lambda: gpus(host, gpu_needed(spec)))
    root = host_spec.remote_root if isinstance(host_spec, SSHHostSpec) else "."
    add("disk", lambda: disk(host, python, root))
    add("port", lambda: _port(host, spec.runtime.port))
    add("lease", lambda: _lease(host, host_spec))
    if selftest:
        add(
            "selftest",
            lambda: runtime_selftest(host, root if remote else None, python, selftest_args),
        )
    return checks.found


class Checks:
    """The checks of one host so far; `add` runs one and records its answer or its error."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.found: list[Check] = []

    def add(self, name: str, probe: Callable[[], tuple[bool, str]]) -> bool:
        try:
            ok, detail = probe()
        except (HostError, OSError, ValueError, RuntimeError) as exc:
            ok, detail = False, str(exc).strip()[-600:]
        self.found.append(Check(self.host, name, ok, detail))
        return ok


def needed_packages(spec: Spec, sglang: bool) -> list[str]:
    """The Python packages the spec's engine needs on a host (`--sglang` adds sglang)."""
    needs = engine_for(spec.runtime).requirements().python_packages
    return list(dict.fromkeys([*needs, *(["sglang"] if sglang else [])]))


def gpu_needed(spec: Spec) -> bool:
    """Whether the spec's engine needs GPUs on a host."""
    return engine_for(spec.runtime).requirements().gpu


def connectivity(host: Host) -> tuple[bool, str]:
    started = time.monotonic()
    result = host.run(["uname", "-srm"], timeout=30)
    elapsed = (time.monotonic() - started) * 1000
    return True, f"{result.stdout.strip()} ({elapsed:.0f} ms)"


def _systemd(host: Host) -> tuple[bool, str]:
    version = host.run(["systemctl", "--version"], check=False, timeout=30)
    if not version.ok:
        return False, "no systemctl: the remote runtime runs as a systemd unit"
    state = host.run(["systemctl", "is-system-running"], check=False, timeout=30).stdout.strip()
    first = version.stdout.splitlines()[0] if version.stdout else "systemd"
    return state in ("running", "degraded"), f"{first}, system {state or 'unknown'}"


def python_packages(host: Host, python: str, names: list[str]) -> tuple[bool, str]:
    result = host.run([python, "-c", VERSIONS_SCRIPT, *names], check=False, timeout=120)
    if not result.ok:
        return False, f"{python}: {result.stderr.strip()[-400:] or f'exit {result.exit_code}'}"
    found = json.loads(result.stdout.strip().splitlines()[-1])
    missing = [n for n in names if not found.get(n)]
    parts = [f"python {found['python']}"] + [f"{n} {found.get(n) or 'MISSING'}" for n in names]
    if found.get("torch"):
        parts.append(f"cuda {found.get('cuda_devices', 0)} device(s)")
    errors = [found[f"{n}_error"] for n in missing if f"{n}_error" in found]
    return not missing, ", ".join(parts) + ("; " + "; ".join(errors) if errors else "")


def gpus(host: Host, needed: bool) -> tuple[bool, str]:
    query = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
    try:
        result = host.run(query, check=False, timeout=60)
    except HostError as exc:
        return not needed, f"nvidia-smi unavailable: {exc}"
    if result.exit_code == 127 or "not found" in result.stderr or "No such file" in result.stderr:
        return not needed, "no nvidia-smi" + (" (the engine needs GPUs)" if needed else " (CPU)")
    if not result.ok:
        return False, f"nvidia-smi failed: {result.stderr.strip()[-300:]}"
    gpus = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    return bool(gpus) or not needed, f"{len(gpus)} GPU(s): " + "; ".join(gpus)


def disk(host: Host, python: str, root: str) -> tuple[bool, str]:
    # The remote root may not exist yet: measure the nearest existing parent.
    probe = (
        "import os, shutil, sys\np = sys.argv[1]\n"
        "while not os.path.exists(p): p = os.path.dirname(p) or '/'\n"
        "print(p, shutil.disk_usage(p).free)"
    )
    out = host.run([python, "-c", probe, root], timeout=30).stdout.split()
    free = int(out[-1])
    return free >= MIN_FREE_BYTES, f"{free / 1024**3:.1f} GiB free at {out[0]}"


def _port(host: Host, port: int) -> tuple[bool, str]:
    listening = host.run(["ss", "-Hltnp", f"sport = :{port}"], check=False, timeout=30)
    if not listening.ok:
        return True, f"cannot run ss ({listening.stderr.strip()[:100]}); port {port} not checked"
    if listening.stdout.strip():
        return False, f"port {port} is in use: {listening.stdout.strip()[:300]}"
    return True, f"port {port} is free"


def _lease(host: Host, host_spec: LocalHostSpec | SSHHostSpec) -> tuple[bool, str]:
    """The host's lease (`sweeper.workers.leases`): a run held off by a live holder fails."""
    site = site_of(host_spec)
    assert site is not None  # local and SSH hosts have one
    held, said = lease_state(host, site.state_dir)
    return not held, said + (": a run would wait or refuse" if held else "")


def runtime_selftest(
    host: Host, remote_root: str | None, python: str, args: tuple[str, ...]
) -> tuple[bool, str]:
    env = None
    if remote_root is not None:
        release = deploy(host, remote_root, pack_runtime())
        env = {"PYTHONPATH": release.path}
    started = time.monotonic()
    argv = [python, "-m", "ddtree_runtime", "selftest", *args]
    result = host.run(argv, check=False, timeout=SELFTEST_TIMEOUT_S, env=env)
    elapsed = time.monotonic() - started
    tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
    detail = f"{'passed' if result.ok else f'exit {result.exit_code}'} in {elapsed:.1f} s"
    return result.ok, detail + (": " + " | ".join(tail) if tail else "")
