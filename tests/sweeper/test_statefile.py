"""The one state-file reader (`sweeper.statefile`) on real files: whatever lies at the path is
looked at before a byte is read (a FIFO, a device link, a broken link, a file past its kind's
cap: one line naming the file), a directory and an absent file are what `open` says, and a file
that reports no size (/proc) is read, never past the cap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sweeper.statefile import STATE, Kind, UnsafeStateFile, read_state
from tests.bounded import bounded


def test_what_is_no_regular_file_or_past_the_cap_is_refused_unread(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "broken").symlink_to(tmp_path / "nothing")
    with open(tmp_path / "big", "wb") as handle:
        handle.truncate(STATE.cap + 1)  # sparse: no disk
    said = {}
    with bounded(seconds=10):
        for name in ("fifo", "zero", "broken", "big"):
            with pytest.raises(UnsafeStateFile) as refused:
                read_state(tmp_path / name, STATE)
            said[name] = str(refused.value).removesuffix(f": {tmp_path / name}")
    assert said == {
        "fifo": "not a regular file (a FIFO)",
        "zero": "not a regular file (a character device)",
        "broken": "is a link to nothing",
        "big": f"holds {STATE.cap + 1} bytes, more than any state file (64 MiB)",
    }
    with pytest.raises(IsADirectoryError):
        read_state(tmp_path, STATE)
    with pytest.raises(FileNotFoundError):
        read_state(tmp_path / "absent", STATE)


def test_a_file_that_reports_no_size_is_read_up_to_the_cap() -> None:
    status = Path("/proc/self/status")
    assert status.stat().st_size == 0
    assert read_state(status, STATE).startswith(b"Name:")
    with pytest.raises(UnsafeStateFile, match=r"holds more than any status file \(16 bytes\)"):
        read_state(status, Kind("status file", 16))
