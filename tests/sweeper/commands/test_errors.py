"""Every command ends in one line and a code from the one table: a bug is exit 70 (its
traceback kept in a file), never Python's exit 1, which means a regression."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sweeper.commands.errors import one_line
from sweeper.exit_codes import EXIT_INTERNAL, EXIT_IO, EXIT_REGRESSION


def _app(fail: BaseException) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def boom() -> None:
        raise fail

    app.command("again")(lambda: None)  # two commands: typer keeps the verb
    app.registered_commands[0].callback = one_line(boom)
    return app


def test_a_bug_is_one_line_and_exit_70(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWEEPER_DEBUG", raising=False)
    done = CliRunner().invoke(_app(KeyError(b"host")), ["boom"])
    assert done.exit_code == EXIT_INTERNAL != EXIT_REGRESSION
    lines = done.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("internal error: KeyError: b'host'")
    kept = Path(re.search(r"traceback in (\S+),", lines[0]).group(1))  # type: ignore[union-attr]
    assert "KeyError" in kept.read_text() and "Traceback" in kept.read_text()
    kept.unlink()


def test_exits_and_io_errors_keep_their_codes() -> None:
    assert CliRunner().invoke(_app(typer.Exit(4)), ["boom"]).exit_code == 4
    full = CliRunner().invoke(_app(OSError(28, "No space left on device", "x.parquet")), ["boom"])
    assert full.exit_code == EXIT_IO and "No space left on device: x.parquet" in full.output
