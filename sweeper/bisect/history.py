"""The runtime's git history, read without touching the user's checkout.

Every question is a `git -C REPO ...` plumbing call: the commits between two revisions along
first parents (the order a bisect walks), the commits a merge brought in (its branch, for
`--all-parents`), one commit's `git show --stat`, and its tree at a path written elsewhere
(`git archive`, unpacked with tarfile): the work tree, the index and HEAD are never read or
changed, so the user may go on editing while a bisect runs.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from sweeper.services.git_source import GitError, git, git_bytes

__all__ = ["Commit", "GitError", "Source", "git"]

_FORMAT = "--format=%H%x00%P%x00%an%x00%aI%x00%s"


@dataclass(frozen=True)
class Commit:
    """One commit of a range: what the answer names."""

    sha: str
    subject: str
    author: str
    date: str  # author date, ISO 8601
    #: Its parents' shas, first parent first (two or more: a merge).
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class Source:
    """Where a runtime's source lives in git: the repository and the directory, relative to
    its top, that holds the `ddtree_runtime` package (what `runtime.package` names)."""

    repo: Path
    prefix: str  # "" when the package sits at the repository's top

    @classmethod
    def of(cls, package: Path, repo: Path | None = None) -> Source:
        """The git repository holding `package` (or `repo` when given) and its path in it."""
        top = Path(git(repo or package, "rev-parse", "--show-toplevel").strip()).resolve()
        try:
            prefix = package.resolve().relative_to(top).as_posix()
        except ValueError:
            raise GitError(f"{package} is not inside the repository {top}") from None
        return cls(top, "" if prefix == "." else prefix)

    def resolve(self, rev: str) -> str:
        """The full sha a revision names (a GitError when it names no commit)."""
        try:
            return git(self.repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
        except GitError:
            raise GitError(f"{rev!r} names no commit in {self.repo}") from None

    def commits(self, good: str, bad: str) -> list[Commit]:
        """The commits after `good` up to and including `bad`, oldest first, along first
        parents; a GitError when `good` is not on `bad`'s first-parent line (not an ancestor at
        all, or one only through a merged branch: walking first parents from `bad` would never
        reach it, and the commits before its merge are no descendants of it)."""
        good_sha, bad_sha = self.resolve(good), self.resolve(bad)
        try:
            git(self.repo, "merge-base", "--is-ancestor", good_sha, bad_sha)
        except GitError:
            raise GitError(
                f"{good} is not an ancestor of {bad}: nothing to bisect between them"
            ) from None
        found = self._log("--first-parent", f"{good_sha}..{bad_sha}")
        if found and found[0].parents[:1] != (good_sha,):
            raise GitError(
                f"{good} is an ancestor of {bad} only through a merged branch, not along its "
                "first parents (the line a bisect walks): give a good end on that line, a "
                "main-line commit before the merge; --all-parents walks into a merge it names"
            )
        return found

    def branch(self, first: str, second: str) -> list[Commit]:
        """What a merge of `second` into `first` (its parents) brought in: the commits
        reachable from `second` but not from `first`, oldest first along the branch's first
        parents, its tip last."""
        return self._log("--first-parent", f"{first}..{second}")

    def _log(self, *args: str) -> list[Commit]:
        out = git(self.repo, "log", "--reverse", _FORMAT, *args)
        return [self._parse(line) for line in out.splitlines() if line]

    @staticmethod
    def _parse(line: str) -> Commit:
        sha, parents, author, date, subject = line.split("\0", 4)
        return Commit(sha, subject, author, date, tuple(parents.split()))

    def show_stat(self, sha: str) -> str:
        """`git show --stat` of a commit (its message and the files it changed)."""
        return git(
            self.repo, "show", "--stat", "--format=commit %H%nAuthor: %an%nDate:   %aI%n%n%B", sha
        )

    def materialise(self, sha: str, dest: Path) -> Path:
        """The package directory's tree at `sha`, written under `dest` (which then holds
        `ddtree_runtime/` as the step's `runtime.package`); `dest` itself is returned."""
        data = git_bytes(
            self.repo,
            "archive",
            "--format=tar",
            sha,
            *([self.prefix] if self.prefix else []),
            timeout=300,
        )
        dest.mkdir(parents=True, exist_ok=True)
        strip = len(self.prefix.split("/")) if self.prefix else 0
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                parts = Path(member.name).parts[strip:]
                if not parts or ".." in parts or not (member.isfile() or member.isdir()):
                    continue
                target = dest.joinpath(*parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None
                target.write_bytes(source.read())
                target.chmod(member.mode & 0o755)
        return dest
