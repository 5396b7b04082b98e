"""A search's state files before a resume: a torn journal tail is cut and kept, anything else
damaged is one line naming the file, never a JSON error from inside Optuna."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper.search import SearchStateError, resumable_search

ENTRY = b'{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}\n'


def test_a_torn_journal_tail_is_cut_and_kept(tmp_path: Path) -> None:
    (tmp_path / "search.optuna.jsonl").write_bytes(ENTRY * 2 + b'{"op_code": 4, "wor')
    notes = resumable_search(tmp_path)
    assert len(notes) == 1 and "cut a torn last line" in notes[0]
    assert (tmp_path / "search.optuna.jsonl").read_bytes() == ENTRY * 2
    [kept] = (tmp_path / "damaged").iterdir()
    assert kept.read_bytes() == b'{"op_code": 4, "wor'
    assert resumable_search(tmp_path) == []


def test_a_damaged_middle_line_refuses_the_resume(tmp_path: Path) -> None:
    (tmp_path / "search.optuna.jsonl").write_bytes(ENTRY + b"garbage\n" + ENTRY)
    with pytest.raises(SearchStateError, match=r"search.optuna.jsonl:2: not JSON"):
        resumable_search(tmp_path)


@pytest.mark.parametrize("text", ['{"spent_s": 12.5, "tri', "[]", '{"spent_s": "x"}'])
def test_an_unreadable_search_json_refuses_the_resume(tmp_path: Path, text: str) -> None:
    (tmp_path / "search.json").write_text(text)
    with pytest.raises(SearchStateError, match="search.json is unreadable"):
        resumable_search(tmp_path)
    (tmp_path / "search.json").write_text(json.dumps({"spent_s": 1.0, "trials": []}))
    assert resumable_search(tmp_path) == []
