"""`sweeper doctor SPEC`: check every host of a spec before a sweep; a table of ok / fail.

Hosts are checked in parallel. Exit 0 when every check passed, 8 when one failed, 2 for a bad
spec (`sweeper.exit_codes`).
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sweeper.commands.validate import EXIT_BAD_SPEC
from sweeper.doctor.checks import Check, check_host
from sweeper.exit_codes import EXIT_CHECK_FAILED, EXIT_OK
from sweeper.hosts import Host
from sweeper.hosts.local import LocalHost
from sweeper.spec import (
    HostSpec,
    LocalHostSpec,
    SlurmHostSpec,
    Spec,
    SpecError,
    SSHHostSpec,
    load_spec,
)


def _open(host_spec: LocalHostSpec | SSHHostSpec) -> Host:
    if isinstance(host_spec, SSHHostSpec):
        from sweeper.workers.backends import ssh_host_for  # paramiko only when there are SSH hosts

        return ssh_host_for(host_spec)
    return LocalHost(host_spec.name)


def _python(host_spec: LocalHostSpec | SSHHostSpec, spec: Spec) -> str:
    if isinstance(host_spec, SSHHostSpec):
        return spec.runtime.python or host_spec.python
    return spec.runtime.python or sys.executable


def command(
    spec: Path = typer.Argument(..., help="Sweep spec (YAML)."),
    sglang: bool = typer.Option(False, "--sglang", help="Also require sglang on the host."),
    selftest: bool = typer.Option(True, "--selftest/--no-selftest", help="Run the selftest."),
    host: list[str] = typer.Option([], "--host", help="Only these hosts (repeatable)."),
) -> None:
    """Check each host: SSH, systemd, Python packages, GPUs, disk, port, runtime selftest (a
    Slurm host: login SSH, sinfo, a short allocation, the shared dir from a node, the node's
    Python and GPUs, the selftest as a step)."""
    try:
        loaded = load_spec(spec)
    except SpecError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(EXIT_BAD_SPEC) from None
    targets = [h for h in loaded.hosts if not host or h.name in host]
    if not targets:
        typer.echo(f"no host named {', '.join(host)} in {spec}", err=True)
        raise typer.Exit(EXIT_BAD_SPEC)

    def run_one(host_spec: HostSpec) -> list[Check]:
        if isinstance(host_spec, SlurmHostSpec):
            from sweeper.doctor.slurm import check_slurm_host  # paramiko only for remote hosts

            return check_slurm_host(host_spec, loaded, sglang=sglang, selftest=selftest)
        target = _open(host_spec)
        try:
            return check_host(
                target,
                host_spec,
                loaded,
                python=_python(host_spec, loaded),
                sglang=sglang,
                selftest=selftest,
            )
        finally:
            target.close()

    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        results = [check for checks in pool.map(run_one, targets) for check in checks]
    table = Table(title=f"sweeper doctor {spec}")
    for column in ("host", "check", "result", "detail"):
        table.add_column(column, overflow="fold")
    for check in results:
        verdict = Text("ok", style="green") if check.ok else Text("fail", style="red")
        table.add_row(check.host, check.name, verdict, check.detail)
    console = Console(width=max(Console().width, 120), markup=False)
    console.print(table)
    failed = [c for c in results if not c.ok]
    console.print(f"{len(results) - len(failed)} ok, {len(failed)} failed", highlight=False)
    raise typer.Exit(EXIT_CHECK_FAILED if failed else EXIT_OK)
