"""The `sweeper` command line: thin typer commands, one module per verb in `sweeper/commands/`."""

from __future__ import annotations

import math
import sys

import typer

app = typer.Typer(
    name="sweeper",
    help="Sweep DDTree speculative-decoding configs, prove exactness, report.",
    no_args_is_help=True,
    add_completion=False,
)

# Each verb registers itself here, one line each (imports stay local to keep start-up fast);
# `one_line` turns the sweeper's own I/O errors into one line and exit 5.
from sweeper.commands import plan, schema, validate  # noqa: E402
from sweeper.commands.errors import one_line  # noqa: E402

app.command("validate")(one_line(validate.command))
app.command("plan")(one_line(plan.command))
app.command("schema")(one_line(schema.command))
from sweeper.commands import ls, repair, run  # noqa: E402

app.command("run")(one_line(run.command))
app.command("ls")(one_line(ls.command))
app.command("repair")(one_line(repair.command))
from sweeper.commands import compare, cron, nightly, report  # noqa: E402

app.command("report")(one_line(report.command))
app.command("compare")(one_line(compare.command))
app.command("nightly")(one_line(nightly.command))
app.add_typer(cron.app, name="cron")
from sweeper.commands import doctor  # noqa: E402

app.command("doctor")(one_line(doctor.command))
from sweeper.commands import diagnose  # noqa: E402

app.command("diagnose")(one_line(diagnose.command))
from sweeper.commands import best  # noqa: E402

app.command("best")(one_line(best.command))
from sweeper.commands import bisect  # noqa: E402

app.command("bisect")(one_line(bisect.command))
from sweeper.commands import history  # noqa: E402

app.add_typer(history.app, name="history")


#: Options whose value may be left out, and what it then is (`--wait-for-hosts` alone waits as
#: long as it takes). Typer has no optional option values, so the default is written in before
#: it parses: after the option, unless a number follows.
OPTIONAL_VALUES = {"--wait-for-hosts": str(math.inf)}


def with_optional_values(argv: list[str]) -> list[str]:
    """`argv` with each value-less `OPTIONAL_VALUES` option given its default."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg == "--":
            return out + argv[i + 1 :]
        if arg in OPTIONAL_VALUES and (i + 1 == len(argv) or not _number(argv[i + 1])):
            out.append(OPTIONAL_VALUES[arg])
    return out


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def main() -> None:
    """Console-script entry point."""
    app(args=with_optional_values(sys.argv[1:]))


if __name__ == "__main__":
    main()
