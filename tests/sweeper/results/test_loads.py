"""Loads and their start-up phases (`sweeper.results.loads`): kept in the manifest through the
store's atomic write, read back whole; a manifest written before they existed still loads."""

from __future__ import annotations

import json
from pathlib import Path

from sweeper.results.loads import LoadRecord, StartPhase, within_start
from sweeper.results.reader import MANIFEST
from sweeper.results.store import RunStore

PHASES = [
    StartPhase(name="process_up", at_s=2.0, source="log", evidence="INFO 12-06 13:24:57 banner"),
    StartPhase(name="weights_loaded", at_s=18.0, source="log", evidence="Loading weights took"),
    StartPhase(name="graphs_captured", at_s=117.0, source="log", evidence="Warming up done."),
    StartPhase(name="ready", at_s=121.5, source="health", evidence="/health 200"),
]


def test_loads_round_trip_through_the_manifest(tmp_path: Path) -> None:
    fields = {"sweep": "s", "sweeper_version": "0", "spec": {}, "runtime_source_hash": "h"}
    store = RunStore.create(tmp_path, fields)
    load = LoadRecord(
        host="local",
        label="b2-cg1",
        index=0,
        launch_id="24f4b5f45ee7cd01",
        started_at="2026-12-06T13:24:55+00:00",
        ready_s=121.5,
        phases=PHASES,
    )
    store.manifest.loads.append(load)
    store.save_manifest()
    again = RunStore.open(store.dir).manifest.loads
    assert again == [load]
    assert again[0].durations() == {
        "process_up": 2.0,
        "weights_loaded": 16.0,
        "graphs_captured": 99.0,
        "ready": 4.5,
    }
    # A manifest written before loads were recorded: no key, no loads.
    written = json.loads((store.dir / MANIFEST).read_text())
    del written["loads"]
    (store.dir / MANIFEST).write_text(json.dumps(written))
    assert RunStore.open(store.dir).manifest.loads == []


def test_a_phase_placed_outside_its_start_loses_its_time() -> None:
    """A log time an hour off (a host in another time zone) is not believed; a phase absent
    or unknown before a known one leaves its seconds to the next."""
    hour_off = PHASES[1].model_copy(update={"at_s": 3618.0})
    kept = within_start([PHASES[0], hour_off, PHASES[2]], ready_s=121.5)
    assert [p.at_s for p in kept] == [2.0, None, 117.0]
    assert kept[1].evidence.startswith("placed at +3618.00 s, outside this start (0 to 121.50 s)")
    load = LoadRecord(
        host="h", label="c", index=1, launch_id="x", started_at="t", ready_s=121.5, phases=kept
    )
    assert load.durations() == {
        "process_up": 2.0,
        "weights_loaded": None,
        "graphs_captured": 115.0,
        "ready": None,
    }
