"""`sweeper history`: the history database of finished runs (`sweeper.results.history`).

`sweeper history import RESULTS` fills it from run directories already on disk; `sweeper history
show` prints, per config (host, server config, request config, dataset) and metric, the series
over runs, or with `--json` one object per run and point for scripts. Where the history is: the
`--history` URL, else `SWEEPER_HISTORY_URL`, else the results root's embedded file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from sweeper.analysis.changepoints import change_points
from sweeper.analysis.history import DamagedRun, UnfinishedRun, record_run
from sweeper.config.labels import load_label, point_label
from sweeper.exit_codes import EXIT_BAD_SPEC, EXIT_IO
from sweeper.results.history import (
    COLUMN_TYPES,
    HISTORY_COLUMNS,
    SERIES_COLUMNS,
    SUMMARY_COLUMNS,
    HistoryError,
    default_url,
    history_frame,
    shown,
)
from sweeper.results.reader import all_runs

app = typer.Typer(
    help="The history of finished runs: import run directories, show each config's series.",
    no_args_is_help=True,
)

#: The metrics `show` can follow: the summary's numbers.
SHOWN_METRICS = tuple(c for c in SUMMARY_COLUMNS if COLUMN_TYPES[c] == "DOUBLE PRECISION")
HISTORY_HELP = "History database: a path or postgresql:// URL (default: $SWEEPER_HISTORY_URL, "
HISTORY_HELP += "else history.sqlite3 under --results)."


def _url(history: str | None, results: Path) -> str:
    return history or default_url(results)


@app.command("import")
def import_runs(
    results: Path = typer.Argument(..., help="Results root directory holding the runs."),
    history: str | None = typer.Option(None, "--history", help=HISTORY_HELP),
) -> None:
    """Record every finished run under RESULTS in the history (a run already there is replaced;
    a damaged run is named and skipped, never half written). Exit 5 when any was damaged."""
    if not results.is_dir():
        typer.echo(f"error: {results} is not a directory", err=True)
        raise typer.Exit(EXIT_BAD_SPEC)
    url = _url(history, results)
    damaged = written = 0
    for run in all_runs(results):
        name = f"{run.dir.parent.name}/{run.dir.name}"
        try:
            count = record_run(url, run)
        except UnfinishedRun as exc:
            typer.echo(f"skipped {name}: {exc}")
            continue
        except DamagedRun as exc:
            typer.echo(f"damaged {name}: {exc} (skipped)", err=True)
            damaged += 1
            continue
        except HistoryError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_IO) from None
        finally:
            run.close()
        written += 1
        typer.echo(f"imported {name}: {count} point(s)")
    typer.echo(f"{written} run(s) in {shown(url)}, {damaged} damaged")
    if damaged:
        raise typer.Exit(EXIT_IO)


@app.command("show")
def show(
    results: Path = typer.Option(Path("results"), "--results", help="Results root directory."),
    history: str | None = typer.Option(None, "--history", help=HISTORY_HELP),
    config: str | None = typer.Option(
        None,
        "--config",
        help="Only this server config: its label as the run recorded it (b16-k4-bs8-cg1), "
        "or, for a run that recorded none, as its columns spell it (b16 k4 bs8).",
    ),
    metric: str = typer.Option(
        "output_tok_s", "--metric", help=f"One of: {', '.join(SHOWN_METRICS)}."
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per run and point."),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="Write the trends page (self-contained HTML) to this file."
    ),
) -> None:
    """Per config and metric, the series over runs, oldest first, then the change points
    (steps, drifts, verdict changes) with their runs and commits; `-o` draws them as a page."""
    if metric not in SHOWN_METRICS:
        typer.echo(f"error: --metric {metric!r}: one of {', '.join(SHOWN_METRICS)}", err=True)
        raise typer.Exit(EXIT_BAD_SPEC)
    try:
        frame = history_frame(_url(history, results))
    except HistoryError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_IO) from None
    frame = frame.assign(label=[_label(r) for r in frame.to_dict("records")])
    if config is not None:
        frame = frame[frame["label"] == config]
    if as_json:
        for row in frame.to_dict("records"):
            typer.echo(json.dumps({c: _plain(row[c]) for c in (*HISTORY_COLUMNS, "label")}))
        return
    if frame.empty:
        typer.echo(f"no runs in {shown(_url(history, results))}" + _which(config))
        return
    # A run that recorded no server label is named, and its series told apart, by its columns.
    labelled = frame.assign(server_label=frame["label"])
    changes = change_points(labelled)
    if output is not None:
        from sweeper.report.trends import trends_page  # matplotlib: only for the page

        output.write_text(trends_page(labelled, changes, shown(_url(history, results))))
        typer.echo(str(output))
        return
    console = Console(width=160, markup=False)
    series_of = labelled.groupby(list(SERIES_COLUMNS), dropna=False, sort=False)
    for _key, series in series_of:
        console.print(_table(series, metric))
    typer.echo(f"{len(changes)} change point(s)" + (":" if changes else ""))
    for change in changes:
        typer.echo(f"  {change.describe()}")


def _which(config: str | None) -> str:
    return f" for config {config}" if config else ""


def _label(row: dict[str, Any]) -> str:
    """The server config's label as the plan named it, else as its columns spell it."""
    label = row.get("server_label")
    return str(label) if isinstance(label, str) and label else point_label(row)


def _table(series: pd.DataFrame, metric: str) -> Table:
    first = series.iloc[0]
    dataset = f" [{first['dataset']}]" if isinstance(first["dataset"], str) else ""
    title = f"{first['host']} {first['label']} {load_label(first.to_dict())}{dataset}: {metric}"
    table = Table(title=title, title_justify="left")
    for name in ("run", "time (UTC)", "runtime commit", metric, "95% interval", "verdict", "flags"):
        table.add_column(name)
    for row in series.to_dict("records"):
        table.add_row(
            row["run_id"],
            str(row["run_time"] or "")[:19].replace("T", " "),
            str(row["runtime_commit"] or "-")[:12],
            _number(row[metric]),
            _interval(row, metric),
            str(row["determinism"] or "-"),
            _flags(row),
        )
    return table


def _number(value: Any) -> str:
    return "-" if _plain(value) is None else f"{float(value):.4g}"


def _interval(row: dict[str, Any], metric: str) -> str:
    low, high = _plain(row.get(f"{metric}_low")), _plain(row.get(f"{metric}_high"))
    if low is None or high is None:
        return "-"
    return f"{float(low):.4g} .. {float(high):.4g} ({row['noise_source']})"


def _flags(row: dict[str, Any]) -> str:
    """What makes a run's number no plain result: a failed point, a busy host, a bound client."""
    flags = [] if row.get("status") in (None, "ok") else [str(row["status"])]
    flags += [name for name in ("host_busy", "baseline_busy", "client_bound") if row.get(name)]
    return ", ".join(flags)


def _plain(value: Any) -> Any:
    """A frame's value as JSON holds it: NaN and pandas' NA as null, numpy scalars as numbers."""
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value
