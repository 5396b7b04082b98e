"""The `sweeper` command line: thin typer commands, one module per verb in `sweeper/commands/`."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="sweeper",
    help="Sweep DDTree speculative-decoding configs, prove exactness, report.",
    no_args_is_help=True,
    add_completion=False,
)

# Each verb registers itself here, one line each (imports stay local to keep start-up fast).
from sweeper.commands import plan, schema, validate  # noqa: E402

app.command("validate")(validate.command)
app.command("plan")(plan.command)
app.command("schema")(schema.command)
from sweeper.commands import ls, run  # noqa: E402

app.command("run")(run.command)
app.command("ls")(ls.command)
from sweeper.commands import compare, cron, nightly, report  # noqa: E402

app.command("report")(report.command)
app.command("compare")(compare.command)
app.command("nightly")(nightly.command)
app.add_typer(cron.app, name="cron")
from sweeper.commands import doctor  # noqa: E402

app.command("doctor")(doctor.command)
from sweeper.commands import diagnose  # noqa: E402

app.command("diagnose")(diagnose.command)
from sweeper.commands import best  # noqa: E402

app.command("best")(best.command)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
