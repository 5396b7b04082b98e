"""The catalog's records are the one table of engines: presets, defaults and the start commands
all hang off them, and every record's default preset is one of its own."""

from __future__ import annotations

import pytest

from sweeper.catalog.records import PRESETS, RECORDS, SETTINGS, presets_of


def test_each_preset_belongs_to_one_record() -> None:
    for name, (engine, mapping) in PRESETS.items():
        assert RECORDS[engine].presets[name] is mapping
    assert sum(len(r.presets) for r in RECORDS.values()) == len(PRESETS)


@pytest.mark.parametrize("name", list(RECORDS))
def test_a_record_is_consistent(name: str) -> None:
    record = RECORDS[name]
    assert record.name == name
    assert record.default_preset is None or record.default_preset in presets_of(name)
    if record.command is None:  # an endpoint: nothing to start, nothing to map
        assert not record.launched and not record.presets and not record.runs_bundled_runtime
    else:
        assert record.launched and record.command.entry[0] == "-m"
        assert set(record.command.setting_flags) == set(SETTINGS)


def test_only_the_bundled_runtime_takes_a_launch_id() -> None:
    echoes = {n for n, r in RECORDS.items() if r.command and r.command.launch_id_flag}
    assert echoes == {n for n, r in RECORDS.items() if r.runs_bundled_runtime} == {"ddtree_runtime"}
