"""The git commit a runtime's source is at, read with git's own plumbing.

What a run's manifest records (`runtime_commit`), so a nightly regression can be bisected
between two runs' commits; and the `git` call the bisect reads its history with. Here, beside
the runtime's package, so `run` records the commit without depending on the bisect.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


class GitError(RuntimeError):
    """A git command failed; the message is git's own last line."""


def git(repo: Path, *args: str, timeout: float = 120) -> str:
    """`git -C repo args...`'s stdout; a failure is a `GitError` with git's message."""
    return git_bytes(repo, *args, timeout=timeout).decode(errors="replace")


def git_bytes(repo: Path, *args: str, timeout: float = 120) -> bytes:
    """`git -C repo args...`'s stdout as bytes (an archive); a failure is a `GitError`."""
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, check=False, timeout=timeout
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise GitError(f"git {' '.join(args[:2])} in {repo}: {exc}") from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"]
        raise GitError(f"git {' '.join(args[:2])} in {repo}: {lines[-1]}")
    return done.stdout


def source_commit(package: Path) -> str | None:
    """The commit a source directory is at (`<sha>`, `<sha>-dirty` when its files differ from
    it, untracked ones included), None outside a git work tree. Only the directory's own files
    count: an edit elsewhere in the repository leaves it clean."""
    try:
        sha = git(package, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").strip()
        status = git(package, "status", "--porcelain", "--", ".")
    except (GitError, OSError):
        return None
    return f"{sha}-dirty" if status.strip() else sha
