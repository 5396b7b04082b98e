"""`sweeper run SPEC`: run a whole sweep into `results/<sweep>/<run id>/`, or resume one.

Exit codes (`sweeper.exit_codes`): 0 every point ok and no violation (the last lines say how
many are unproven); 2 bad spec or usage; 3 some point failed; 4 a determinism violation
(shifted, impossible-token, diverged, nondeterministic, garbled; near-ties above the AR-vs-AR
control count as diverged); 5 the results cannot be written (disk full...: the run is marked
failed and resumes); 75 another run
of the spec holds its results directory, or another run holds a host's lease (`--wait-for-hosts`
waits for it instead); 130 interrupted (resumable).
The run directory is always the last line printed (stdout).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import typer
from rich.console import Console

from sweeper import __version__
from sweeper.analysis.ending import closing_lines
from sweeper.analysis.history import record_finished
from sweeper.catalog.records import RECORDS
from sweeper.commands.errors import describe
from sweeper.commands.plan import render
from sweeper.commands.repair import recovered
from sweeper.commands.validate import EXIT_BAD_SPEC, load_plan, missing_secrets
from sweeper.engines.registry import engine_for
from sweeper.exit_codes import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_IO, EXIT_LOCKED, exit_line
from sweeper.hosts import HostError
from sweeper.hosts.lease import LeaseBusy
from sweeper.plan import Plan, estimate_seconds
from sweeper.progress import PlainProgress, RichProgress, SweepProgress
from sweeper.results.history import default_url
from sweeper.results.lock import LockBusy, run_lock
from sweeper.results.pinned import changed_inputs, file_hashes
from sweeper.results.reader import is_run_dir, latest_run, read_run, sweep_lock
from sweeper.results.store import RunStore
from sweeper.runner import Runner
from sweeper.search import SearchOrder, SearchStateError
from sweeper.services.git_source import source_commit
from sweeper.services.runtime_package import runtime_package_dir, runtime_source_hash
from sweeper.spec.hub import data_files
from sweeper.workers.backends import Backend, open_backend
from sweeper.workers.leases import RunLeases, server_of, take_leases


def _usage(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_BAD_SPEC)


def _open_store(
    plan: Plan,
    spec_path: Path,
    results: Path,
    resume: Path | None,
    resume_latest: bool,
    force_new_inputs: bool = False,
) -> RunStore:
    spec = plan.spec
    if resume is not None and resume_latest:
        raise _usage("give --resume RUN_DIR or --resume-latest, not both")
    if resume_latest:
        resume = latest_run(results, spec.name)
        if resume is None:
            raise _usage(f"no run of sweep {spec.name!r} under {results} to resume")
    if resume is not None:
        try:
            # Recovered first: a record line lost since (a cut, a hand edit) comes back from
            # the views, never dropped by the views the run rewrites.
            for line in recovered(resume):
                typer.echo(f"note: {resume}: {line}", err=True)
            store = RunStore.open(resume)
        except SearchStateError as exc:  # state that cannot be read: the table's I/O code
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_IO) from None
        except (FileNotFoundError, ValueError) as exc:
            raise _usage(str(exc)) from None
        if store.manifest.sweep != spec.name:
            raise _usage(f"{resume} is a run of sweep {store.manifest.sweep!r}, not {spec.name!r}")
        runs_it = RECORDS[spec.runtime.engine].runs_bundled_runtime
        source = planned_source_hash(plan) if runs_it else None
        files = file_hashes(input_paths(plan, spec_path))
        changed = changed_inputs(store.manifest, spec.model_dump(mode="json"), source, files)
        if changed and not force_new_inputs:
            raise _usage(
                f"{resume} ran other inputs: {'; '.join(changed)} changed. A resume must be the "
                "same experiment; --force-new-inputs starts a new run linked to this one"
            )
        if changed:
            typer.echo(f"note: inputs changed ({'; '.join(changed)}): a new run follows {resume}")
            return create_store(plan, spec_path, resume.parent.parent, follows=str(resume))
        return store
    return create_store(plan, spec_path, results)


def input_paths(plan: Plan, spec_path: Path) -> list[Path]:
    """The files whose bytes decide the run's prompts: its prompts_file, dataset files and the
    files of local `hf:` directories (a hub dataset is pinned by its revision in the spec)."""
    workload, base = plan.spec.workload, spec_path.resolve().parent
    named = [workload.prompts_file] + [d.file for d in workload.datasets]
    paths = [Path(os.path.realpath(base / name)) for name in named if name]
    for dataset in workload.datasets:  # a local `hf:` directory: its files, `.git` left out
        local = base / dataset.hf if dataset.hf else None
        if local is not None and local.is_dir():
            paths += data_files(Path(os.path.realpath(local)))
    return paths


def planned_source_hash(plan: Plan) -> str:
    """The source hash of the runtime this plan runs: the spec's own package, else the
    installed one (what the manifest names and every server must report)."""
    package = plan.spec.runtime.package
    return runtime_source_hash(runtime_package_dir(package) if package else None)


def planned_commit(plan: Plan) -> str | None:
    """The git commit of the code this plan runs: the bundled runtime's package, or an
    engine's `runtime.source` (None: neither is in a git work tree the controller can read)."""
    source = plan.spec.runtime.source
    if source is not None:  # an engine's checkout: the commit its hosts write, or the work tree
        return source.rev or source_commit(Path(source.repo))
    if not RECORDS[plan.spec.runtime.engine].runs_bundled_runtime:
        return None
    try:
        return source_commit(runtime_package_dir(plan.spec.runtime.package).parent)
    except FileNotFoundError:
        return None


def create_store(
    plan: Plan, spec_path: Path, results: Path, follows: str | None = None
) -> RunStore:
    """A new run directory for the plan; `follows` links it to the run it follows up."""
    spec = plan.spec
    return RunStore.create(
        results,
        {
            "sweep": spec.name,
            "sweeper_version": __version__,
            "spec_path": str(spec_path),
            "spec": spec.model_dump(mode="json"),
            "runtime_source_hash": planned_source_hash(plan),
            "runtime_commit": planned_commit(plan),
            "input_files": file_hashes(input_paths(plan, spec_path)),
            "follows": follows,
        },
    )


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def command(
    spec: Path = typer.Argument(..., help="Sweep spec (YAML)."),
    results: Path = typer.Option(Path("results"), "--results", help="Results root directory."),
    resume: Path | None = typer.Option(None, "--resume", help="Continue this run directory."),
    resume_latest: bool = typer.Option(False, "--resume-latest", help="Continue the newest run."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and exit."),
    plain: bool = typer.Option(False, "--plain", help="Plain log lines instead of live display."),
    force_new_inputs: bool = typer.Option(
        False,
        "--force-new-inputs",
        help="With --resume: when the inputs changed, start a new run linked to the old one.",
    ),
    wait_for_hosts: float | None = typer.Option(
        None,
        "--wait-for-hosts",
        metavar="[SECONDS]",
        help="When another run holds a host's lease, wait for it (at most SECONDS; no value: "
        "as long as it takes) instead of refusing.",
    ),
) -> None:
    """Run a sweep: every server config started, proven and measured; results on disk."""
    if wait_for_hosts is not None and not wait_for_hosts >= 0:
        raise _usage("--wait-for-hosts takes a number of seconds >= 0")
    plan = load_plan(spec)
    if dry_run:
        render(plan, estimate_seconds(plan), Console(markup=False))
        return
    missing = missing_secrets(plan)
    if missing:
        raise _usage(missing)  # before the run directory exists: nothing to clean up
    earlier = plan.spec.runtime.baseline_run
    if earlier and not is_run_dir(Path(earlier)):
        raise _usage(f"runtime.baseline_run {earlier} is not a run directory (no manifest.json)")
    # One run of a spec writes into its sweep directory at a time (two would fight over the
    # port and the latest run); the lock lies beside that directory, whose entries are runs.
    root = resume.parent.parent if resume is not None else results
    lock_dir = root / plan.spec.name
    try:
        # The leases before the run directory: a run refused a host leaves nothing behind.
        with run_lock(sweep_lock(root, plan.spec.name)), held_hosts(plan, wait_for_hosts) as leases:
            store = _open_store(plan, spec, results, resume, resume_latest, force_new_inputs)
            code = _execute_or_mark(plan, store, plain, spec, leases)
    except LockBusy as exc:
        typer.echo(
            f"error: another run of sweep {plan.spec.name!r} ({_holder(exc)}) is writing to "
            f"{lock_dir}; wait for it to end or give another --results",
            err=True,
        )
        raise typer.Exit(EXIT_LOCKED) from None
    if code == EXIT_INTERRUPTED:
        typer.echo(f"resume with: sweeper run {spec} --resume {store.dir}", err=True)
    sys.stdout.write(f"{store.dir}\n")
    sys.stdout.flush()
    raise typer.Exit(code)


@contextlib.contextmanager
def held_hosts(plan: Plan, wait_s: float | None) -> Iterator[RunLeases]:
    """The lease of every host the plan starts servers on (none when it starts none) for the
    block, given back after it; a host another run holds is one line and exit 75 (after
    `wait_s` seconds of waiting, when given), a lease that cannot be read or written as one
    (`LeaseDamaged`) one line and exit 5, Ctrl-C while waiting exit 130."""

    def say(line: str) -> None:
        typer.echo(line, err=True)

    try:
        launched = engine_for(plan.spec.runtime).launched
        leases = take_leases(plan.spec, wait_s=wait_s, say=say) if launched else RunLeases()
    except LeaseBusy as exc:
        say(f"error: {exc}; wait for it with --wait-for-hosts [SECONDS], or try later")
        raise typer.Exit(EXIT_LOCKED) from None
    except HostError as exc:  # a lease that is no lease, or cannot be written: never waived
        say(f"error: {exc}")
        raise typer.Exit(EXIT_IO) from None
    except KeyboardInterrupt:
        say("interrupted while waiting for the hosts' leases; nothing ran")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    try:
        yield leases
    finally:
        for line in leases.release():
            say(line)


def _holder(exc: LockBusy) -> str:
    return f"pid {exc.pid}" if exc.pid else "an unknown process"


def _execute_or_mark(
    plan: Plan, store: RunStore, plain: bool, spec: Path, leases: RunLeases | None = None
) -> int:
    """Run the plan; a run that dies of anything but Ctrl-C leaves its manifest `failed` with
    the reason (never `running`), and the sweeper's own I/O error ends in one line, exit 5."""
    try:
        return execute(plan, store, plain, leases)
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        code = (
            EXIT_INTERRUPTED
            if interrupted
            else EXIT_IO
            if isinstance(exc, OSError)
            else EXIT_INTERNAL
        )
        # The disk may be beyond even the manifest; the records are what counts then.
        with contextlib.suppress(OSError):
            store.mark_failed(describe(exc), code, "interrupted" if interrupted else "failed")
        if not isinstance(exc, OSError):
            raise
        typer.echo(f"error: {describe(exc)}", err=True)
        typer.echo(
            f"the run stopped as {store.manifest.status}; resume with: sweeper run {spec} "
            f"--resume {store.dir}",
            err=True,
        )
        return EXIT_IO


def execute(plan: Plan, store: RunStore, plain: bool, leases: RunLeases | None = None) -> int:
    """Run a plan into a store (every host, live or plain progress on stderr); the exit code.
    `leases` (the hosts' leases, taken) are named after the run and its servers here."""
    console = Console(stderr=True, markup=False)
    engine = engine_for(plan.spec.runtime, store.manifest.runtime_source_hash)
    state = store.dir / "service"
    backends = {
        h.name: open_backend(h, plan.spec, state, launched=engine.launched, run_id=store.run_id)
        for h in plan.spec.hosts
    }
    if leases is not None:
        for line in leases.name_run(store.run_id, _servers(backends)):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if not engine.launched:
        console.print(
            f"warning: engine {engine.name} measures {plan.spec.runtime.base_url}, which the "
            "sweeper did not start: its process, flags and restarts cannot be proven (the "
            "manifest records what was and was not)",
            markup=False,
            soft_wrap=True,
        )
    console.print(
        f"sweep {plan.spec.name}: {plan.n_points} points, {plan.loads} load(s) + "
        f"{plan.switches} switch(es), "
        f"estimate ~{estimate_seconds(plan) / 60:.0f} min; run {store.dir}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    live = not plain and console.is_terminal
    progress: SweepProgress = RichProgress(console) if live else PlainProgress(console)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with progress:
            runner = Runner(plan.spec, plan, store, backends, progress, engine)
            runner.order = SearchOrder(plan, store.dir) if plan.spec.search else None
            code = runner.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        for backend in backends.values():
            backend.host.close()
    points = runner.judged or runner.judged_points(store.points())
    # A completed run goes into the history (beside the results, or SWEEPER_HISTORY_URL).
    finished = read_run(store.dir)
    said = record_finished(default_url(store.dir.parent.parent), finished)
    finished.close()
    if said is not None:
        console.print(said[1], markup=False, highlight=False, soft_wrap=True)
    # The summary of what the report flags, the report's command, then the code's meaning.
    ending = closing_lines(
        points.values(), status=store.manifest.status, planned=plan.n_points, run_dir=str(store.dir)
    )
    for line in [*ending, exit_line(code)]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return code


def _servers(backends: dict[str, Backend]) -> dict[str, dict[str, str]]:
    return {name: server_of(backend.service) for name, backend in backends.items()}
