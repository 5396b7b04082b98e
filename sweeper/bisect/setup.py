"""A bisect's question, settled before anything runs: where the history is, which points and
prompts reproduce the fault, and the state a new or resumed bisect starts from. Every refusal
is a `BisectUsage` with the line to print (the command exits 2); a state on disk that cannot
be read is a `BisectStateError` (exit 5).

A bisect's directory is named by its range and a hash of its whole question (`BisectState.key`:
the metric, threshold, points, prompts, starts per commit, and the spec as resolved with its
input files' digests), so a bisect of an edited spec is another directory, and `--resume` with
an edited spec finds the one it would have continued and names what changed."""

from __future__ import annotations

from pathlib import Path

from sweeper.bisect.history import Commit, GitError, Source, git
from sweeper.bisect.reproducer import Reproducer, every_speculative, from_run
from sweeper.bisect.state import (
    STATE_FILE,
    BisectState,
    BisectStateError,
    CommitRecord,
    Metric,
)
from sweeper.catalog.records import RECORDS
from sweeper.plan import Plan
from sweeper.results.reader import MANIFEST, is_run_dir, latest_run
from sweeper.services.runtime_package import runtime_package_dir
from sweeper.spec import Spec
from sweeper.spec.load import PACKAGE_MARKER

#: What a tree holding the bundled runtime holds (`load_spec` checks `runtime.package` by it).
MARKER = "/".join(PACKAGE_MARKER)


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
    if from_run_dir is not None and not is_run_dir(from_run_dir):
        missing = "does not exist" if not from_run_dir.exists() else "is not a run directory"
        raise BisectUsage(
            f"--from-run {from_run_dir} {missing} (no {MANIFEST}): give a run directory, or "
            "--points"
        )
    if metric == "verdict":
        run = from_run_dir or latest_run(results, plan.spec.name)
        found = from_run(run) if run is not None else None
        if found is not None:
            return found
        if from_run_dir is not None:
            raise BisectUsage(f"{from_run_dir} shows no violation to reproduce; give --points")
    return every_speculative(plan)


def bisect_dir(results: Path, fresh: BisectState) -> Path:
    """`results/bisect/<sweep>-<good>-<bad>-<question key>`."""
    return results / "bisect" / f"{_range_name(fresh)}-{fresh.key()}"


def _range_name(state: BisectState) -> str:
    return f"{state.spec['name']}-{state.good[:10]}-{state.bad[:10]}"


def start_state(results: Path, resume: bool, fresh: BisectState) -> tuple[Path, BisectState]:
    """The directory and the state to walk: a new one (saved), or with `resume` the one on
    disk for the same question. A resume whose question changed (an edited spec or input file,
    other points...) is refused naming what changed, as is a directory whose state is gone."""
    directory = bisect_dir(results, fresh)
    state_file = directory / STATE_FILE
    if state_file.exists() or state_file.is_symlink():
        if not resume:
            raise BisectUsage(
                f"a bisect of this range exists in {directory}; --resume continues it"
            )
        state = BisectState.load(directory)
        changed = state.changes(fresh)
        if [c.sha for c in state.commits] != [c.sha for c in fresh.commits]:
            changed.append(f"its commits are not the {len(fresh.commits)} of the range")
        if changed:  # the same key yet another question: the file was edited
            said = "; ".join(changed)
            raise BisectStateError(
                f"{state_file} asks another question than its directory's name says ({said}): "
                f"it was edited; restore it, or move {directory} aside"
            )
        if fresh.all_parents and not state.all_parents:
            state.all_parents = True
            state.save(directory)
        return directory, state
    if (directory / "steps").exists():
        raise BisectStateError(
            f"{directory} holds steps but no {STATE_FILE} (deleted?): restore it, or move "
            f"{directory} aside to start the bisect afresh"
        )
    if resume:
        raise BisectUsage(_nothing_to_resume(results, fresh))
    directory.mkdir(parents=True, exist_ok=True)
    fresh.save(directory)
    return directory, fresh


def _nothing_to_resume(results: Path, fresh: BisectState) -> str:
    """Why `--resume` finds no bisect of this question: the newest bisect of the same range
    and what changed since it, or that there is none."""
    root = results / "bisect"
    others = sorted(
        (p for p in root.glob(f"{_range_name(fresh)}-*") if (p / STATE_FILE).exists()),
        key=lambda p: (p / STATE_FILE).stat().st_mtime,
        reverse=True,
    )
    if not others:
        return f"no bisect of this range to resume under {root}"
    changed = BisectState.load(others[0]).changes(fresh)
    more = f" ({len(others) - 1} other bisect(s) of this range there too)" if others[1:] else ""
    return (
        f"--resume: the bisect of this range in {others[0]} asked another question: "
        f"{'; '.join(changed)} changed since{more}. Restore them to resume it, or run "
        "without --resume to bisect the question as it is now"
    )


def new_state(
    spec_path: Path,
    plan: Plan,
    input_files: dict[str, str],
    source: Source,
    commits: list[Commit],
    metric: Metric,
    threshold: float | None,
    restarts: int,
    chosen: Reproducer,
    all_parents: bool,
) -> BisectState:
    """The question as asked now: the range (first parents, `commits`), the spec as resolved
    and its input files' digests (`input_files`), and how each commit is judged."""
    return BisectState(
        spec_path=str(spec_path.resolve()),
        spec=plan.spec.model_dump(mode="json"),
        input_files=input_files,
        repo=str(source.repo),
        prefix=source.prefix,
        good=commits[0].parents[0],
        bad=commits[-1].sha,
        commits=[
            CommitRecord(
                sha=c.sha, subject=c.subject, author=c.author, date=c.date, parents=[*c.parents]
            )
            for c in commits
        ],
        metric=metric,
        threshold=threshold,
        restarts=restarts,
        points=chosen.points,
        prompts=chosen.prompts,
        all_parents=all_parents,
    )
