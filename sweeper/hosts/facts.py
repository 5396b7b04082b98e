"""What a host is: uname, CPU count and memory, as the host itself reports them.

Facts, never a reason to fail: a missing tool only leaves that fact out.
"""

from __future__ import annotations

from sweeper.hosts import Host

_PROBES = (
    ("uname", ["uname", "-srmn"]),
    ("cpus", ["nproc"]),
    ("mem_total", ["sh", "-c", "grep MemTotal /proc/meminfo"]),
)


def system_facts(host: Host) -> dict[str, str]:
    """uname, cpus and mem_total of `host`, best effort."""
    facts: dict[str, str] = {}
    for key, argv in _PROBES:
        try:
            result = host.run(argv, timeout=10, check=False)
        except Exception:  # noqa: BLE001 - a missing tool only leaves the fact out
            continue
        if result.ok:
            facts[key] = result.stdout.strip().removeprefix("MemTotal:").strip()
    return facts
