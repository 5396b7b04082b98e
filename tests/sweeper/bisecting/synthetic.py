"""A bisect walked in-process over a real git history, each step's `sweeper run` replaced by a
run directory written through the run store with what the test says that commit shows: a
verdict, or throughput over restarts with the host's load. The walk, the judge, the search and
`bisect.json` are the product's; only the measuring is told. Cheap (no server starts), for the
walk's decisions: when to measure again, when to stop undecided, merges, what is said."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.bisect.history import Source
from sweeper.bisect.state import BisectState, CommitRecord
from sweeper.bisect.step import step_dir
from sweeper.bisect.walk import Walk
from sweeper.exit_codes import EXIT_OK
from sweeper.results.store import RunStore

SWEEP = "bis"
LABEL = "b8-k4-bs4-cg0"
POINT = f"local-{LABEL}-t0-c1"


@dataclass(frozen=True)
class Shows:
    """What one run of a commit shows: its verdict, and per restart its tok/s; `busy`: the
    CPU cores other processes used meanwhile (recorded as `measure.hostload` does)."""

    verdict: str = "exact"
    speeds: tuple[float, ...] = (100.0,)
    busy: float = 0.0


#: (sha, which run of it: 0, 1, ...) -> what that run shows.
Behaviour = Callable[[str, int], Shows]


@dataclass
class SyntheticSteps:
    """The walk's step runner: writes the run `behaviour` says, counts every run asked for."""

    behaviour: Behaviour
    runs: Counter[str] = field(default_factory=Counter)
    #: Called before each run is written; may raise as a run's refusal would.
    before: Callable[[str], None] = lambda sha: None

    def __call__(
        self, directory: Path, sha: str, sweep: str, spec_path: Path, say: Callable[[str], None]
    ) -> int:
        self.before(sha)
        shows = self.behaviour(sha, self.runs[sha])
        self.runs[sha] += 1
        write_run(step_dir(directory, sha) / "runs", shows)
        return EXIT_OK


def write_run(root: Path, shows: Shows) -> Path:
    """A finished run of the one point, a restart per speed, through `RunStore`."""
    store = RunStore.create(
        root,
        {"sweep": SWEEP, "sweeper_version": "test", "spec": {}, "runtime_source_hash": ""},
    )
    rows: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    for restart, speed in enumerate(shows.speeds):
        label = LABEL + (f"-rs{restart}" if restart else "")
        pid = f"local-{label}-t0-c1"
        rows.append(
            {
                "point_id": pid,
                "attempt": "a1",
                "host": "local",
                "server_label": label,
                "request_config_id": "t0-c1",
                "mode": "ddtree",
                "status": "ok",
                "reason": "",
                "determinism": shows.verdict,
                "output_tok_s": speed,
                "host_other_cpu": shows.busy,
                "host_cpus": 2,
                "host_busy": shows.busy >= 0.5,
            }
        )
        requests.append(
            {
                "point_id": pid,
                "attempt": "a1",
                "prompt_id": "p0",
                "verdict": shows.verdict,
                "divergence_index": 2 if shows.verdict != "exact" else None,
                "text": "w1 w2 w3",
            }
        )
    for name, lines in (("requests.jsonl", requests), ("points.jsonl", rows)):
        (store.dir / name).write_text("".join(json.dumps(r) + "\n" for r in lines))
    store.finish(store.points(), "complete", EXIT_OK, 1.0)
    return store.dir


def walk(
    directory: Path,
    repo: Path,
    good: str,
    commits: list[CommitRecord],
    steps: SyntheticSteps,
    said: list[str],
    **question: Any,
) -> Walk:
    """A new bisect of `commits` after `good` in `repo` (the fake runtime's history), its
    state saved in `directory`, stepping through `steps`, every line said kept in `said`."""
    directory.mkdir(parents=True, exist_ok=True)
    state = BisectState(
        spec_path="bis.yaml",
        spec={"name": SWEEP},
        input_files={},
        repo=str(repo),
        prefix="",
        good=good,
        bad=commits[-1].sha,
        commits=commits,
        points=[POINT],
        **{"metric": "verdict", **question},
    )
    state.save(directory)
    source = Source.of(repo)
    return Walk(state, directory, source, {"runtime": {"model": "fake"}}, SWEEP, said.append, steps)


def records(source: Source, good: str, bad: str) -> list[CommitRecord]:
    """The range as the command records it."""
    return [
        CommitRecord(
            sha=c.sha, subject=c.subject, author=c.author, date=c.date, parents=[*c.parents]
        )
        for c in source.commits(good, bad)
    ]
