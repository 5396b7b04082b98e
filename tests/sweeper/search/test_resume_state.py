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
    with pytest.raises(SearchStateError, match=r"search.optuna.jsonl:2: not one of the study's"):
        resumable_search(tmp_path)


@pytest.mark.parametrize("text", ['{"spent_s": 12.5, "tri', "[]", '{"spent_s": "x"}'])
def test_an_unreadable_search_json_refuses_the_resume(tmp_path: Path, text: str) -> None:
    (tmp_path / "search.json").write_text(text)
    with pytest.raises(SearchStateError, match="search.json is unreadable"):
        resumable_search(tmp_path)
    (tmp_path / "search.json").write_text(json.dumps({"spent_s": 1.0, "trials": []}))
    assert resumable_search(tmp_path) == []


#: Issue 40's damage kinds (as the corpus names them) and what else a hand could leave.
DAMAGE = {
    "truncated": b'{"spent_s": 12.5, "tri',
    "empty": b"",
    "null": b"null",
    "list": b"[]",
    "nan spent": b'{"spent_s": NaN, "trials": []}',
    "trials not a list": b'{"spent_s": 1, "trials": {"a": 1}}',
    "a trial not a trial": b'{"spent_s": 1, "trials": [1]}',
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_item6_search_json_damaged_any_way_refuses_the_resume(tmp_path: Path, kind: str) -> None:
    """Each kind is one line naming the file and what to do; none is read as no search yet,
    and none reaches the driver (NaN time spent would have made `stop.hours` never stop)."""
    (tmp_path / "search.json").write_bytes(DAMAGE[kind])
    with pytest.raises(SearchStateError) as refused:
        resumable_search(tmp_path)
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'search.json'} is unreadable (")
    assert message.endswith(
        "restore it, or remove it to resume with search.stop.hours counted from now"
    )


@pytest.mark.parametrize("line", [b"null", b"[]", b"{}", b'"text"', b"12"])
def test_item6_a_journal_line_that_is_not_a_record_refuses_the_resume(
    tmp_path: Path, line: bytes
) -> None:
    """Valid JSON that is no study record (Optuna would fail on it with a KeyError)."""
    (tmp_path / "search.optuna.jsonl").write_bytes(ENTRY + line + b"\n")
    with pytest.raises(SearchStateError, match=r"search.optuna.jsonl:2: not one of the study's"):
        resumable_search(tmp_path)
