"""The one reader of run directories: manifest, points, request columns, and finding runs.

Everything that reads a run directory after the fact (report, compare, ls, nightly, resume)
comes here, so a partial run reads the same everywhere. Readers never raise on a partial or older
run: an absent or unreadable file gives None or an empty frame, and the caller says what is
missing. Run ids start with a UTC timestamp, so sorting run directory names sorts runs by start
time. A run counts as finished when its manifest says `complete` (every planned point attempted,
even if some failed: comparing them is how new failures are found).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sweeper.results.records import Manifest, legacy_mode

MANIFEST = "manifest.json"
REQUESTS_LOG = "requests.jsonl"
POINTS_LOG = "points.jsonl"
REQUESTS_PARQUET = "requests.parquet"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of an append-only JSONL file; a torn line (a killed writer) is skipped."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a torn line: never a complete record
    return rows


def read_manifest(run_dir: Path) -> Manifest | None:
    """The run's manifest, or None when absent or unreadable."""
    try:
        return Manifest.model_validate_json((Path(run_dir) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def load_points(run_dir: Path) -> pd.DataFrame | None:
    """points.parquet, else points.csv, else the append-only points.jsonl, else None; rows of
    runs written before the `mode` column come back in today's columns."""
    run_dir = Path(run_dir)
    points = _read_view(run_dir / "points.parquet", pd.read_parquet)
    if points is None:
        points = _read_view(
            run_dir / "points.csv",
            lambda p: pd.read_csv(p, keep_default_na=False, na_values=[""]),
        )
    if points is None:
        rows = read_jsonl(run_dir / POINTS_LOG)
        if not rows:
            return None
        points = pd.DataFrame(rows).drop_duplicates("point_id")
    return upgrade_legacy(points, run_dir)


def _read_view(path: Path, read: Any) -> pd.DataFrame | None:
    """A derived view, or None when it is absent or unreadable (truncated, empty): the
    records it was written from are the truth, read instead (`repair.py` rewrites it)."""
    if not path.exists():
        return None
    try:
        frame = read(path)
    except (OSError, ValueError, pd.errors.EmptyDataError):  # ArrowInvalid is a ValueError
        return None
    return frame if isinstance(frame, pd.DataFrame) else None


def run_engine(run_dir: Path) -> str:
    """The engine a run drove, from its manifest's spec (`ddtree_runtime` when unknown)."""
    manifest = read_manifest(run_dir)
    runtime = (manifest.spec.get("runtime") or {}) if manifest else {}
    return str(runtime.get("engine") or "ddtree_runtime")


def upgrade_legacy(frame: pd.DataFrame, run_dir: Path) -> pd.DataFrame:
    """Rows written before `mode` existed (`engine` was ar|ddtree): today's engine and mode."""
    if "mode" in frame.columns or "engine" not in frame.columns:
        return frame
    frame = frame.copy()
    frame["mode"] = frame["engine"].map(legacy_mode)
    frame["engine"] = run_engine(run_dir)
    return frame


def request_columns(run_dir: Path) -> list[str]:
    """Column names of the run's requests.parquet without reading its data ([] when absent)."""
    path = Path(run_dir) / REQUESTS_PARQUET
    return list(pq.read_schema(path).names) if path.exists() else []


def load_request_columns(
    run_dir: Path,
    columns: list[str],
    *,
    filters: list[tuple[str, str, Any]] | None = None,
    categorical: bool = True,
) -> pd.DataFrame:
    """Those of `columns` that the run's requests have (never the big columns unasked), of the
    rows matching pyarrow `filters` (all rows when None).

    With `categorical`, repeated strings come back as categoricals: a fraction of the memory and
    fast groupbys.
    """
    path = Path(run_dir) / REQUESTS_PARQUET
    if not path.exists():
        return pd.DataFrame(columns=columns)
    present = [c for c in columns if c in request_columns(run_dir)]
    names = ("host", "point_id", "prompt_id", "verdict") if categorical else ()
    legacy = "mode" in columns and "mode" not in present and "engine" in request_columns(run_dir)
    if legacy:
        present.append("engine")
    table = pq.read_table(
        path,
        columns=present,
        filters=filters,
        read_dictionary=[c for c in names if c in present],
    )
    frame = table.to_pandas()
    return upgrade_legacy(frame, run_dir) if legacy else frame


def sample_list_column(
    run_dir: Path, column: str, per_point: int = 200, seed: int = 0
) -> pd.DataFrame:
    """The values of a list column (e.g. `itls`) of up to `per_point` requests per point, picked
    at random: columns `point_id` and `value`.

    Sampling rows (not values) keeps memory and time flat however many requests a run has.
    """
    path = Path(run_dir) / REQUESTS_PARQUET
    empty = pd.DataFrame({"point_id": pd.Series([], dtype=str), "value": []})
    if not {column, "point_id"} <= set(request_columns(run_dir)):
        return empty
    ids = pq.read_table(path, columns=["point_id"]).column("point_id")
    codes, uniques = pd.factorize(ids.to_numpy(zero_copy_only=False))
    order = np.random.default_rng(seed).permutation(len(codes))
    rank = pd.Series(codes[order]).groupby(codes[order]).cumcount().to_numpy()
    rows = np.sort(order[rank < per_point])
    picked = []
    start = 0
    # Streamed in batches: only the sampled rows' lists are ever held, not all of them.
    for batch in pq.ParquetFile(path).iter_batches(batch_size=131072, columns=[column]):
        lo, hi = np.searchsorted(rows, [start, start + batch.num_rows])
        if hi > lo:
            picked.append(batch.column(0).take(rows[lo:hi] - start))
        start += batch.num_rows
    if not picked:
        return empty
    lists = pa.concat_arrays(picked)
    lengths = lists.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    values = lists.flatten().to_numpy(zero_copy_only=False)
    return pd.DataFrame({"point_id": np.repeat(uniques[codes[rows]], lengths), "value": values})


# --- finding runs ---------------------------------------------------------------------------------


def is_run_dir(path: Path) -> bool:
    """True for a directory holding a manifest (a run directory, finished or not)."""
    return (Path(path) / MANIFEST).is_file()


def runs_of_sweep(sweep_dir: Path) -> list[Path]:
    """The run directories of one sweep (`results/<sweep>/`), oldest first."""
    if not Path(sweep_dir).is_dir():
        return []
    return sorted(p for p in Path(sweep_dir).iterdir() if is_run_dir(p))


def latest_run(results: Path, sweep: str | None = None) -> Path | None:
    """The newest run under a results root: of one sweep, or across sweeps when `sweep` is None."""
    if sweep is not None:
        runs = runs_of_sweep(Path(results) / sweep)
    else:
        runs = [p.parent for p in Path(results).glob(f"*/*/{MANIFEST}")]
    return max(runs, key=lambda p: p.name) if runs else None


def list_runs(results: Path) -> list[Manifest]:
    """The manifests of every run under a results root, oldest first (unreadable ones skipped:
    `unreadable_runs` lists them)."""
    manifests = [read_manifest(p.parent) for p in Path(results).glob(f"*/*/{MANIFEST}")]
    return sorted((m for m in manifests if m is not None), key=lambda m: m.run_id)


def unreadable_runs(results: Path) -> list[Path]:
    """Run directories under a results root whose manifest is empty, truncated or invalid."""
    found = [p.parent for p in Path(results).glob(f"*/*/{MANIFEST}")]
    return sorted(p for p in found if read_manifest(p) is None)


def is_finished(run_dir: Path) -> bool:
    """True when the run's manifest says it completed."""
    manifest = read_manifest(run_dir)
    return manifest is not None and manifest.status == "complete"


def previous_finished(run_dir: Path) -> Path | None:
    """The newest finished run of the same sweep that started before `run_dir`."""
    earlier = [p for p in runs_of_sweep(run_dir.parent) if p.name < run_dir.name]
    finished = [p for p in earlier if is_finished(p)]
    return finished[-1] if finished else None


def prune(sweep_dir: Path, keep: int, protect: Path | None = None) -> list[Path]:
    """Delete all but the newest `keep` runs of a sweep (never `protect`); return the deleted."""
    if keep < 1:
        raise ValueError("keep must be at least 1")
    runs = runs_of_sweep(sweep_dir)
    doomed = [p for p in runs[: max(0, len(runs) - keep)] if protect is None or p != protect]
    for path in doomed:
        shutil.rmtree(path)
    return doomed
