"""The live display keeps per-host counts and survives the runner's calls from several threads."""

from __future__ import annotations

import io
import threading

from rich.console import Console

from sweeper.progress import PlainProgress, RichProgress


def test_rich_progress_counts_points_per_host() -> None:
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=True, width=160)
    with RichProgress(console) as progress:
        for host in ("a", "b"):
            progress.host_started(host, total=4, done=1)

        def work(host: str) -> None:
            for n in range(3):
                progress.status(host, f"config {n}")
                progress.tokens(host, 10)
                progress.point_done(host, f"{host}-p{n}", "ok", "1.0 tok/s")

        threads = [threading.Thread(target=work, args=(h,)) for h in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        tasks = {t.fields["host"]: t for t in progress._progress.tasks}
        assert tasks["a"].completed == 4 and tasks["b"].completed == 4
    assert "a-p2" in sink.getvalue() and "4/4" in sink.getvalue()


def test_plain_progress_lines() -> None:
    sink = io.StringIO()
    progress = PlainProgress(Console(file=sink, width=200))
    progress.host_started("local", total=2, done=0)
    progress.point_done("local", "p1", "failed", "start failed: boom")
    assert "local: [1/2] failed p1 start failed: boom" in sink.getvalue()
