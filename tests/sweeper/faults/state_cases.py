"""The corpus's bisect and search state cases (issue 40): `bisect.json` and a search's state
(`search.json`, the study's journal) damaged each way the issue names (cut short, empty, `null`,
`[]`), each resumed as a user would, each one line naming the file and exit 5, never read as
absent and never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from sweeper.bisect.state import STATE_FILE
from sweeper.cli import app
from sweeper.exit_codes import EXIT_IO
from sweeper.search.driver import SEARCH_LOG, STUDY_FILE
from tests.sweeper.bisecting.bisect_helpers import bisect_spec
from tests.sweeper.bisecting.histories import runtime_history
from tests.sweeper.faults.cases import Case
from tests.sweeper.faults.context import Ctx, Outcome, manifest, sweeper

#: The issue's damage kinds, as the bytes left in the file.
KINDS: dict[str, bytes] = {
    "cut short": b'{"spec_path": "/tmp/bis.yaml", "spec": {"na',
    "empty": b"",
    "null": b"null",
    "[]": b"[]",
}
#: A journal line that is valid JSON yet no study record (a cut line is a torn tail, kept aside).
JOURNAL_KINDS: dict[str, bytes] = {"null": b"null\n", "[]": b"[]\n"}


def _bisect(data: bytes) -> Callable[[Ctx], tuple[str, Outcome]]:
    """`sweeper bisect --resume` over a fake runtime's history whose `bisect.json` holds
    `data` (where the dry run says the bisect of that question lives)."""

    def run(ctx: Ctx) -> tuple[str, Outcome]:
        shas = runtime_history(ctx.tmp / "repo", 1, fake=True)
        spec = bisect_spec(ctx.tmp, 1, ctx.tmp / "repo", fake=True)
        argv = ["bisect", str(spec), "--good", shas[0], "--bad", shas[1]]
        argv += ["--results", str(ctx.tmp / "results")]
        planned = CliRunner().invoke(app, [*argv, "--dry-run"])
        directory = Path(planned.output.strip().splitlines()[-1])
        directory.mkdir(parents=True)
        (directory / STATE_FILE).write_bytes(data)
        return "sweeper bisect SPEC --good A --bad B --resume", sweeper(*argv, "--resume")

    return run


def _search(name: str, data: bytes) -> Callable[[Ctx], tuple[str, Outcome]]:
    """`sweeper run SPEC --resume RUN` on a run whose search state file `name` holds `data`."""

    def run(ctx: Ctx) -> tuple[str, Outcome]:
        run_dir = ctx.run_copy()
        prefix = b'{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}\n'
        (run_dir / name).write_bytes(prefix + data if name == STUDY_FILE else data)
        spec = manifest(run_dir)["spec_path"]
        return "sweeper run SPEC --resume RUN", sweeper("run", spec, "--resume", str(run_dir))

    return run


STATE_CASES = [
    *(
        Case(
            f"bisect_json_{kind.replace(' ', '_').replace('[]', 'list')}",
            "issue 40 #6: pydantic ValidationError, exit 70",
            _bisect(data),
            EXIT_IO,
            f"{STATE_FILE} is not a bisect state",
        )
        for kind, data in KINDS.items()
    ),
    *(
        Case(
            f"search_json_{kind.replace(' ', '_').replace('[]', 'list')}",
            "exit 2 (as bad usage); a NaN spent_s (stop.hours never reached) or non-trials passed",
            _search(SEARCH_LOG, data),
            EXIT_IO,
            f"{SEARCH_LOG} is unreadable",
        )
        for kind, data in KINDS.items()
    ),
    *(
        Case(
            f"search_journal_line_{kind.replace('[]', 'list')}",
            "passed the check; Optuna died on it (KeyError 'op_code'), exit 70",
            _search(STUDY_FILE, data),
            EXIT_IO,
            "not one of the study's records",
        )
        for kind, data in JOURNAL_KINDS.items()
    ),
]
