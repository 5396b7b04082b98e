"""What a run's report says of its history: for each config, whether tonight is inside the band
of the nights before it (`sweeper.analysis.changepoints.bands`), linked to the trends page."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from sweeper.analysis.changepoints import Band, bands
from sweeper.results.history import HistoryError, history_frame, is_postgres, shown
from sweeper.results.reader import Run

#: The trends page of the whole history, rewritten by each nightly beside the sweeps of its
#: results root (`sweeper.schedule.nightly`); every report of a run under that root links it.
TRENDS_PAGE = "history.html"


@dataclass(frozen=True)
class HistoryNote:
    """The report's history section."""

    bands: list[Band]
    #: Where the history is (a path, or a server's URL without its password).
    source: str
    #: The trends page, relative to the report (None when none was written).
    link: str | None = None


def anchor(label: str) -> str:
    """A config's id on the trends page, from its series label."""
    return "config-" + re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-").lower()


def history_note(url: str, run: Run, page: Path | None = None) -> HistoryNote | None:
    """The report's history section for `run` from the history at `url`: None where there is
    no history (an embedded file not made yet: reading would create it), it cannot be read,
    or it does not hold the run. `page`: the trends page to link, if written."""
    if not is_postgres(url) and not Path(url.removeprefix("sqlite://")).is_file():
        return None
    if run.manifest is None:
        return None
    try:
        history = history_frame(url)
    except HistoryError:
        return None
    found = bands(history, run.manifest.sweep, run.manifest.run_id)
    if not found:
        return None
    link = os.path.relpath(page, run.dir) if page is not None and page.is_file() else None
    return HistoryNote(found, shown(url), link)
