"""The order of a bisect: both ends first, then the commit nearest the middle of what is left,
each measured once (a resume reads the steps already in `bisect.json` and their run
directories), until one commit, or a range hidden by skips, is left.

Exit codes: 0 answered; 1 the ends do not differ as claimed (one line says how); 130
interrupted (`--resume` continues); a step whose run broke for the sweeper's own reasons stops
the bisect with that run's exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper.analysis.objective import Interval
from sweeper.bisect.history import GitError, Source
from sweeper.bisect.judge import Judgement, judge_reference, judge_speed, judge_verdict
from sweeper.bisect.search import Outcome, bounds, culprits, next_commit, steps_bound
from sweeper.bisect.state import Answer, BisectState, StepRecord
from sweeper.bisect.step import (
    StepBroken,
    StepInterrupted,
    finished_runs,
    prepare,
    run_step,
)
from sweeper.exit_codes import EXIT_BAD_SPEC, EXIT_INTERRUPTED, EXIT_OK, EXIT_REGRESSION

#: How often an undecided commit (its interval straddles the threshold) is measured in all
#: before it counts as a skip: more restarts narrow the interval, a guess never does.
MAX_ATTEMPTS = 3


@dataclass
class Walk:
    """A bisect in progress: its state on disk, the spec data each step runs, where to say
    what happens."""

    state: BisectState
    directory: Path
    source: Source
    spec_data: dict[str, Any]
    sweep: str
    echo: Callable[[str], None]

    @property
    def shas(self) -> list[str]:
        return [c.sha for c in self.state.commits]

    def run(self) -> int:
        try:
            return self._run()
        except StepInterrupted as exc:
            self.echo(f"interrupted: {exc}; continue with --resume")
            return EXIT_INTERRUPTED
        except KeyboardInterrupt:
            self.echo("interrupted; continue with --resume")
            return EXIT_INTERRUPTED
        except StepBroken as exc:
            self.state.status = f"stopped: {exc}"
            self.state.save(self.directory)
            self.echo(f"error: {exc}")
            return exc.code

    def _run(self) -> int:
        good = self._measure(self.state.good, "good end")
        if good.outcome != "good":
            return self._ends_differ_not(
                f"the good end {self.state.good[:10]} is not good: {good.reason}"
            )
        bad = self._measure(self.shas[-1], "bad end")
        if bad.outcome != "bad":
            return self._ends_differ_not(
                f"the bad end {self.shas[-1][:10]} is not bad: {bad.reason}"
            )
        n = len(self.shas)
        while (index := next_commit(n, self._outcomes())) is not None:
            self._measure(self.shas[index], f"step {self._taken() + 1}")
        return self._answer(culprits(n, self._outcomes()))

    def _outcomes(self) -> dict[int, Outcome]:
        index = {sha: i for i, sha in enumerate(self.shas)}
        return {index[s.sha]: s.outcome for s in self.state.steps if s.sha in index}

    def _taken(self) -> int:
        return sum(s.role.startswith("step") for s in self.state.steps)

    def _ends_differ_not(self, line: str) -> int:
        self.state.status = line
        self.state.save(self.directory)
        self.echo(line)
        return EXIT_REGRESSION

    # --- one commit ------------------------------------------------------------------------

    def _measure(self, sha: str, role: str) -> StepRecord:
        done = self.state.step_of(sha)
        if done is not None:
            self.echo(f"{role} {sha[:10]}: {done.outcome} (measured before: {done.reason})")
            return done
        left = self._left()
        self.echo(f"{role} {sha[:10]} {self._subject(sha)}: measuring ({left})")
        try:
            spec_path = prepare(self.directory, self.source, sha, self.spec_data)
        except GitError as exc:  # the package is not where it is elsewhere in the range
            judgement = Judgement("skip", f"the commit's tree cannot be written: {exc}", [])
        else:
            judgement = self._judge(sha, spec_path)
        outcome = "skip" if judgement.outcome == "undecided" else judgement.outcome
        runs = [str(r) for r in finished_runs(self.directory, sha, self.sweep)]
        record = StepRecord(
            sha=sha,
            role=role,
            outcome=outcome,
            reason=judgement.reason,
            runs=runs,
            points=judgement.points,
        )
        self.state.steps.append(record)
        self.state.save(self.directory)
        self.echo(f"{role} {sha[:10]}: {outcome}: {judgement.reason}")
        return record

    def _judge(self, sha: str, spec_path: Path) -> Judgement:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            runs = finished_runs(self.directory, sha, self.sweep)
            if len(runs) < attempt:
                code, _, tail = run_step(self.directory, sha, self.sweep, spec_path)
                if code == EXIT_BAD_SPEC:
                    return Judgement("skip", f"the spec does not load at this commit: {tail}", [])
                runs = finished_runs(self.directory, sha, self.sweep)
            judgement = self._judge_runs(runs)
            if judgement.outcome != "undecided":
                return judgement
            self.echo(
                f"  undecided after {attempt} measurement(s): {judgement.reason}; measuring again"
            )
        return Judgement(
            "undecided",
            f"undecided after {MAX_ATTEMPTS} measurements: {judgement.reason}",
            judgement.points,
        )

    def _judge_runs(self, runs: list[Path]) -> Judgement:
        points = self.state.points
        if self.state.metric == "verdict":
            return judge_verdict(runs, points)
        good = self.state.step_of(self.state.good)
        if good is None:  # measuring the good end itself: it is the reference
            return judge_reference(runs, points)
        reference = {
            p.point_id: Interval(p.mean, p.low, p.high, p.n, None)
            for p in good.points
            if p.mean is not None
        }
        assert self.state.threshold is not None
        return judge_speed(runs, points, reference, self.state.threshold)

    # --- what is said --------------------------------------------------------------------

    def _subject(self, sha: str) -> str:
        if sha == self.state.good:
            return "(good end)"
        commit = next(c for c in self.state.commits if c.sha == sha)
        return f"{commit.subject!r}"

    def _left(self) -> str:
        outcomes = self._outcomes()
        if self.shas[-1] not in {s.sha for s in self.state.steps}:
            return f"{len(self.shas)} commits in range, at most {steps_bound(len(self.shas))} steps"
        b = bounds(len(self.shas), outcomes)
        left = len(b.untested) + len(b.skipped) + 1
        more = steps_bound(len(b.untested) + 1) - 2 if b.untested else 0
        return f"{left} commits left, about {more} more step(s); {self._taken()} step(s) taken"

    def _answer(self, found: tuple[int, ...]) -> int:
        shas = [self.shas[i] for i in found]
        first = self.state.step_of(shas[-1])
        assert first is not None
        commit = next(c for c in self.state.commits if c.sha == shas[-1])
        if len(shas) == 1:
            when = f"{commit.date}, {commit.author}"
            summary = f"first bad commit: {commit.sha} {commit.subject!r} ({when})"
        else:
            skipped = ", ".join(s[:10] for s in shas[:-1])
            summary = (
                f"the first bad commit is one of {len(shas)}: {skipped} (skipped: could not be "
                f"judged) and {commit.sha[:10]} {commit.subject!r} (bad)"
            )
        stat = self.source.show_stat(shas[-1])
        self.state.answer = Answer(
            culprits=shas, summary=summary, evidence=first.points, show_stat=stat
        )
        self.state.status = "answered"
        self.state.save(self.directory)
        measured = len(self.state.steps)
        self.echo(summary)
        shown = [f"{p.point_id}: {p.detail}" for p in first.points if p.detail]
        self.echo("evidence: " + ("; ".join(shown) if shown else first.reason))
        self.echo(
            f"{measured} commit(s) measured of {len(self.shas)} in range; "
            f"runs under {self.directory}"
        )
        self.echo(stat.rstrip())
        return EXIT_OK
