"""Git histories of a runtime package to bisect: a base commit, then one ordinary change per
commit, with planted events at chosen commits (each stays planted in every later commit, as a
real regression does, except `broken`, which the next commit repairs).

- real runtime (`fake=False`): a copy of the installed `ddtree_runtime`; `fault` is a fault of
  these tests' own, not one of mask.py's `_FAULTS`: the tree rows' mask stops one column short of
  the committed prefix (an off-by-one that hides the last committed token from every verify);
  `slow` sleeps in every verify forward; `broken` makes `python -m ddtree_runtime` fail to import.
- fake runtime (`fake=True`): the shim package of `sweep_fixtures` running the fake; `fault`
  makes speculative servers emit wrong tokens, `slow` delays every token of speculative servers.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.sweeper.planted import plant_fault
from tests.sweeper.sweep_fixtures import shim_files

MASK_LINE = (
    "    sees_prefix = (cols[None, None, :] < prefix_lens[:, None, None]) & tree.real[:, :, None]\n"
)
MASK_FAULT = MASK_LINE.replace("prefix_lens[:, None, None])", "prefix_lens[:, None, None] - 1)")
VERIFY_LINE = "        return self._upcast(out.logits)\n"
SLOW_VERIFY = "        __import__('time').sleep(0.05)\n" + VERIFY_LINE
BROKEN = 'raise ImportError("planted: this commit does not build")\n'
FAKE_BASE = (
    "import os\nos.environ['FAKE_SOURCE_HASH'] = 'self'\nos.environ['FAKE_TOKEN_DELAY'] = '0.01'\n"
)
FAKE_EVENTS = {
    "fault": (
        "os.environ['FAKE_WRONG_TOKENS'] = '1'\nos.environ['FAKE_WHEN'] = 'speculative=ddtree'\n"
    ),
    "slow": "os.environ['FAKE_DELAYS'] = '{\"speculative=ddtree\": 0.03}'\n",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path}: {old!r} not found once"
    path.write_text(text.replace(old, new))


def runtime_history(
    repo: Path, commits: int = 16, *, events: dict[int, str] | None = None, fake: bool = False
) -> list[str]:
    """A repository at `repo` whose package dir is `repo` itself (it holds `ddtree_runtime/`):
    the base commit, then `commits` more; `events` maps a commit number (1..commits) to
    `fault`, `slow` or `broken`. Returns the shas, base first."""
    events = events or {}
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Runtime Dev")
    package = repo / "ddtree_runtime"
    if fake:
        preamble = FAKE_BASE
        for name, text in shim_files(preamble=preamble).items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
    else:
        plant_fault(repo, None)
    shas = [_commit(repo, 0, "base: the runtime as released")]
    planted: list[str] = []
    for k in range(1, commits + 1):
        event = events.get(k)
        main = package / "__main__.py"
        if main.read_text().startswith(BROKEN):  # the commit after a broken one repairs it
            main.write_text(main.read_text()[len(BROKEN) :])
        (package / "changelog.py").write_text(f"# change {k}\nCHANGE = {k}\n")
        subject = f"change {k}: routine edit"
        if event == "broken":
            main.write_text(BROKEN + main.read_text())
            subject = f"change {k}: reorganise imports"
        elif event in ("fault", "slow"):
            planted.append(event)
            subject = f"change {k}: " + (
                "tidy the verify mask" if event == "fault" else "log verify"
            )
            if fake:
                preamble = FAKE_BASE + "".join(FAKE_EVENTS[e] for e in planted)
                for name, text in shim_files(preamble=preamble).items():
                    if name.endswith("__main__.py"):
                        main.write_text(text)
            elif event == "fault":
                _replace(package / "algo" / "mask.py", MASK_LINE, MASK_FAULT)
            else:
                _replace(package / "forward.py", VERIFY_LINE, SLOW_VERIFY)
        elif event is not None:
            raise ValueError(f"unknown event {event!r}")
        shas.append(_commit(repo, k, subject))
    return shas


def _commit(repo: Path, k: int, subject: str) -> str:
    git(repo, "add", "-A")
    date = f"2026-07-{1 + k // 2:02d}T{10 + k % 2}:00:00+00:00"
    subprocess.run(
        ["git", "-C", str(repo), "commit", "-q", "-m", subject],
        check=True,
        env={
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_DATE": date,
            "PATH": "/usr/bin:/bin",
            "HOME": str(repo),
        },
    )
    return git(repo, "rev-parse", "HEAD")


if __name__ == "__main__":
    import sys

    # python -m tests.sweeper.bisecting.histories DEST COMMITS [--fake] [K=EVENT ...]
    args = [a for a in sys.argv[3:] if a != "--fake"]
    planted = dict(arg.split("=") for arg in args)
    shas = runtime_history(
        Path(sys.argv[1]),
        int(sys.argv[2]),
        events={int(k): v for k, v in planted.items()},
        fake="--fake" in sys.argv,
    )
    print("\n".join(shas))


#: A SGLang fork's launcher: `python -m sglang.launch_server` runs the fake SGLang server
#: (tests/sweeper/fake_sglang.py), with `PLANTED` lines in between.
SGLANG_LAUNCHER = """import importlib.util, sys
here = {fake!r}
spec = importlib.util.spec_from_file_location("fake_sglang", here)
fake = importlib.util.module_from_spec(spec)
sys.modules["fake_sglang"] = fake
spec.loader.exec_module(fake)
{planted}sys.argv[0] = here
fake.main(sys.argv[1:])
"""
#: The fork's fault: speculative servers emit other tokens from the third one on.
SGLANG_FAULT = """if "--speculative-algorithm" in sys.argv:
    _ids = fake.output_ids
    fake.output_ids = lambda p, n: [t if i < 2 else (t + 1) % 997 for i, t in enumerate(_ids(p, n))]
"""
#: The fork's build step (`runtime.source.install: sh build.sh`); `broken` makes it fail.
BUILD_OK = "test -f python/sglang/launch_server.py\n"
BUILD_BROKEN = "echo 'planted: the build fails' >&2\nexit 1\n"


def sglang_history(repo: Path, commits: int, *, events: dict[int, str] | None = None) -> list[str]:
    """A SGLang fork's repository (`python/sglang/`, `build.sh`): the base commit, then
    `commits` more; `events`: commit -> `fault` (stays) or `broken` (its build fails; the
    next commit repairs it). Returns the shas, base first."""
    from tests.sweeper import fake_sglang

    events = events or {}
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Fork Dev")
    package = repo / "python" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    fake = str(Path(fake_sglang.__file__).resolve())
    launcher = package / "launch_server.py"
    launcher.write_text(SGLANG_LAUNCHER.format(fake=fake, planted=""))
    (repo / "build.sh").write_text(BUILD_OK)
    shas = [_commit(repo, 0, "base: the fork as branched")]
    for k in range(1, commits + 1):
        event = events.get(k)
        (repo / "build.sh").write_text(BUILD_BROKEN if event == "broken" else BUILD_OK)
        (package / "version.py").write_text(f"CHANGE = {k}\n")
        subject = f"change {k}: routine edit"
        if event == "fault":
            launcher.write_text(SGLANG_LAUNCHER.format(fake=fake, planted=SGLANG_FAULT))
            subject = f"change {k}: reuse the draft tree's ids"
        elif event == "broken":
            subject = f"change {k}: new kernel build"
        shas.append(_commit(repo, k, subject))
    return shas


def merged_history(repo: Path) -> dict[str, str]:
    """A history with a merged feature branch (the fake runtime's package): `base`; a branch
    `b1`, `b2`, `b3` off it; on main `c1`, then `merge` (first parent `c1`, second `b3`), then
    `c2`. Returns each name's sha. Which commit holds a fault is the test's to say."""
    shas = {"base": runtime_history(repo, 0, fake=True)[0]}
    changelog = repo / "ddtree_runtime" / "changelog.py"
    git(repo, "checkout", "-q", "-b", "feature")
    for name in ("b1", "b2", "b3"):
        (repo / "ddtree_runtime" / "feature.py").write_text(f"STEP = {name!r}\n")
        shas[name] = _commit(repo, len(shas), f"{name}: feature work")
    git(repo, "checkout", "-q", "main")
    changelog.write_text("CHANGE = 'c1'\n")
    shas["c1"] = _commit(repo, len(shas), "c1: routine edit")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "feature")
    shas["merge"] = git(repo, "rev-parse", "HEAD")
    changelog.write_text("CHANGE = 'c2'\n")
    shas["c2"] = _commit(repo, len(shas), "c2: routine edit")
    return shas
