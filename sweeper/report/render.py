"""Render a RunView (and optionally a Comparison) to one self-contained HTML file.

jinja2 runs with autoescape on for the whole template, so model output and any other string
from disk arrives in the page as text (`<script>`, `</pre>`, `&amp;` stay visible, never markup).
The file is written atomically: a reader never sees half a report.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from sweeper.analysis.compare import Comparison
from sweeper.analysis.drift import DRIFT_LIMIT, Drift, baseline_drift, mark_drift
from sweeper.analysis.ending import verdict_counts
from sweeper.analysis.goodput import Knee
from sweeper.analysis.impossible import IMPOSSIBLE_MARGIN
from sweeper.config.labels import load_label
from sweeper.proof.sampled import proofs
from sweeper.report.assemble import VIEW_COLUMNS, RunView, negotiated
from sweeper.report.badges import badges
from sweeper.report.datasets import dataset_section
from sweeper.report.diagnosis import load_diagnosis
from sweeper.report.figures import all_charts
from sweeper.report.formatting import fmt, ms, pct
from sweeper.report.history_note import HistoryNote, anchor
from sweeper.report.knees import knee_rows, rate_text
from sweeper.report.paper import PaperGrid, paper_grid, run_paper_table
from sweeper.report.startup import PHASE_HEADS, startup_chart, startup_tables
from sweeper.results.manifest import Manifest
from sweeper.results.reader import Run

#: The negotiated capabilities the report shows per server (`_servers`).
SERVER_KEYS = ("token_ids", "acceptance", "margins", "sampling")
PROVENANCE_KEYS = [
    "sweep",
    "run_id",
    "status",
    "exit_code",
    "sweeper_version",
    "runtime_source_hash",
    "spec_path",
    "follows",
    "created_at",
    "started_at",
    "finished_at",
    "resumed_at",
    "points_total",
    "points_done",
    "points_ok",
    "points_failed",
]


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent),
        autoescape=True,  # on for every template, whatever its file name
        undefined=jinja2.StrictUndefined,
    )
    env.globals.update(fmt=fmt, pct=pct, ms=ms)
    return env


def _speed(value: Any) -> str:
    """The speedup over the speed baseline (`runtime.speed_baseline`), where a point has one."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return f" / {fmt(value)} vs speed baseline"


def _summary(view: RunView, drifted: dict[str, float]) -> list[tuple[str, list[dict[str, Any]]]]:
    out = []
    for host, hp in view.points.groupby("host", sort=True):
        rows = [
            {
                "config": r["config"],
                "temperature": f"{r['temperature']:g}",
                "load": load_label(r),
                "status": r["status"],
                "tok_s": fmt(r.get("output_tok_s"), 1),
                # the baseline is the unit of speedup even where the run left it blank; a
                # client-bound point has none (its numbers are the client's)
                "speedup": fmt(1.0 if r["mode"] == "ar" and not bound else r.get("speedup"))
                + _speed(r.get("speed_speedup")),
                "e2e_speedup": fmt(
                    1.0 if r["mode"] == "ar" and not bound else r.get("e2e_speedup")
                ),
                "goodput": _share(r.get("goodput_share")),
                "client_bound": bound,
                "client_reason": str(r.get("client_bound_reason") or ""),
                "busy": _true(r.get("host_busy")) or _true(r.get("baseline_busy")),
                "busy_reason": str(r.get("host_busy_reason") or "its baseline's host was busy"),
                "drift": drifted.get(str(r.get("point_id"))),
                "impossible": str(r.get("speedup_impossible_reason") or "")
                if _true(r.get("speedup_impossible"))
                else "",
                "tau": fmt(r.get("tau")),
                "ttft_p50": ms(r.get("ttft_p50")),
                "ttft_p99": ms(r.get("ttft_p99")),
                "itl_p50": ms(r.get("itl_p50")),
                "itl_p99": ms(r.get("itl_p99")),
                "determinism": r["determinism"],
                "why": _why(r),
                "best": bool(r["best"]),
            }
            for r in hp.to_dict("records")
            for bound in [_true(r.get("client_bound"))]
            for unit in [r["mode"] == "ar" and not bound]
        ]
        out.append((str(host), rows))
    return out


def _why(row: dict[str, Any]) -> str:
    """What a point's determinism badge says on hover: why unproven, or a calibrated near-tie."""
    if _true(row.get("near_tie_excess")):
        return "near-ties above the AR-vs-AR control's rate: counted as diverged"
    reason = row.get("unproven_reason")
    return str(reason) if isinstance(reason, str) else ""


def _sampled(view: RunView) -> list[dict[str, Any]]:
    """How each speculative point at temperature > 0 was proven: its check, verdict and, for a
    distribution test, p-value, samples, power and the AR-vs-AR control."""
    configs = dict(zip(view.points["point_id"], view.points["config_long"], strict=True))
    out = []
    for proof in proofs(view.points.to_dict("records")):
        shift = proof["distribution_shift"]
        out.append(
            {
                "host": proof["host"],
                "config": configs.get(proof["point_id"], proof["point_id"]),
                "check": proof["check"],
                "test": proof["test"],
                "determinism": proof["determinism"],
                "p": fmt(proof["distribution_p"], 4),
                "n": fmt(proof["distribution_n"], 0),
                "shift": "\u2014" if shift is None else f"{shift:.1%}",
                "control": fmt(proof["distribution_control_p"], 4),
                **_scored(proof),
                "why": proof["why"],
            }
        )
    return out


def _scored(proof: dict[str, Any]) -> dict[str, str]:
    """The scored test's cells (empty where it did not run): p, tokens and exact share, the
    temperature change it detects, its control's p and the first impossible token."""
    power, share = proof["scored_power"], proof["scored_exact_share"]
    tokens = fmt(proof["scored_n_tokens"], 0)
    return {
        "scored_p": fmt(proof["scored_p"], 4) + f" {proof['scored_direction'] or ''}".rstrip(),
        "scored_n": tokens + (f" ({share:.0%} exact)" if share is not None else ""),
        "scored_shift": "\u2014" if power is None else f"{math.exp(power):.3g}x",
        "scored_control": fmt(proof["scored_control_p"], 4),
        "impossible": proof["scored_impossible"] or "",
    }


def _drift(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The AR baselines' drift table, and the points whose baseline drifted (point id -> drift)."""
    drifts = baseline_drift(records)
    marked = mark_drift(records, drifts)
    drifted = {str(r["point_id"]): r["baseline_drift"] for r in marked if "baseline_drift" in r}
    return [_drift_row(d) for d in drifts], drifted


def _drift_row(d: Drift) -> dict[str, Any]:
    return {
        "host": d.host,
        "baseline": d.label + "".join(f" {k}={v}" for k, v in d.flags if k != "cuda_graph"),
        "at": d.at,
        "n": len(d.values),
        "first": fmt(d.first, 2),
        "last": fmt(d.last, 2),
        "max_drift": f"{d.max_drift:.1%}",
        "drifted": d.drifted,
    }


def _true(value: Any) -> bool:
    return value is not None and value == value and bool(value)


def _share(value: Any) -> str:
    return "\u2014" if value is None or value != value else f"{float(value):.0%}"


def _knee_text(knee: Knee | None) -> str:
    if knee is None or knee.rate is None:
        return "none" if knee is not None and knee.stopped_by != "no slo: in the spec" else "\u2014"
    return ("\u2265 " if knee.censored else "") + rate_text(knee.rate)


def _knees(view: RunView) -> tuple[list[str], list[dict[str, Any]]]:
    """The knee table: the rates (columns) and a row per config series."""
    rows = knee_rows(view.points)
    rates = sorted({rate for row in rows for rate in row.rates})
    out = []
    for row in rows:
        c = row.comparison
        cells = {}
        for s in c.latency if c else ():
            marker = " *" if s.below_knees else ""
            cells[s.rate] = f"E2E \u00d7{fmt(s.e2e)} / ITL \u00d7{fmt(s.itl)}{marker}"
        for rate in row.client_bound_rates:
            cells[rate] = "client-bound"
        out.append(
            {
                "host": row.host,
                "setting": row.setting,
                "config": row.config,
                "knee": _knee_text(c.knee if c else row.knee),
                "baseline_knee": _knee_text(c.baseline) if c else "",
                "ratio": fmt(c.ratio) if c else "",
                "stopped_by": ((c.knee if c else row.knee) or Knee(None, False, "")).stopped_by
                or "",
                "cells": [cells.get(rate, "") for rate in rates],
            }
        )
    return [rate_text(r) for r in rates], out


def _provenance(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [(k, _text(manifest[k])) for k in PROVENANCE_KEYS if k in manifest]
    if manifest.get("timings"):
        rows.append(("timings", _text(manifest["timings"])))
    return rows


def _servers(manifest: dict[str, Any]) -> list[dict[str, str]]:
    """What each server config's instance gave and the paths chosen (its negotiated
    capabilities: token ids, acceptance, margins, sampling, and how prompts were sent)."""
    return [
        {
            "server": name,
            **{key: str(caps.get(key) or "") for key in SERVER_KEYS},
            "prompt": str(caps["details"].get("prompt") or ""),
        }
        for name, caps in negotiated(manifest)
    ]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _hosts(manifest: dict[str, Any]) -> tuple[list[tuple[str, dict[str, str]]], list[str]]:
    hosts = manifest.get("hosts") or {}
    if not isinstance(hosts, dict):
        return [], []
    rows = [
        (str(name), {k: _text(v) for k, v in (facts or {}).items() if k != "name"})
        for name, facts in hosts.items()
    ]
    columns = list(dict.fromkeys(k for _, facts in rows for k in facts))
    return rows, columns


def render_html(
    view: RunView,
    comparison: Comparison | None = None,
    bisect: str | None = None,
    *,
    startup: Sequence[Manifest] = (),
    history: HistoryNote | None = None,
) -> str:
    """The report page as a string; `startup`: other runs whose loads the Start-up section
    shows beside this run's; `history`: where tonight stands in each config's history."""
    hosts, host_columns = _hosts(view.manifest)
    own = [view.run.manifest] if view.run.manifest is not None else []
    starts = startup_tables([*own, *startup])
    pts = view.points
    counts = {
        "header": header_counts(pts.to_dict("records")),
        "unproven": int(((pts["determinism"] == "unproven") & (pts["status"] == "ok")).sum()),
        "client_bound": int(sum(_true(v) for v in pts["client_bound"])),
        "busy": int(sum(_true(v) for v in pts["host_busy"])),
        "impossible": int(sum(_true(v) for v in pts.get("speedup_impossible", []))),
    }
    spec = view.manifest.get("spec")
    # The records as written: the view's own label columns would read as grid flags.
    written = pts.drop(columns=list(VIEW_COLUMNS), errors="ignore")
    drift, drifted = _drift(written.to_dict("records"))
    counts["drifted"] = sum(row["drifted"] for row in drift)
    return (
        _env()
        .get_template("template.html.j2")
        .render(
            view=view,
            badges=badges(),
            counts=counts,
            provenance=_provenance(view.manifest),
            hosts=hosts,
            host_columns=host_columns,
            servers=_servers(view.manifest),
            spec_text=json.dumps(spec, indent=2, default=str) if spec else "",
            summary=_summary(view, drifted),
            answer_hosts=len({a.host for a in view.answers}),
            drift=drift,
            drift_limit=f"{DRIFT_LIMIT:.0%}",
            impossible_margin=f"{IMPOSSIBLE_MARGIN:.0%}",
            knees=_knees(view),
            slo=(spec or {}).get("slo") if isinstance(spec, dict) else None,
            judged="meets_slo" in pts and bool(pts["meets_slo"].notna().any()),
            charts=all_charts(view),
            startup=starts,
            startup_chart=startup_chart(starts),
            phase_heads=list(PHASE_HEADS.values()),
            comparison=comparison,
            bisect=bisect,
            history=history,
            anchor=anchor,
            diagnosis=load_diagnosis(view.run, view.manifest.get("follows")),
            datasets=dataset_section(view.run, written),
            paper=_paper(view.run, written),
            sampled=_sampled(view),
            alpha=_alpha(spec),
            generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ"),
        )
    )


def header_counts(rows: list[dict[str, Any]]) -> str:
    """What the report's header counts, each named: `4 points: 3 exact, 1 n/a (the AR
    baseline), 0 failed` (every verdict the ok points have, least to most severe)."""
    ar = all(r.get("mode") == "ar" for r in rows if r.get("determinism") == "n/a")
    named = {"n/a": "n/a (the AR baseline)" if ar else "n/a (compared with nothing)"}
    parts = [f"{n} {named.get(v, v)}" for v, n in verdict_counts(rows)]
    failed = sum(r.get("status") == "failed" for r in rows)
    return f"{len(rows)} points: " + ", ".join([*parts, f"{failed} failed"])


def _paper(run: Run, points: pd.DataFrame) -> PaperGrid | None:
    table = run_paper_table(run, points)
    return paper_grid(table) if table is not None else None


def _alpha(spec: Any) -> str:
    determinism = (spec or {}).get("determinism") if isinstance(spec, dict) else None
    value = (determinism or {}).get("alpha") if isinstance(determinism, dict) else None
    return f"{value:g}" if isinstance(value, (int, float)) else "0.01"


def write_report(
    view: RunView,
    out: Path,
    comparison: Comparison | None = None,
    bisect: str | None = None,
    *,
    startup: Sequence[Manifest] = (),
    history: HistoryNote | None = None,
) -> Path:
    """Render and write atomically to `out`; returns the path. `bisect`: the nightly's bisect
    of the regression, in one line; `startup`: other runs' loads to show; `history`: the
    report's history section (`render_html`)."""
    html = render_html(view, comparison, bisect, startup=startup, history=history)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(html)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a report is meant to be shared
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
