"""`sweeper bisect`'s refusals and wording, in-process over a fake runtime's history (nothing is
measured): options said as given and refused naming themselves (item 13), a damaged bisect
state refused with one line naming the file (item 6), the dry run, and a step's wait for a
leased host said on the terminal (item 13, a real subprocess)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.analysis.compare import parse_threshold
from sweeper.bisect.state import STATE_FILE
from sweeper.cli import app
from sweeper.exit_codes import EXIT_BAD_SPEC, EXIT_INTERRUPTED, EXIT_IO, EXIT_OK
from tests.sweeper.bisecting.bisect_helpers import bisect_argv, bisect_spec
from tests.sweeper.bisecting.histories import runtime_history


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    shas = runtime_history(tmp_path / "repo", 3, fake=True)
    return bisect_spec(tmp_path, 1, tmp_path / "repo", fake=True), shas


def bisect(setup: tuple[Path, list[str]], *args: str) -> tuple[int, list[str]]:
    """(exit code, every line said) of `sweeper bisect SPEC --good A --bad B ARGS`."""
    spec, shas = setup
    argv = ["bisect", str(spec), "--good", shas[0], "--bad", shas[-1]]
    done = CliRunner().invoke(app, [*argv, "--results", str(spec.parent / "results"), *args])
    assert not isinstance(done.exception, Exception) or isinstance(done.exception, SystemExit)
    return done.exit_code, done.output.strip().splitlines()


@pytest.mark.parametrize("given", ["1e20", "100000000000000000000", "0", "three"])
def test_item13_restarts_refused_naming_the_option(
    setup: tuple[Path, list[str]], given: str
) -> None:
    code, lines = bisect(setup, "--restarts", given)
    assert (code, lines) == (
        EXIT_BAD_SPEC,
        [f"error: --restarts {given!r}: starts per commit, a whole number 1 to 20"],
    )


def test_item13_from_run_on_a_missing_path_says_it_is_missing(
    setup: tuple[Path, list[str]], tmp_path: Path
) -> None:
    code, lines = bisect(setup, "--from-run", str(tmp_path / "nope"))
    assert code == EXIT_BAD_SPEC
    assert lines[-1] == (
        f"error: --from-run {tmp_path / 'nope'} does not exist (no manifest.json): give a run "
        "directory, or --points"
    )
    code, lines = bisect(setup, "--from-run", str(tmp_path))
    assert code == EXIT_BAD_SPEC and f"{tmp_path} is not a run directory" in lines[-1]


def test_item13_threshold_bounds_agree_and_print_as_given(setup: tuple[Path, list[str]]) -> None:
    for given in ("150%", "0%", "1"):
        code, lines = bisect(setup, "--metric", "output_tok_s", "--threshold", given)
        assert (code, lines[-1]) == (
            EXIT_BAD_SPEC,
            f"error: threshold {given!r} must be above 0% and below 100%",
        )
    # compare's bound, in the same words
    with pytest.raises(
        ValueError, match=r"^threshold '2000%' must be at least 0% and below 1000%$"
    ):
        parse_threshold("2000%")
    spec, _ = setup
    nightly = CliRunner().invoke(app, ["nightly", str(spec), "--bisect", "--threshold", "0%"])
    assert nightly.exit_code == EXIT_BAD_SPEC
    assert nightly.output.strip() == (
        "error: --bisect: threshold '0%' must be above 0% and below 100% (a speed bisect's bounds)"
    )
    code, lines = bisect(setup, "--metric", "output_tok_s", "--threshold", "0.5%", "--dry-run")
    assert code == EXIT_OK
    assert "metric output_tok_s, threshold 0.5%; 3 start(s) per commit" in lines


def test_dry_run_says_the_walk_and_measures_nothing(setup: tuple[Path, list[str]]) -> None:
    spec, shas = setup
    code, lines = bisect(setup, "--dry-run")
    assert code == EXIT_OK
    assert lines[0].startswith(f"bisect bis: 3 commit(s) after {shas[0][:10]} up to ")
    assert "along first parents" in lines[0]
    assert any(line.startswith("at most 4 measured steps") for line in lines)
    assert not Path(lines[-1]).exists() and not (spec.parent / "results").exists()


#: Issue 40's damage kinds for `bisect.json`, and a directory where the file should be.
DAMAGE: dict[str, bytes | None] = {
    "truncated": b'{"spec_path": "/tmp/bis.yaml", "spec": {"na',
    "empty": b"",
    "null": b"null",
    "list": b"[]",
    "an object missing the question": b"{}",
    "a directory": None,
}
SAID = {
    "truncated": "cut short or not JSON",
    "empty": "empty",
    "null": "it holds null, not an object",
    "list": "it holds [], not an object",
    "an object missing the question": "spec_path: Field required",
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_item6_a_damaged_bisect_json_under_resume_is_one_line_naming_it(
    setup: tuple[Path, list[str]], kind: str
) -> None:
    _, lines = bisect(setup, "--dry-run")
    directory = Path(lines[-1])
    directory.mkdir(parents=True)
    data = DAMAGE[kind]
    if data is None:
        (directory / STATE_FILE).mkdir()
    else:
        (directory / STATE_FILE).write_bytes(data)
    code, lines = bisect(setup, "--resume")
    assert code == EXIT_IO
    state = directory / STATE_FILE
    why = SAID.get(kind, "cannot be read (Is a directory)")
    verb = "" if data is None else "is not a bisect state "
    assert lines[-1] == (
        f"error: {state} {verb}{why if data is None else f'({why})'}: restore it, or move "
        f"{directory} aside to start the bisect afresh (its steps' runs stay there for report "
        "and compare)"
    )


def test_item6_steps_without_their_bisect_json_are_not_a_new_bisect(
    setup: tuple[Path, list[str]],
) -> None:
    _, lines = bisect(setup, "--dry-run")
    directory = Path(lines[-1])
    (directory / "steps").mkdir(parents=True)
    for resume in ((), ("--resume",)):
        code, lines = bisect(setup, *resume)
        assert code == EXIT_IO
        assert lines[-1] == (
            f"error: {directory} holds steps but no {STATE_FILE} (deleted?): restore it, or "
            f"move {directory} aside to start the bisect afresh"
        )


def test_item13_a_step_waiting_for_a_leased_host_says_so(
    setup: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another run holds this machine's lease: the good end's run waits for it, and the
    bisect's terminal says so (not only "measuring"); Ctrl-C then stops it, resumable."""
    from sweeper.spec import load_spec
    from sweeper.workers.leases import take_leases

    monkeypatch.setenv("SWEEPER_STATE_DIR", str(tmp_path / "state"))  # this test's machine
    spec, shas = setup
    held = take_leases(load_spec(spec), wait_s=0, say=lambda _: None)
    try:
        argv = bisect_argv(spec, shas[0], shas[-1], tmp_path / "results")
        process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        assert process.stderr is not None
        lines, deadline = [], time.monotonic() + 120
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            lines.append(line)
            if not line or line.startswith("  waiting for host"):
                break
        os.kill(process.pid, signal.SIGTERM)
        assert process.wait(timeout=60) == EXIT_INTERRUPTED
    finally:
        held.release()
    assert lines[-2].startswith(f"good end {shas[0][:10]} (good end): measuring"), lines
    assert lines[-1].startswith("  waiting for host local: sweep 'bis' "), lines
    assert "holds it (waited 0 s of 3600 s)" in lines[-1]
