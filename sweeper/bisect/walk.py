"""The order of a bisect: both ends first, then the commit nearest the middle of what is left,
each measured until it is decided (a resume reads the steps already in `bisect.json` and their
run directories), until one commit, or a range hidden by skips, is left.

The walk follows first parents (`git log --first-parent`): over a merged branch it names the
merge. With `--all-parents`, a merge it names is walked into: the branch's tip is measured, and
when it is bad the branch's own commits are bisected (its first parent, already good, is the
good side), as `git bisect` would name the branch commit; when the tip is good the merge itself
is the answer.

Under `output_tok_s` a commit the judge cannot decide yet is measured again (the end whose
interval is too wide, or both: `judge.judge_speed`), pooled with what it measured, up to
`MAX_RUNS` runs per commit in one invocation; past that the bisect stops undecided, naming the
noise and the host's load, never guessing (`--resume` measures again).

Exit codes (`sweeper.exit_codes`): 0 answered; 7 the ends are not as claimed (one line says
how); 3 an end could not be judged (its points did not run); 6 too noisy to decide; 130
interrupted (`--resume` continues); a step whose run broke for the sweeper's own reasons stops
the bisect with that run's exit code, nothing recorded of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.bisect.history import GitError, Source
from sweeper.bisect.judge import (
    Judgement,
    host_load,
    judge_reference,
    judge_speed,
    judge_verdict,
)
from sweeper.bisect.search import Outcome, bounds, culprits, next_commit, steps_bound
from sweeper.bisect.state import Answer, BisectState, Branch, CommitRecord, StepRecord
from sweeper.bisect.step import (
    NoPackage,
    StepBroken,
    StepInterrupted,
    finished_runs,
    prepare,
    run_step,
)
from sweeper.exit_codes import (
    EXIT_ENDS_NOT_AS_CLAIMED,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNPROVEN,
)

#: Runs of one commit in one invocation while it stays undecided (each of the bisect's starts
#: per commit): more restarts narrow an interval, a guess never does.
MAX_RUNS = 3

#: `run_step`'s shape: (bisect dir, sha, sweep, step spec, say) -> the run's exit code.
StepRunner = Callable[[Path, str, str, Path, Callable[[str], None]], int]


class Undecidable(Exception):
    """A commit stayed undecided after `MAX_RUNS` runs: the message names the noise."""


@dataclass
class Walk:
    """A bisect in progress: its state on disk, the spec data each step runs, where to say
    what happens, and what runs a step (`step.run_step`: a `sweeper run` subprocess)."""

    state: BisectState
    directory: Path
    source: Source
    spec_data: dict[str, Any]
    sweep: str
    echo: Callable[[str], None]
    run_one: StepRunner = run_step
    #: Runs each commit was measured in during this invocation (the cap's count).
    _runs: Counter[str] = field(default_factory=Counter, init=False)

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
            line = (
                f"{exc}: the sweeper's own input, not the commit, so nothing of this step is "
                "recorded; fix it and --resume measures it again"
            )
            return self._stop(f"error: {line}", exc.code)
        except Undecidable as exc:
            return self._stop(str(exc), EXIT_UNPROVEN)

    def _run(self) -> int:
        good = self._measure(self.state.good, "good end")
        if good.outcome != "good":
            return self._end_not_as_claimed(good, "good end", "good")
        bad = self._measure(self.state.commits[-1].sha, "bad end")
        if bad.outcome != "bad":
            return self._end_not_as_claimed(bad, "bad end", "bad")
        found = self._search(self.state.commits, "step")
        notes: list[str] = []
        while len(found) == 1 and len(found[0].parents) > 1:
            merge = found[0]
            if not self.state.all_parents:
                notes.append(
                    f"{merge.sha[:10]} is a merge: the commits of the branch it merged were not "
                    "walked; --resume --all-parents walks into it"
                )
                break
            branch = self._branch(merge)
            shas = [c.sha for c in branch.commits]
            tip = self._measure(shas[-1], "branch tip", shas) if shas else None
            if tip is None or tip.outcome != "bad":
                notes.append(self._merge_itself(merge, tip))
                break
            found = self._search(branch.commits, "branch step")
        return self._answer(found, notes)

    def _stop(self, line: str, code: int) -> int:
        self.state.status = line
        self.state.save(self.directory)
        self.echo(line)
        return code

    def _end_not_as_claimed(self, record: StepRecord, role: str, claimed: str) -> int:
        sha = record.sha[:10]
        if record.outcome == "skip":
            return self._stop(f"the {role} {sha} could not be judged: {record.reason}", EXIT_FAILED)
        line = f"the {role} {sha} is not {claimed}: {record.reason}"
        return self._stop(line, EXIT_ENDS_NOT_AS_CLAIMED)

    # --- one range -------------------------------------------------------------------------

    def _search(self, commits: Sequence[CommitRecord], role: str) -> tuple[CommitRecord, ...]:
        """Bisect `commits` (their good side already good, the last already bad)."""
        shas = [c.sha for c in commits]
        while (index := next_commit(len(shas), self._outcomes(shas))) is not None:
            taken = sum(s.role.startswith(role) for s in self.state.steps)
            self._measure(shas[index], f"{role} {taken + 1}", shas)
        return tuple(commits[i] for i in culprits(len(shas), self._outcomes(shas)))

    def _outcomes(self, shas: Sequence[str]) -> dict[int, Outcome]:
        index = {sha: i for i, sha in enumerate(shas)}
        return {index[s.sha]: s.outcome for s in self.state.steps if s.sha in index}

    def _branch(self, merge: CommitRecord) -> Branch:
        """The branch `merge` brought in, recorded once (a resume reads it back)."""
        known = next((b for b in self.state.branches if b.merge == merge.sha), None)
        if known is not None:
            return known
        good = merge.parents[0]
        commits = self.source.branch(good, merge.parents[1])
        branch = Branch(
            merge=merge.sha,
            commits=[
                CommitRecord(
                    sha=c.sha, subject=c.subject, author=c.author, date=c.date, parents=[*c.parents]
                )
                for c in commits
            ],
        )
        self.state.branches.append(branch)
        self.state.save(self.directory)
        self.echo(
            f"walking into the branch merged by {merge.sha[:10]}: {len(commits)} commit(s) "
            f"after {good[:10]} up to its tip"
        )
        return branch

    def _merge_itself(self, merge: CommitRecord, tip: StepRecord | None) -> str:
        if tip is None:
            return f"the merge {merge.sha[:10]} brought in no commit of its own branch"
        said = {"good": "good", "skip": "could not be judged"}[tip.outcome]
        return (
            f"the branch merged by {merge.sha[:10]} is {said} at its tip {tip.sha[:10]}: the "
            "merge itself is the first bad commit"
        )

    # --- one commit ------------------------------------------------------------------------

    def _measure(self, sha: str, role: str, shas: Sequence[str] = ()) -> StepRecord:
        done = self.state.step_of(sha)
        if done is not None:
            self.echo(f"{role} {sha[:10]}: {done.outcome} (measured before: {done.reason})")
            return done
        self.echo(f"{role} {sha[:10]} {self._subject(sha)}: measuring ({self._left(shas)})")
        try:
            spec_path = prepare(self.directory, self.source, sha, self.spec_data)
        except (GitError, NoPackage) as exc:  # the package is not where it is elsewhere
            judgement = Judgement("skip", f"the commit's tree cannot be run: {exc}", [])
        else:
            judgement = self._judge(sha, role, spec_path)
        assert judgement.outcome is not None
        record = StepRecord(
            sha=sha,
            role=role,
            outcome=judgement.outcome,
            reason=judgement.reason,
            runs=[str(r) for r in finished_runs(self.directory, sha, self.sweep)],
            points=judgement.points,
        )
        self.state.steps.append(record)
        self.state.save(self.directory)
        self.echo(f"{role} {sha[:10]}: {record.outcome}: {judgement.reason}")
        return record

    def _judge(self, sha: str, role: str, spec_path: Path) -> Judgement:
        """Measured (once, or resumed) and judged; while undecided, the end(s) the judgement
        names measured again, until decided or every one of them has run `MAX_RUNS` times."""
        if not finished_runs(self.directory, sha, self.sweep):
            self._run_once(sha, spec_path)
        while True:
            judgement = self._judge_runs(sha)
            if judgement.outcome is not None:
                return judgement
            ends = {"commit": sha, "good": self.state.good}
            again = sorted({ends[e] for e in judgement.again}, key=lambda s: s != sha)
            room = [s for s in again if self._runs[s] < MAX_RUNS]
            if not room:
                raise Undecidable(self._undecided(sha, role, judgement))
            which = [
                "the good end" if other == self.state.good else f"{role} {other[:10]}"
                for other in room
            ]
            self.echo(f"  undecided: {judgement.reason}; measuring {' and '.join(which)} again")
            for other in room:
                path = spec_path if other == sha else self._prepared(other)
                self._run_once(other, path)
                if other == self.state.good and other != sha:
                    self._refresh_good()

    def _run_once(self, sha: str, spec_path: Path) -> None:
        self._runs[sha] += 1
        self.run_one(self.directory, sha, self.sweep, spec_path, self.echo)

    def _prepared(self, sha: str) -> Path:
        return prepare(self.directory, self.source, sha, self.spec_data)

    def _judge_runs(self, sha: str) -> Judgement:
        runs = finished_runs(self.directory, sha, self.sweep)
        points = self.state.points
        if self.state.metric == "verdict":
            return judge_verdict(runs, points)
        if sha == self.state.good:  # the good end itself: the reference
            return judge_reference(runs, points)
        assert self.state.threshold is not None
        good = finished_runs(self.directory, self.state.good, self.sweep)
        return judge_speed(runs, good, points, self.state.threshold)

    def _refresh_good(self) -> None:
        """The good end's record after it was measured again: its runs and pooled evidence."""
        record = self.state.step_of(self.state.good)
        assert record is not None
        runs = finished_runs(self.directory, self.state.good, self.sweep)
        judged = judge_reference(runs, self.state.points)
        record.runs = [str(r) for r in runs]
        record.points = judged.points
        record.reason = judged.reason
        self.state.save(self.directory)

    def _undecided(self, sha: str, role: str, judgement: Judgement) -> str:
        runs = dict.fromkeys(
            [
                *finished_runs(self.directory, sha, self.sweep),
                *finished_runs(self.directory, self.state.good, self.sweep),
            ]
        )
        load = host_load(runs, self.state.points)
        return (
            f"could not decide: {role} {sha[:10]} stays undecided after {self._runs[sha]} "
            f"measurement(s) this time: {judgement.reason}. That is noise, not an answer "
            f"({load}); --resume measures again, pooled with these (best on a quieter host)"
        )

    # --- what is said --------------------------------------------------------------------

    def _commit(self, sha: str) -> CommitRecord:
        every = [*self.state.commits, *(c for b in self.state.branches for c in b.commits)]
        return next(c for c in every if c.sha == sha)

    def _subject(self, sha: str) -> str:
        return "(good end)" if sha == self.state.good else repr(self._commit(sha).subject)

    def _left(self, shas: Sequence[str]) -> str:
        if not shas:
            n = len(self.state.commits)
            return f"{n} commit(s) after the good end, at most {steps_bound(n)} steps"
        b = bounds(len(shas), self._outcomes(shas))
        left = len(b.untested) + len(b.skipped) + 1
        more = steps_bound(len(b.untested) + 1) - 2 if b.untested else 0
        return f"{left} commit(s) left, about {more} more step(s)"

    def _answer(self, found: tuple[CommitRecord, ...], notes: list[str]) -> int:
        last = found[-1]
        first = self.state.step_of(last.sha)
        assert first is not None
        merged_by = next(
            (b.merge for b in self.state.branches if last.sha in {c.sha for c in b.commits}), None
        )
        on = f" on the branch merged by {merged_by[:10]}" if merged_by else ""
        if len(found) == 1:
            summary = (
                f"first bad commit: {last.sha} {last.subject!r} ({last.date}, {last.author}){on}"
            )
        else:
            skipped = ", ".join(c.sha[:10] for c in found[:-1])
            summary = (
                f"the first bad commit is one of {len(found)}: {skipped} (skipped: could not be "
                f"judged) and {last.sha[:10]} {last.subject!r} (bad){on}"
            )
        if notes:
            summary += f" ({'; '.join(notes)})"
        stat = self.source.show_stat(last.sha)
        self.state.answer = Answer(
            culprits=[c.sha for c in found], summary=summary, evidence=first.points, show_stat=stat
        )
        self.state.status = "answered"
        self.state.save(self.directory)
        self.echo(summary)
        shown = [f"{p.point_id}: {p.detail}" for p in first.points if p.detail]
        self.echo("evidence: " + ("; ".join(shown) if shown else first.reason))
        self.echo(self._measured())
        self.echo(stat.rstrip())
        return EXIT_OK

    def _measured(self) -> str:
        """How much was measured, along which parents: never more than the range holds."""
        n = len(self.state.commits)
        between = sum(s.role.startswith("step") for s in self.state.steps)
        said = (
            f"{len(self.state.steps)} commit(s) measured: the good end, the bad end and "
            f"{between} of the {n - 1} between them along first parents "
            f"(git log --first-parent {self.state.good[:10]}..{self.state.bad[:10]})"
        )
        for branch in self.state.branches:
            before = {c.sha for c in branch.commits[:-1]}
            walked = sum(s.sha in before for s in self.state.steps)
            said += (
                f"; on the branch merged by {branch.merge[:10]}: its tip and {walked} of the "
                f"{len(before)} before it"
            )
        return f"{said}; runs under {self.directory}"
