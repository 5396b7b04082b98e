"""The damaged-state corpus: every file the sweeper reads back as state (a host's lease, a
bisect's state, a search's state, a run's manifest, records and settled verdicts) times every
way the corpus damages a file (its bytes, a directory, a FIFO, a link to /dev/zero, a file past
any cap; a settled line's columns besides), and what each command that reads it does: its exit
code and the one line it prints (`test_states.py` runs it in CI; `bench/damaged_states.py`
prints it as the table of docs/results.md). Each command runs under a deadline and a memory cap
(`tests.bounded`): a hang or a read without end fails, never stalls or swaps the machine.

The rule (the brief's): state that cannot be read as expected stops the command with one line
naming the file and what to do; it is never read as absent, never a traceback. Records are the
exception by design: a run's records live twice (the jsonl lines and the parquet views), so a
damaged copy is rebuilt from the other and said in a note (`sweeper repair` writes it back).

Each damage is laid on a sound file: a gone run's lease (so a readable one is taken over), the
state a bisect saves before its first step, a search's log, and the corpus's finished two-point
run of the fake runtime (`context.Shared`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.results.reader import POINTS_LOG, SETTLED_LOG
from tests.bounded import bounded
from tests.sweeper.bisecting.bisect_helpers import bisect_argv, bisect_spec
from tests.sweeper.bisecting.histories import runtime_history
from tests.sweeper.faults.context import Shared
from tests.sweeper.hosts.lease_damage import gone_text

#: Bytes of white space a "huge" file gains: past any lease (64 KiB), past argv's 128 KiB.
HUGE = 200_000
#: The size of an "oversized" file (sparse: no disk): past every state file's cap (16 GiB).
OVERSIZED = (16 << 30) + 1
#: Seconds a command may take on a damaged file before it counts as hung.
DEADLINE_S = 60


@dataclass(frozen=True)
class Kind:
    """One way a file is found: what is done to the sound file at `path`."""

    name: str
    what: str
    damage: Callable[[Path], None]


def _bytes(change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        path.write_bytes(change(path.read_bytes()))

    return damage


def _crlf(data: bytes) -> bytes:
    """Every line ended by CRLF (an editor on another system), the last one too."""
    lines = data.decode().splitlines()
    return "".join(line + "\r\n" for line in lines).encode()


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "x").write_text("a directory where the file must be")


def _parent_a_file(path: Path) -> None:
    shutil.rmtree(path.parent)
    path.parent.write_text("a file where the directory must be")


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _oversized(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(OVERSIZED)


def _settled_column(**columns: object) -> Callable[[Path], None]:
    """The sound settled line with `columns` set in it (a hand edit)."""

    def damage(path: Path) -> None:
        line = json.loads(path.read_text())
        path.write_text(json.dumps({**line, **columns}) + "\n")

    return damage


KINDS = [
    Kind("empty", "empty", _bytes(lambda data: b"")),
    Kind("truncated", "cut at half its length", _bytes(lambda data: data[: len(data) // 2])),
    Kind("empty_object", "`{}`", _bytes(lambda data: b"{}\n")),
    Kind("null", "`null`", _bytes(lambda data: b"null\n")),
    Kind("list", "`[]`", _bytes(lambda data: b"[]\n")),
    Kind("crlf", "CRLF line ends", _bytes(_crlf)),
    Kind("not_utf8", "a byte that is not UTF-8 first", _bytes(lambda data: b"\xff" + data)),
    Kind("huge", f"{HUGE // 1000} KB of white space added", _bytes(lambda d: d + b" " * HUGE)),
    Kind("directory", "a directory in its place", _directory),
    Kind("parent_a_file", "its directory a file", _parent_a_file),
    Kind("fifo", "a FIFO in its place", _fifo),
    Kind("dev_zero", "a link to /dev/zero in its place", _dev_zero),
    Kind("oversized", "16 GiB (sparse), past every cap", _oversized),
]
#: Damage only a settled line can have: a column of another type, a measurement (which a
#: settled line never sets), a verdict that is none.
SETTLED_KINDS = [
    Kind("wrong_type", '`scored_p: "low"`', _settled_column(scored_p="low")),
    Kind("measurement", "`output_tok_s: 99999`", _settled_column(output_tok_s=99999)),
    Kind("unknown_verdict", '`determinism: "bogus"`', _settled_column(determinism="bogus")),
]


@dataclass
class Scene:
    """One damaged file's surroundings: a scratch directory, the shared finished run, and what
    the file's maker set up (a state directory, a run copy, a bisect's argv)."""

    tmp: Path
    shared: Shared
    run: Path | None = None
    spec: Path | None = None
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    #: Paths shown in the table as these words (the scratch directory's names vary).
    names: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StateFile:
    """A file read back as state: how a sound one is made (its path returned) and the commands
    that read it, each as the argv after `sweeper` (`RUN`, `SPEC`, `ROOT`: the scene's)."""

    name: str
    what: str
    make: Callable[[Scene], Path]
    commands: dict[str, Callable[[Scene], list[str]]]
    #: Damage of this file's own, after the common `KINDS`.
    own: tuple[Kind, ...] = ()

    @property
    def kinds(self) -> list[Kind]:
        return [*KINDS, *self.own]


def _lease(scene: Scene) -> Path:
    state = scene.tmp / "state"
    state.mkdir()
    (state / "lease.json").write_bytes(gone_text())
    scene.env["SWEEPER_STATE_DIR"] = str(state)
    scene.spec = scene.tmp / "t.yaml"
    shutil.copy(scene.shared.base_run().parent.parent.parent / "t.yaml", scene.spec)
    scene.names[str(state)] = "STATE"
    return state / "lease.json"


def _run_file(name: str) -> Callable[[Scene], Path]:
    def make(scene: Scene) -> Path:
        base = scene.shared.base_run()
        scene.run = scene.tmp / "results" / base.parent.name / base.name
        shutil.copytree(base, scene.run)
        scene.names[str(scene.run)] = "RUN"
        return scene.run / name

    return make


def _settled(scene: Scene) -> Path:
    """The verdict of the run's first point settled again as it is (a sound settled line)."""
    path = _run_file(SETTLED_LOG)(scene)
    assert scene.run is not None
    point = json.loads((scene.run / POINTS_LOG).read_text().splitlines()[0])
    line = {"point_id": point["point_id"], "attempt": point["attempt"], "settled_at": "t"}
    path.write_text(json.dumps({**line, "determinism": point["determinism"]}) + "\n")
    return path


def _search(scene: Scene) -> Path:
    path = _run_file("search.json")(scene)
    trial = {"label": "b8-k4-bs4-cg0", "params": {"budget": 8, "topk": 4}, "restart": 0,
             "state": "ok", "value": 1375.0, "low": None, "high": None, "reason": ""}  # fmt: skip
    log = {"strategy": "tpe", "spent_s": 12.5, "trials": [trial], "stopped_by": ""}
    path.write_text(json.dumps(log, indent=1))  # as the search driver writes it
    return path


def _journal(scene: Scene) -> Path:
    path = _run_file("search.optuna.jsonl")(scene)
    entry = {"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}
    path.write_text(json.dumps(entry) + "\n")  # the study's creation, as Optuna writes it
    return path


def _bisect(scene: Scene) -> Path:
    """The state `sweeper bisect` saved before its first step (made once: the bisect stopped
    there), with another `points` in its question, under this scene's results: a resume that
    reads it whole refuses it as another question instead of walking a history."""
    if "bisect" not in scene.shared.made:
        scene.shared.made["bisect"] = _sound_bisect(scene.shared.root / "bisect")
    argv, name, data = scene.shared.made["bisect"]
    results = scene.tmp / "results"
    directory = results / "bisect" / name
    directory.mkdir(parents=True)
    (directory / "bisect.json").write_bytes(data)
    scene.argv = [*argv, "--results", str(results), "--resume"]
    scene.names[str(directory)] = "BISECT"
    return directory / "bisect.json"


def _sound_bisect(tmp: Path) -> tuple[list[str], str, bytes]:
    """(the bisect's argv after `sweeper`, its directory's name, its bisect.json)."""
    tmp.mkdir(parents=True)
    repo = tmp / "repo"
    shas = runtime_history(repo, 1, fake=True)
    spec = bisect_spec(tmp, 18314, repo, fake=True)
    argv = bisect_argv(spec, shas[0], shas[1], tmp / "results")
    planned = CliRunner().invoke(app, [*argv[3:], "--dry-run"])
    directory = Path(planned.output.strip().splitlines()[-1])
    # Its own state directory and session: the host lease its first step takes, and anything
    # that step started, never reach another test's runs on this worker.
    (tmp / "state").mkdir()
    env = {**os.environ, "SWEEPER_STATE_DIR": str(tmp / "state")}
    started = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (directory / "bisect.json").exists():
        assert started.poll() is None and time.monotonic() < deadline, "no bisect.json"
        time.sleep(0.05)
    started.send_signal(signal.SIGTERM)
    started.wait(timeout=60)
    with contextlib.suppress(ProcessLookupError):  # whatever of its step outlived it
        os.killpg(started.pid, signal.SIGKILL)
    state = json.loads((directory / "bisect.json").read_text())
    state["points"] = ["local-some-other-point"]
    own = [a for a in argv[3:] if a not in (str(tmp / "results"), "--results")]
    return own, directory.name, (json.dumps(state, indent=2) + "\n").encode()


def _ls(scene: Scene) -> list[str]:
    return ["ls", "--results", str(scene.tmp / "results")]


def _run(scene: Scene) -> list[str]:
    return ["run", str(scene.spec), "--results", str(scene.tmp / "results"), "--plain"]


def _on_run(verb: str, *more: str) -> Callable[[Scene], list[str]]:
    return lambda scene: [verb, str(scene.run), *more]


def _resume(scene: Scene) -> list[str]:
    assert scene.run is not None
    spec = json.loads((scene.shared.base_run() / "manifest.json").read_text())["spec_path"]
    return ["run", spec, "--resume", str(scene.run), "--plain"]


STATE_FILES = [
    StateFile(
        "lease.json", "this machine's host lease (a gone run's)", _lease,
        {"run": _run, "ls": _ls},
    ),
    StateFile(
        "bisect.json", "a bisect's state", _bisect,
        {"bisect --resume": lambda scene: scene.argv},
    ),
    StateFile(
        "search.json", "a search's log of its trials and time spent", _search,
        {"run --resume": _resume, "repair": _on_run("repair")},
    ),
    StateFile(
        "search.optuna.jsonl", "a search's study journal", _journal,
        {"run --resume": _resume, "repair": _on_run("repair")},
    ),
    StateFile(
        "manifest.json", "a run's manifest", _run_file("manifest.json"),
        {"diagnose": _on_run("diagnose", "--dry-run"), "ls": _ls, "repair": _on_run("repair")},
    ),
    StateFile(
        "points.jsonl", "a run's point records", _run_file("points.jsonl"),
        {"diagnose": _on_run("diagnose", "--dry-run"), "repair": _on_run("repair")},
    ),
    StateFile(
        "requests.jsonl", "a run's request records", _run_file("requests.jsonl"),
        {"diagnose": _on_run("diagnose", "--dry-run"), "repair": _on_run("repair")},
    ),
    StateFile(
        "settled.jsonl", "a run's verdicts settled after their points", _settled,
        {"diagnose": _on_run("diagnose", "--dry-run"), "best": _on_run("best"),
         "repair": _on_run("repair")},
        tuple(SETTLED_KINDS),
    ),
]  # fmt: skip


@dataclass(frozen=True)
class Answer:
    """What one command did: exit code, the line that says how it went, a traceback seen."""

    code: int
    line: str
    traceback: bool


def answers(state: StateFile, kind: Kind, tmp: Path, shared: Shared) -> dict[str, Answer]:
    """Every command reading `state` after `kind` was done to a sound one."""
    scene = Scene(tmp, shared)
    kind.damage(state.make(scene))
    found = {}
    for verb, argv_of in state.commands.items():
        found[verb] = _invoke(scene, argv_of(scene))
    return found


def _invoke(scene: Scene, argv: list[str]) -> Answer:
    saved = {k: os.environ.get(k) for k in scene.env}
    os.environ.update(scene.env)  # the lease's state directory is read from the environment
    try:
        with bounded(DEADLINE_S):
            done = CliRunner().invoke(app, argv, env={"COLUMNS": "200"})
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    crashed = isinstance(done.exception, Exception) and not isinstance(done.exception, SystemExit)
    text = done.output + ("".join(_traceback(done)) if crashed else "")
    return Answer(done.exit_code, _one_line(text.splitlines(), scene), crashed)


def _traceback(done: object) -> list[str]:
    import traceback

    info = getattr(done, "exc_info", None)
    return traceback.format_exception(*info) if info else []


_BOX = " ─│┃━┏┓┗┛┡┩└┘┌┐├┤┬┴┼╇╈╋┳┻┣┫"


def _one_line(output: list[str], scene: Scene) -> str:
    """The line that says how it went (an error, else a note or warning, else the last line:
    a report's path, ls's lease line, repair's summary), the scene's paths as their names."""
    text = [line for line in output if line.strip(_BOX)]
    picked = next((ln for ln in text if ln.startswith(("error:", "internal error:"))), None)
    picked = picked or next((ln for ln in text if ln.startswith(("note:", "warning:"))), None)
    row = next((ln for ln in text if scene.run is not None and scene.run.name in ln), "")
    if picked is None and row.count("│") > 3:  # ls: the run's status, not the lease line
        picked = f"status: {row.split('│')[3].strip()}"
    picked = picked or (text[-1] if text else "")
    for path, name in sorted(scene.names.items(), key=lambda item: -len(item[0])):
        picked = picked.replace(path, name)
    return picked.replace(str(scene.tmp), "TMP").replace(sys.executable, "python").strip()
