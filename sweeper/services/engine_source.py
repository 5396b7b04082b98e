"""An engine run from a git checkout on its host (`runtime.source`): a SGLang or vLLM fork whose
package is put first on the server's PYTHONPATH instead of the installed one.

Without a `rev`, the checkout's work tree runs as it is. With one (a full sha: what `sweeper
bisect` sets at every step), the host writes that commit's tree with `git archive` into
`<root>/sources/<sha>/`, leaving the user's checkout untouched, runs the optional `install`
command there (a build step; its failure is the start's failure, so a bisect skips the commit),
and marks it complete; a later start of the same sha reuses it. The server's PYTHONPATH names
that directory, and the /proc identity proof checks every launched variable, so a server proven
ready runs the tree git names by that sha.
"""

from __future__ import annotations

import os
from pathlib import Path

from sweeper.hosts import Host

#: Run as `sh -c SCRIPT sh REPO SHA DEST INSTALL`: every value a positional parameter, never
#: spliced into the script; INSTALL is the spec's own shell command, run as one.
_CHECKOUT = r"""set -eu
repo=$1 sha=$2 dest=$3 install=$4
[ -e "$dest/.complete" ] && exit 0
rm -rf "$dest" "$dest.partial"
mkdir -p "$dest.partial"
git -C "$repo" archive --format=tar "$sha" | tar -x -C "$dest.partial"
mv "$dest.partial" "$dest"
if [ -n "$install" ]; then (cd "$dest" && sh -c "$install"); fi
touch "$dest/.complete"
"""

#: How long a checkout plus its install may take (a build can be long).
CHECKOUT_TIMEOUT_S = 1800.0


def source_dir(root: str, sha: str) -> str:
    """Where a commit's tree lies on a host: `<root>/sources/<sha>`."""
    return f"{root.rstrip('/')}/sources/{sha}"


def local_sources_root() -> str:
    """The local host's root for checkouts: a cache shared by runs (a tree is named by its
    sha, so any run may reuse it)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(cache) / "ddtree-sweeper")


def python_path(checkout: str, path: str) -> str:
    """The directory of a checkout that goes first on PYTHONPATH (`runtime.source.path`)."""
    return f"{checkout.rstrip('/')}/{path}" if path not in ("", ".") else checkout


def check_out(host: Host, repo: str, sha: str, dest: str, install: str | None) -> None:
    """Write commit `sha` of `repo` (on the host) into `dest` and run `install` there, once;
    a RuntimeError with the host's message when it fails."""
    done = host.run(
        ["sh", "-c", _CHECKOUT, "sh", repo, sha, dest, install or ""],
        timeout=CHECKOUT_TIMEOUT_S,
        check=False,
    )
    if done.exit_code != 0:
        lines = (done.stderr or done.stdout or "").strip().splitlines() or ["no output"]
        raise RuntimeError(
            f"checkout of {sha[:10]} from {repo} on {host.name} failed "
            f"(exit {done.exit_code}): {lines[-1]}"
        )
