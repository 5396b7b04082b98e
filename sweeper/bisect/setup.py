"""A bisect's question, settled before anything runs: where the history is, which points and
prompts reproduce the fault, and the state a new or resumed bisect starts from. Every refusal
is a `BisectUsage` with the line to print (the command exits 2)."""

from __future__ import annotations

from pathlib import Path

from sweeper.bisect.history import Commit, GitError, Source, git
from sweeper.bisect.reproducer import Reproducer, every_speculative, from_run
from sweeper.bisect.state import STATE_FILE, BisectState, CommitRecord, Metric
from sweeper.catalog.records import RECORDS
from sweeper.plan import Plan
from sweeper.results.reader import latest_run
from sweeper.services.runtime_package import runtime_package_dir
from sweeper.spec import Spec

MARKER = "ddtree_runtime/__main__.py"


class BisectUsage(ValueError):
    """The bisect cannot start as asked; the message says why and what to give instead."""


def source_of(spec: Spec, repo: Path | None, bad: str) -> Source:
    """Where the history is: for the bundled runtime, `runtime.package` (or the installed
    runtime) inside its git work tree, or `--repo` (the package found in the bad revision's
    tree); for an engine run from a checkout (`runtime.source`), `--repo` or that checkout
    (read here: each host writes the commits' trees from its own)."""
    try:
        if not RECORDS[spec.runtime.engine].runs_bundled_runtime:
            if spec.runtime.source is None:
                raise BisectUsage(
                    f"engine {spec.runtime.engine!r} runs the code installed on its hosts: give "
                    "runtime.source (the git checkout on the hosts) to bisect its history"
                )
            return Source.of(Path(repo or spec.runtime.source.repo))
        if repo is None:
            return Source.of(runtime_package_dir(spec.runtime.package).parent)
        listing = git(repo, "ls-tree", "-r", "--name-only", bad).splitlines()
        found = sorted(
            n[: -len(MARKER)] for n in listing if n == MARKER or n.endswith("/" + MARKER)
        )
        if not found:
            raise BisectUsage(f"{repo} at {bad} holds no ddtree_runtime package")
        top = Path(git(repo, "rev-parse", "--show-toplevel").strip())
        return Source.of(top / found[0].rstrip("/"), top)
    except (GitError, FileNotFoundError) as exc:
        raise BisectUsage(str(exc)) from None


def choose_points(
    plan: Plan, points: str | None, from_run_dir: Path | None, results: Path, metric: str
) -> Reproducer:
    """`--points`, else the violations of `--from-run` (or the spec's newest run) under
    `verdict`, else every speculative point."""
    if points:
        ids = [p.strip() for p in points.split(",") if p.strip()]
        return Reproducer(ids, [], "--points")
    if metric == "verdict":
        run = from_run_dir or latest_run(results, plan.spec.name)
        found = from_run(run) if run is not None else None
        if found is not None:
            return found
        if from_run_dir is not None:
            raise BisectUsage(f"{from_run_dir} shows no violation to reproduce; give --points")
    return every_speculative(plan)


def start_state(
    directory: Path,
    resume: bool,
    fresh: BisectState,
) -> BisectState:
    """The state to walk: a new one (saved), or with `resume` the one on disk, which must ask
    the same question."""
    if (directory / STATE_FILE).exists():
        if not resume:
            raise BisectUsage(
                f"a bisect of this range exists in {directory}; --resume continues it"
            )
        state = BisectState.load(directory)
        if state.question() != fresh.question():
            raise BisectUsage(f"{directory} bisects another question; start without --resume")
        return state
    if resume:
        raise BisectUsage(f"no bisect to resume in {directory}")
    directory.mkdir(parents=True, exist_ok=True)
    fresh.save(directory)
    return fresh


def new_state(
    spec_path: Path,
    source: Source,
    good: str,
    bad: str,
    commits: list[Commit],
    metric: Metric,
    threshold: float | None,
    restarts: int,
    chosen: Reproducer,
) -> BisectState:
    return BisectState(
        spec_path=str(spec_path.resolve()),
        repo=str(source.repo),
        prefix=source.prefix,
        good=good,
        bad=bad,
        commits=[
            CommitRecord(sha=c.sha, subject=c.subject, author=c.author, date=c.date)
            for c in commits
        ],
        metric=metric,
        threshold=threshold,
        restarts=restarts,
        points=chosen.points,
        prompts=chosen.prompts,
    )
