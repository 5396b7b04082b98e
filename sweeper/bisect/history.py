"""The runtime's git history, read without touching the user's checkout.

Every question is a `git -C REPO ...` plumbing call: the commits between two revisions (first
parent, the order a bisect walks), one commit's subject and date, its `git show --stat`, and
its tree at a path written elsewhere (`git archive`, unpacked with tarfile): the work tree, the
index and HEAD are never read or changed, so the user may go on editing while a bisect runs.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path


class GitError(RuntimeError):
    """A git command failed; the message is git's own last line."""


@dataclass(frozen=True)
class Commit:
    """One commit of the range: what the answer names."""

    sha: str
    subject: str
    author: str
    date: str  # author date, ISO 8601

    @property
    def short(self) -> str:
        return self.sha[:10]


def git(repo: Path, *args: str, binary: bool = False) -> str:
    """`git -C repo args...`'s stdout; a failure is a `GitError` with git's message."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, check=False, timeout=120
    )
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"]
        raise GitError(f"git {' '.join(args[:2])} in {repo}: {lines[-1]}")
    return done.stdout.decode(errors="replace")


def _git_bytes(repo: Path, *args: str) -> bytes:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, check=False, timeout=300
    )
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"]
        raise GitError(f"git {args[0]} in {repo}: {message[-1]}")
    return done.stdout


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
        """The commits after `good` up to and including `bad`, oldest first, along the first
        parent; a GitError when `good` is not an ancestor of `bad`."""
        good_sha, bad_sha = self.resolve(good), self.resolve(bad)
        done = subprocess.run(
            ["git", "-C", str(self.repo), "merge-base", "--is-ancestor", good_sha, bad_sha],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            raise GitError(f"{good} is not an ancestor of {bad}: nothing to bisect between them")
        out = git(
            self.repo,
            "log",
            "--first-parent",
            "--reverse",
            "--format=%H%x00%an%x00%aI%x00%s",
            f"{good_sha}..{bad_sha}",
        )
        return [self._parse(line) for line in out.splitlines() if line]

    def commit(self, rev: str) -> Commit:
        out = git(self.repo, "log", "-1", "--format=%H%x00%an%x00%aI%x00%s", rev)
        return self._parse(out.strip())

    @staticmethod
    def _parse(line: str) -> Commit:
        sha, author, date, subject = line.split("\0", 3)
        return Commit(sha, subject, author, date)

    def show_stat(self, sha: str) -> str:
        """`git show --stat` of a commit (its message and the files it changed)."""
        return git(
            self.repo, "show", "--stat", "--format=commit %H%nAuthor: %an%nDate:   %aI%n%n%B", sha
        )

    def materialise(self, sha: str, dest: Path) -> Path:
        """The package directory's tree at `sha`, written under `dest` (which then holds
        `ddtree_runtime/` as the step's `runtime.package`); `dest` itself is returned."""
        data = _git_bytes(
            self.repo, "archive", "--format=tar", sha, *([self.prefix] if self.prefix else [])
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


def source_commit(package: Path) -> str | None:
    """The commit a runtime package's source is at (`<sha>`, `<sha>-dirty` when its files
    differ from it), None outside a git repository: what a run's manifest records, so a
    nightly regression can be bisected between two runs' commits."""
    try:
        source = Source.of(package)
        sha = source.resolve("HEAD")
        status = git(source.repo, "status", "--porcelain", "--", source.prefix or ".")
    except (GitError, OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if status.strip() else sha
