"""The runtime's git history as a bisect reads it, on real repositories: the range between two
revisions oldest first with subjects, a bad range or revision refused with a GitError, one
commit's package tree written elsewhere exactly (its prefix stripped when the package sits in a
subdirectory) while the user's dirty checkout stays untouched, and the commit a run's manifest
records (`<sha>`, `<sha>-dirty`, None outside git)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sweeper.bisect.history import GitError, Source
from sweeper.services.git_source import source_commit
from tests.sweeper.bisecting.histories import git, merged_history, runtime_history

COMMITS = 5


@pytest.fixture(autouse=True)
def _no_enclosing_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git never looks above tmp_path for a repository, wherever the tmp dir lives."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "runtime"
    return repo, runtime_history(repo, commits=COMMITS, fake=True)


def commit_all(repo: Path, subject: str) -> str:
    git(repo, "add", "-A")
    subprocess.run(
        ["git", "-C", str(repo), "commit", "-q", "-m", subject],
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(repo)},
    )
    return git(repo, "rev-parse", "HEAD")


def tree_files(repo: Path, sha: str) -> list[str]:
    return git(repo, "ls-tree", "-r", "--name-only", sha).splitlines()


def show(repo: Path, sha: str, path: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"{sha}:{path}"], check=True, capture_output=True
    ).stdout


def files_under(dest: Path) -> set[str]:
    return {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}


def test_source_of_a_package_at_the_top(history: tuple[Path, list[str]]) -> None:
    repo, _ = history
    source = Source.of(repo)
    assert source == Source(repo.resolve(), "")


def test_commits_are_the_range_after_good_oldest_first(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    source = Source.of(repo)
    commits = source.commits(shas[0], shas[-1])
    assert [c.sha for c in commits] == shas[1:]
    assert [c.subject for c in commits] == [f"change {k}: routine edit" for k in range(1, 6)]
    assert {c.author for c in commits} == {"Runtime Dev"}
    assert commits[0].date == "2026-07-01T11:00:00+00:00"
    assert [c.parents for c in commits] == [(a,) for a in shas[:-1]]
    # Any revision names its commit; a range inside the history is just that part.
    assert [c.sha for c in source.commits("HEAD~3", "HEAD~1")] == shas[3:5]
    assert source.commits(shas[2], shas[2]) == []


def test_a_good_that_is_no_ancestor_of_bad_is_refused(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    source = Source.of(repo)
    with pytest.raises(GitError, match="is not an ancestor of"):
        source.commits(shas[3], shas[1])
    # A side branch off an older commit: neither end is an ancestor of the other.
    git(repo, "checkout", "-q", "-b", "side", shas[2])
    (repo / "ddtree_runtime" / "side.py").write_text("SIDE = 1\n")
    side = commit_all(repo, "side change")
    with pytest.raises(GitError, match=f"{side} is not an ancestor of {shas[-1]}"):
        source.commits(side, shas[-1])


def test_resolve_names_a_commit_or_raises(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    source = Source.of(repo)
    assert source.resolve("HEAD") == shas[-1]
    assert source.resolve("main~2") == shas[-3]
    assert source.resolve(shas[1][:10]) == shas[1]
    for bad in ("no-such-branch", "HEAD~99", "0" * 40):
        with pytest.raises(GitError) as raised:
            source.resolve(bad)
        assert bad in str(raised.value)  # the message names the revision
    with pytest.raises(GitError, match="no-such-branch"):
        source.commits("no-such-branch", "HEAD")


def test_show_stat(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    source = Source.of(repo)
    stat = source.show_stat(shas[3])
    assert stat.startswith(f"commit {shas[3]}\n")
    assert "change 3: routine edit" in stat
    assert "ddtree_runtime/changelog.py" in stat
    assert "1 file changed" in stat


def test_materialise_writes_exactly_the_commits_files_and_leaves_the_checkout(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, shas = history
    changelog = repo / "ddtree_runtime" / "changelog.py"
    changelog.write_text("# the user's unsaved edit\n")
    (repo / "ddtree_runtime" / "scratch.py").write_text("UNTRACKED = True\n")
    before = (git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain"))
    assert before[1]  # the work tree is dirty

    sha = shas[2]
    dest = tmp_path / "steps" / "2"
    assert Source.of(repo).materialise(sha, dest) == dest

    expected = tree_files(repo, sha)
    assert files_under(dest) == set(expected)
    for path in expected:
        assert (dest / path).read_bytes() == show(repo, sha, path), path
    assert (dest / "ddtree_runtime" / "changelog.py").read_text() == "# change 2\nCHANGE = 2\n"

    assert (git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")) == before
    assert changelog.read_text() == "# the user's unsaved edit\n"
    assert (repo / "ddtree_runtime" / "scratch.py").read_text() == "UNTRACKED = True\n"


def test_a_package_in_a_subdirectory_materialises_with_the_prefix_stripped(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, _ = history
    (repo / "runtimes" / "main").mkdir(parents=True)
    git(repo, "mv", "ddtree_runtime", "runtimes/main/ddtree_runtime")
    (repo / "README.md").write_text("outside the package\n")
    (repo / "runtimes" / "main" / "run.sh").write_text("#!/bin/sh\necho run\n")
    (repo / "runtimes" / "main" / "run.sh").chmod(0o755)
    sha = commit_all(repo, "move the runtime under runtimes/main")

    package = repo / "runtimes" / "main"
    source = Source.of(package)
    assert source == Source(repo.resolve(), "runtimes/main")
    dest = source.materialise(sha, tmp_path / "step")

    inside = [p for p in tree_files(repo, sha) if p.startswith("runtimes/main/")]
    stripped = {p.removeprefix("runtimes/main/") for p in inside}
    assert files_under(dest) == stripped
    assert "ddtree_runtime/__main__.py" in stripped and "README.md" not in stripped
    for path in inside:
        assert (dest / path.removeprefix("runtimes/main/")).read_bytes() == show(repo, sha, path)
    assert (dest / "run.sh").stat().st_mode & 0o111  # the executable bit survives


def test_a_package_outside_the_named_repo_is_refused(
    history: tuple[Path, list[str]], tmp_path: Path
) -> None:
    repo, _ = history
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(GitError, match="is not inside the repository"):
        Source.of(elsewhere, repo=repo)
    with pytest.raises(GitError):
        Source.of(elsewhere)  # not in any repository


def test_source_commit_is_head_then_dirty_when_the_package_changes(
    history: tuple[Path, list[str]],
) -> None:
    repo, shas = history
    assert source_commit(repo) == shas[-1]
    (repo / "ddtree_runtime" / "changelog.py").write_text("# edited\n")
    assert source_commit(repo) == f"{shas[-1]}-dirty"
    git(repo, "checkout", "--", "ddtree_runtime/changelog.py")
    assert source_commit(repo) == shas[-1]
    (repo / "ddtree_runtime" / "new.py").write_text("NEW = 1\n")  # untracked counts too
    assert source_commit(repo) == f"{shas[-1]}-dirty"


def test_source_commit_of_a_subdirectory_package_sees_only_its_own_files(
    history: tuple[Path, list[str]],
) -> None:
    repo, _ = history
    (repo / "pkg").mkdir()
    git(repo, "mv", "ddtree_runtime", "pkg/ddtree_runtime")
    (repo / "other").mkdir()
    (repo / "other" / "notes.txt").write_text("v1\n")
    sha = commit_all(repo, "move the runtime under pkg")
    assert source_commit(repo / "pkg") == sha
    (repo / "other" / "notes.txt").write_text("v2\n")  # outside the package: still clean
    assert source_commit(repo / "pkg") == sha
    (repo / "pkg" / "ddtree_runtime" / "changelog.py").write_text("# edited\n")
    assert source_commit(repo / "pkg") == f"{sha}-dirty"


def test_source_commit_outside_git_is_none(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (plain / "ddtree_runtime").mkdir(parents=True)
    assert source_commit(plain) is None
    assert source_commit(tmp_path / "missing") is None


def test_item4_first_parents_and_a_merged_branch(tmp_path: Path) -> None:
    """The range is walked along first parents (a merge is one commit of it, with both its
    parents); `branch` lists what the merge brought in, oldest first; a good end that is an
    ancestor only through the merged branch is refused, never walked as if on the line."""
    repo = tmp_path / "merged"
    shas = merged_history(repo)
    source = Source.of(repo)
    commits = source.commits(shas["base"], shas["c2"])
    assert [c.sha for c in commits] == [shas["c1"], shas["merge"], shas["c2"]]
    merge = commits[1]
    assert merge.parents == (shas["c1"], shas["b3"])
    assert [c.sha for c in source.branch(*merge.parents)] == [shas["b1"], shas["b2"], shas["b3"]]
    with pytest.raises(GitError, match="only through a merged branch, not along its first"):
        source.commits(shas["b1"], shas["c2"])
