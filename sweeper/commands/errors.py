"""The sweeper's own errors, each as one line and a code from `sweeper.exit_codes`, never a
traceback: `one_line` wraps every command.

An OSError reaching a command is the sweeper's own trouble with the files it writes or reads (a
full disk, a results path that is a file or not writable), not the user's spec or a point's: it
ends with `error: <what>: <path>` and exit 5, plus what to do where it is clear.
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import click
import typer

from sweeper.exit_codes import EXIT_INTERNAL, EXIT_IO

F = TypeVar("F", bound=Callable[..., Any])

_HINTS = {
    errno.ENOSPC: "free some space",
    errno.EDQUOT: "free some space",
    errno.EACCES: "give another --results or fix its permissions",
    errno.EPERM: "give another --results or fix its permissions",
    errno.EROFS: "give another --results",
    errno.ENOTDIR: "a file stands where a directory must be; give another --results",
    errno.EEXIST: "a file stands where a directory must be; give another --results",
    errno.EISDIR: "a directory stands where a file must be: move it aside",
}


def _keep_traceback() -> str:
    """The current exception's traceback, in a new file under the temp directory."""
    fd, path = tempfile.mkstemp(prefix="sweeper-crash-", suffix=".txt")
    with os.fdopen(fd, "w") as handle:
        handle.write(traceback.format_exc())
    return path


def describe(exc: BaseException) -> str:
    """One line for an error: for an OSError its reason, the path and what to do."""
    if not isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc}".replace("\n", " ")
    reason = os.strerror(exc.errno) if exc.errno else exc.strerror or str(exc)
    where = f": {exc.filename}" if exc.filename else ""
    hint = _HINTS.get(exc.errno or 0)
    return f"{reason}{where}" + (f" ({hint})" if hint else "")


def one_line(command: F) -> F:
    """The command, with an OSError ending in one line on stderr and exit 5, and any other
    error (a bug: input is answered with its own line before this) in one line, its traceback
    kept in a file, and exit 70: never Python's exit 1, which means a regression."""

    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except OSError as exc:
            typer.echo(f"error: {describe(exc)}", err=True)
            raise typer.Exit(EXIT_IO) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort, typer.Exit, typer.Abort):
            raise
        except Exception as exc:
            if os.environ.get("SWEEPER_DEBUG"):
                raise
            kept = _keep_traceback()
            typer.echo(
                f"internal error: {describe(exc)} (a bug in the sweeper; traceback in {kept}, "
                "SWEEPER_DEBUG=1 shows it)",
                err=True,
            )
            raise typer.Exit(EXIT_INTERNAL) from None

    return guarded  # type: ignore[return-value]
