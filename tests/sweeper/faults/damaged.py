"""The damaged-run corpus: every read command against every way a run directory is found
damaged, each ending in its exit code and one line, never a traceback, never writing into the
run (`test_damaged_runs.py` runs it in CI; `bench/damaged_runs.py` prints it as docs/results.md's
table).

Each case damages a copy of one finished two-point run of the fake runtime the way the world
does: a kill mid-write, a cut or hand-edited line, a read-only mount, a run still going, a
run whose process died.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.results.lock import run_lock
from sweeper.results.reader import sweep_lock

#: The read commands, each as the argv after `sweeper` for a run RUN under results root ROOT
#: (compare: against the undamaged copy BASE).
COMMANDS: dict[str, tuple[str, ...]] = {
    "report": ("report", "RUN", "-o", "OUT"),
    "diagnose": ("diagnose", "RUN", "--dry-run"),
    "compare": ("compare", "BASE", "RUN"),
    "best": ("best", "RUN"),
    "ls": ("ls", "--results", "ROOT"),
    # The one writer, last: it may write (what it put back is asserted in test_recover.py).
    "repair": ("repair", "RUN"),
}
WRITERS = ("repair",)


def _cut(name: str, keep: float) -> Callable[[Path], None]:
    """The file cut at `keep` of its length (a kill mid-write: the last line torn)."""

    def damage(run: Path) -> None:
        data = (run / name).read_bytes()
        (run / name).write_bytes(data[: int(len(data) * keep)])

    return damage


def _retyped(name: str, **fields: object) -> Callable[[Path], None]:
    """The file's first line still JSON, these fields of it of the wrong type (a hand edit)."""

    def damage(run: Path) -> None:
        lines = (run / name).read_text().splitlines(keepends=True)
        lines[0] = json.dumps(json.loads(lines[0]) | fields) + "\n"
        (run / name).write_text("".join(lines))

    return damage


def _no_requests(run: Path) -> None:
    """Every point failed before its first request (a model that does not load)."""
    rows = [json.loads(x) for x in (run / "points.jsonl").read_text().splitlines()]
    for row in rows:
        row.update(status="failed", reason="server exited (code 2) before becoming ready")
    (run / "points.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "requests.jsonl").write_text("")
    for view in ("points.parquet", "points.csv", "requests.parquet"):
        (run / view).unlink()


def _search_files(run: Path) -> None:
    (run / "search.json").write_text('{"strategy": "tpe", "spent_s": 12.5, "tri')
    (run / "search.optuna.jsonl").write_text('{"op_code": 0, "worker_id": "w", "stu')


def _status(status: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["status"] = status
        (run / "manifest.json").write_text(json.dumps(manifest))

    return damage


@dataclass(frozen=True)
class DamagedRun:
    """One way a run is found: how to make it, and what holds while commands read it."""

    name: str
    what: str
    damage: Callable[[Path], None]
    live: bool = False
    read_only: bool = False


CASES = [
    DamagedRun("sound", "a finished run, untouched", lambda run: None),
    DamagedRun("no_requests", "every point failed, no request recorded", _no_requests),
    DamagedRun("points_jsonl_cut", "points.jsonl cut mid-line", _cut("points.jsonl", 0.7)),
    DamagedRun("requests_jsonl_cut", "requests.jsonl cut mid-line", _cut("requests.jsonl", 0.6)),
    DamagedRun(
        "points_jsonl_retyped",
        "a points.jsonl field of the wrong type",
        _retyped("points.jsonl", output_tok_s="fast", concurrency="four"),
    ),
    DamagedRun(
        "requests_jsonl_retyped",
        "a requests.jsonl field of the wrong type",
        _retyped("requests.jsonl", ttft="slow", token_ids="1 2 3"),
    ),
    DamagedRun("points_parquet_cut", "points.parquet truncated", _cut("points.parquet", 0.3)),
    DamagedRun("requests_parquet_cut", "requests.parquet truncated", _cut("requests.parquet", 0.3)),
    DamagedRun("manifest_cut", "manifest.json truncated", _cut("manifest.json", 0.5)),
    DamagedRun("search_state_cut", "search.json and the Optuna journal torn", _search_files),
    DamagedRun(
        "read_only",
        "on a read-only mount, points.parquet truncated before",
        _cut("points.parquet", 0.3),
        read_only=True,
    ),  # fmt: skip
    DamagedRun("live", "still running (its sweep lock held)", _status("running"), live=True),
    DamagedRun("killed", "manifest says running, its process gone", _status("running")),
]


@dataclass(frozen=True)
class Answer:
    """What one command did on one damaged run."""

    code: int
    line: str
    traceback: bool
    wrote: bool


def answers(base: Path, tmp: Path, case: DamagedRun) -> Iterator[tuple[str, Answer]]:
    """Every read command on a damaged copy of `base` (a finished run directory)."""
    with _damaged_copy(base, tmp, case) as run:
        before = _snapshot(run)
        for verb, argv in COMMANDS.items():
            args = [
                {"RUN": str(run), "BASE": str(base), "ROOT": str(run.parent.parent)}.get(
                    a, str(tmp / f"{case.name}-{verb}.html") if a == "OUT" else a
                )
                for a in argv
            ]
            done = CliRunner().invoke(app, args)
            output = done.output.strip().splitlines()
            yield (
                verb,
                Answer(
                    done.exit_code,
                    _one_line(output, verb, run),
                    isinstance(done.exception, Exception)
                    and not isinstance(done.exception, SystemExit),
                    _snapshot(run) != before,
                ),
            )


def _one_line(output: list[str], verb: str, run: Path) -> str:
    """The line that says how it went: an error, else a note, else the command's own summary
    (ls: the run's status; compare: its count; report: that it wrote), the run's path as RUN."""
    text = [line for line in output if line.strip(_BOX)]
    picked = next((line for line in text if line.startswith(("error:", "internal error:"))), None)
    picked = picked or next((line for line in text if line.startswith(("note:", "warning:"))), None)
    if picked is None and verb == "ls":
        row = next((line for line in text if run.name in line), "")
        picked = f"status: {row.split('│')[3].strip()}" if row.count("│") > 3 else row
    elif picked is None and verb == "compare":
        picked = next((line for line in text if "compared" in line), text[-1] if text else "")
    elif picked is None and verb == "report":
        picked = "wrote the report" if text else ""
    elif picked is None:
        picked = text[-1] if text else ""
    return picked.replace(str(run), "RUN").strip()


_BOX = " ─│┃━┏┓┗┛┡┩└┘┌┐├┤┬┴┼╇╈╋┳┻┣┫"


def _snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in run.rglob("*") if p.is_file()}


@contextmanager
def _damaged_copy(base: Path, tmp: Path, case: DamagedRun) -> Iterator[Path]:
    with ExitStack() as stack:
        root = tmp / case.name
        if case.read_only:
            root.mkdir(parents=True)
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(root)], check=True
            )
            stack.callback(subprocess.run, ["umount", "-l", str(root)], check=False)
        run = root / base.parent.name / base.name
        shutil.copytree(base, run)
        case.damage(run)
        if case.read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
        if case.live:
            stack.enter_context(run_lock(sweep_lock(root, base.parent.name)))
        yield run


def needs_root(case: DamagedRun) -> bool:
    return case.read_only and os.geteuid() != 0
