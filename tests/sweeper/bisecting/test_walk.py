"""The bisect's walk over real git histories, each step's measurement told (`synthetic.py`):
a step refused for the bisect's own inputs is never the commit's outcome (item 1); speed is
judged against both ends' noise, a noisy end is measured again and pooled, and noise that will
not settle stops the bisect saying so, never "not bad" (item 2); a merge the first-parent walk
names is said to be one and `--all-parents` walks into its branch (item 4); the ends not being
as claimed has its own exit code (item 16); a step's tree edited since it was written is
refused (item 6)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from sweeper.bisect.history import Source
from sweeper.bisect.setup import bisect_dir, start_state
from sweeper.bisect.state import BisectState, BisectStateError
from sweeper.bisect.step import StepBroken, step_dir
from sweeper.bisect.walk import MAX_RUNS, Walk
from sweeper.exit_codes import (
    EXIT_BAD_SPEC,
    EXIT_ENDS_NOT_AS_CLAIMED,
    EXIT_OK,
    EXIT_UNPROVEN,
)
from tests.sweeper.bisecting.histories import merged_history, runtime_history
from tests.sweeper.bisecting.synthetic import Behaviour, Shows, SyntheticSteps, records, walk


@pytest.fixture(autouse=True)
def _no_enclosing_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))


def two_commits(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "repo"
    return repo, runtime_history(repo, 1, fake=True)


def resumed(old: Walk, steps: SyntheticSteps, said: list[str], **change: object) -> Walk:
    """The walk a `--resume` continues: the state read back from disk."""
    state = BisectState.load(old.directory)
    for name, value in change.items():
        setattr(state, name, value)
    return Walk(state, old.directory, old.source, old.spec_data, old.sweep, said.append, steps)


def bad_from(repo: Path, culprit: str) -> Behaviour:
    """Every commit that holds `culprit` diverges."""

    def shows(sha: str, _: int) -> Shows:
        holds = subprocess.run(
            ["git", "-C", str(repo), "merge-base", "--is-ancestor", culprit, sha], check=False
        )
        return Shows("diverged" if holds.returncode == 0 else "exact")

    return shows


def test_item1_a_step_refused_for_the_bisects_own_inputs_is_never_its_outcome(
    tmp_path: Path,
) -> None:
    repo, shas = two_commits(tmp_path)
    refusal = "the step's run ended with exit 2: error: RUN ran other inputs: spec x changed"

    def refuse(sha: str) -> None:
        if sha == shas[1]:
            raise StepBroken(EXIT_BAD_SPEC, refusal)

    steps = SyntheticSteps(bad_from(repo, shas[1]), before=refuse)
    said: list[str] = []
    first = walk(tmp_path / "b", repo, shas[0], records(Source.of(repo), *shas), steps, said)
    assert first.run() == EXIT_BAD_SPEC
    state = BisectState.load(first.directory)
    assert [s.sha for s in state.steps] == [shas[0]]  # the bad end: nothing recorded
    assert said[-1].startswith(f"error: {refusal}: the sweeper's own input, not the commit")
    assert "fix it and --resume measures it again" in said[-1] and "not bad" not in said[-1]
    # Attack: the bad end's tree, written before its run was refused, is edited meanwhile.
    tree = step_dir(first.directory, shas[1]) / "tree"
    (tree / "ddtree_runtime" / "changelog.py").write_text("CHANGE = 'edited'\n")
    fixed = SyntheticSteps(bad_from(repo, shas[1]))
    with pytest.raises(BisectStateError, match=f"is not commit {shas[1][:10]}'s tree as written"):
        resumed(first, fixed, said).run()
    assert fixed.runs[shas[1]] == 0  # never measured as that commit
    # Fixed as the line says: the resume measures the bad end, once, and answers.
    for path in (tree / "ddtree_runtime" / "changelog.py", tree.parent / "tree.sha256"):
        path.unlink()
    assert resumed(first, fixed, said).run() == EXIT_OK
    answer = BisectState.load(first.directory).answer
    assert answer is not None and answer.culprits == [shas[1]]
    assert dict(fixed.runs) == {shas[1]: 1}
    assert any(  # item 13: never "2 commit(s) measured of 1 in range"
        line.startswith("2 commit(s) measured: the good end, the bad end and 0 of the 0 between")
        for line in said
    )


def test_item2_a_good_end_too_wide_to_decide_is_measured_again_and_pooled(
    tmp_path: Path,
) -> None:
    """A commit half as fast as a good end whose interval (x1.22) is wider than the 10%
    threshold can resolve (x1.11): the ratio alone would call it bad, but an end that noisy
    decides nothing, so the good end (and only it: the commit's interval is narrow) is
    measured again, pooled (x1.06), and then the commit is named."""
    repo, shas = two_commits(tmp_path)

    def shows(sha: str, run: int) -> Shows:
        if sha == shas[0]:
            return Shows(speeds=(96.0, 100.0, 104.0) if run == 0 else (98.0, 100.0, 102.0))
        return Shows(speeds=(49.5, 50.0, 50.5))

    steps, said = SyntheticSteps(shows), list[str]()
    bisect = walk(
        tmp_path / "b",
        repo,
        shas[0],
        records(Source.of(repo), *shas),
        steps,
        said,
        metric="output_tok_s",
        threshold=0.1,
        restarts=3,
    )
    assert bisect.run() == EXIT_OK
    assert dict(steps.runs) == {shas[0]: 2, shas[1]: 1}
    state = BisectState.load(bisect.directory)
    assert state.answer is not None and state.answer.culprits == [shas[1]]
    good = state.step_of(shas[0])
    assert good is not None and good.points[0].n == 6 and len(good.runs) == 2
    blocked = next(line for line in said if line.startswith("  undecided:"))
    assert "the good end's interval spans x1.22, wider than the 10% threshold can resolve" in (
        blocked
    )
    assert blocked.endswith("measuring the good end again")
    bad = state.step_of(shas[1])
    assert bad is not None and bad.reason.endswith("-50.0%: wholly below the line 0.900")


@pytest.mark.parametrize(
    ("busy", "role", "blocker"),
    [
        # The machine: two CPU hogs beside every run. No restart is judged, so even
        # the good end (the reference) stays undecided.
        (1.9, "good end", "the good end has 0 of its 9 restart(s) measured on a quiet host"),
        # Restarts that scatter x3 with nothing seen beside them: too wide to decide.
        (0.0, "bad end", "the commit's interval spans x2.10, wider than the 10% threshold"),
    ],
)
def test_item2_noise_that_will_not_settle_stops_undecided_never_not_bad(
    tmp_path: Path, busy: float, role: str, blocker: str
) -> None:
    """Both ends' restarts scatter (x3); on a busy host or not, the end(s) in the way are
    measured again up to the cap, then the bisect stops (exit 6) naming the noise and the
    host's load: nothing is recorded as that end's outcome, and a resume measures again."""
    repo, shas = two_commits(tmp_path)
    noisy = {shas[0]: (50.0, 150.0, 100.0), shas[1]: (40.0, 120.0, 80.0)}
    steps = SyntheticSteps(lambda sha, _: Shows(speeds=noisy[sha], busy=busy))
    said: list[str] = []
    commits = records(Source.of(repo), *shas)
    bisect = walk(
        tmp_path / "b", repo, shas[0], commits, steps, said, metric="output_tok_s", threshold=0.1
    )
    assert bisect.run() == EXIT_UNPROVEN
    sha = shas[0] if role == "good end" else shas[1]
    assert dict(steps.runs) == {s: MAX_RUNS for s in shas[: shas.index(sha) + 1]}
    line = said[-1]
    assert line.startswith(f"could not decide: {role} {sha[:10]} stays undecided after 3 ")
    assert blocker in line
    restarts = 9 * len(steps.runs)
    busy_runs = restarts if busy else 0
    load = f"other processes used up to {busy:.2f} of 2 CPUs, {busy_runs} of {restarts} restart"
    assert load in line and line.endswith(
        "--resume measures again, pooled with these (best on a quieter host)"
    )
    assert "not bad" not in " ".join(said)
    state = BisectState.load(bisect.directory)
    assert state.step_of(sha) is None and state.status == line
    again = SyntheticSteps(steps.behaviour)
    assert resumed(bisect, again, said).run() == EXIT_UNPROVEN
    assert again.runs[sha] == MAX_RUNS  # measured again, pooled with the earlier runs


def test_item4_a_merge_is_named_as_one_and_all_parents_walks_into_it(tmp_path: Path) -> None:
    """The issue's shape: a merged feature branch whose second commit holds the fault. Along
    first parents the answer is the merge, said to be one; `--resume --all-parents` walks
    into the branch and names its commit, measuring nothing twice."""
    repo = tmp_path / "repo"
    shas = merged_history(repo)
    source = Source.of(repo)
    steps, said = SyntheticSteps(bad_from(repo, shas["b2"])), list[str]()
    commits = records(source, shas["base"], shas["c2"])
    first = walk(tmp_path / "b", repo, shas["base"], commits, steps, said)
    assert first.run() == EXIT_OK
    answer = BisectState.load(first.directory).answer
    assert answer is not None and answer.culprits == [shas["merge"]]
    assert answer.summary.startswith(f'first bad commit: {shas["merge"]} "Merge branch')
    assert "is a merge: the commits of the branch it merged were not walked; --resume " in (
        answer.summary
    )
    measured = (
        "4 commit(s) measured: the good end, the bad end and 2 of the 2 between them along "
        f"first parents (git log --first-parent {shas['base'][:10]}..{shas['c2'][:10]}); runs "
    )
    assert any(line.startswith(measured) for line in said)
    assert resumed(first, steps, said, all_parents=True).run() == EXIT_OK
    state = BisectState.load(first.directory)
    assert state.answer is not None and state.answer.culprits == [shas["b2"]]
    assert state.answer.summary.endswith(f"on the branch merged by {shas['merge'][:10]}")
    assert [s.role for s in state.steps][4:] == ["branch tip", "branch step 1", "branch step 2"]
    assert set(steps.runs.values()) == {1}  # every commit measured once
    assert any(
        f"; on the branch merged by {shas['merge'][:10]}: its tip and 2 of the 2 before it; runs"
        in line
        for line in said
    )


def test_item4_a_branch_good_at_its_tip_makes_the_merge_the_answer(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shas = merged_history(repo)
    steps, said = SyntheticSteps(bad_from(repo, shas["merge"])), list[str]()
    commits = records(Source.of(repo), shas["base"], shas["c2"])
    bisect = walk(tmp_path / "b", repo, shas["base"], commits, steps, said, all_parents=True)
    assert bisect.run() == EXIT_OK
    answer = BisectState.load(bisect.directory).answer
    assert answer is not None and answer.culprits == [shas["merge"]]
    assert f"is good at its tip {shas['b3'][:10]}: the merge itself is the first bad" in (
        answer.summary
    )


@pytest.mark.parametrize(
    ("metric", "shows", "line"),
    [
        ("verdict", lambda good: Shows("exact"), "the bad end {bad} is not bad: no violation"),
        ("verdict", lambda good: Shows("diverged"), "the good end {good} is not good: local-"),
        (
            "output_tok_s",
            lambda good: Shows(speeds=(100.0, 101.0, 99.0)),
            "the bad end {bad} is not bad: local-",
        ),
    ],
)
def test_item16_ends_not_as_claimed_exit_with_their_own_code(
    tmp_path: Path, metric: str, shows: Callable[[bool], Shows], line: str
) -> None:
    repo, shas = two_commits(tmp_path)
    steps = SyntheticSteps(lambda sha, _: shows(sha == shas[0]))
    said: list[str] = []
    commits = records(Source.of(repo), *shas)
    question = {"metric": metric, "threshold": 0.1 if metric == "output_tok_s" else None}
    bisect = walk(tmp_path / "b", repo, shas[0], commits, steps, said, **question)
    assert bisect.run() == EXIT_ENDS_NOT_AS_CLAIMED != 1
    assert said[-1].startswith(line.format(good=shas[0][:10], bad=shas[1][:10]))


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"commits": []}, "its commits are not the 1 of the range"),
        ({"threshold": 0.5}, "--threshold 0.5 -> None"),
        ({"spec": {"name": "other"}}, "spec name"),
    ],
)
def test_item6_a_bisect_json_edited_to_another_question_is_refused(
    tmp_path: Path, edit: dict[str, object], said: str
) -> None:
    """A `bisect.json` that still parses but no longer asks its directory's question (a hand
    edit): refused naming what differs, never walked (an empty range crashed the walk)."""
    repo, shas = two_commits(tmp_path)
    said_lines: list[str] = []
    fresh = walk(
        tmp_path / "scratch",
        repo,
        shas[0],
        records(Source.of(repo), *shas),
        SyntheticSteps(bad_from(repo, shas[1])),
        said_lines,
    ).state
    directory = bisect_dir(tmp_path / "results", fresh)
    directory.mkdir(parents=True)
    fresh.model_copy(update=edit).save(directory)
    with pytest.raises(BisectStateError, match="asks another question than its directory") as e:
        start_state(tmp_path / "results", True, fresh)
    assert said in str(e.value)
