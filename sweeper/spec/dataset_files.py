"""Reading a local dataset file into items, every problem with its file and line.

Formats: JSONL (one object a line), JSON (an array of objects), ShareGPT (JSON or JSONL whose
objects hold `conversations`: [{from, value}]), CSV (a header row), and a Hugging Face
`datasets` directory from `save_to_disk` (its Arrow files read with pyarrow: `datasets` itself
pulls a hub client and a dozen packages for what is one Arrow stream per shard).

An object (a row) becomes an item through `row_item`, whatever the format: chat `messages`
(sent as written), ShareGPT `conversations` (its human turns; the answers are the AR baseline's),
a `turns` list (MT-Bench's own layout), or a text column (`prompt_field`, else `prompt`, `text`,
`question`, or Alpaca's `instruction` + `input`), or the dataset's `template` over the row's
columns when it has one. The category comes from `category_field`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sweeper.spec.base import MAX_PROMPT_CHARS
from sweeper.spec.datasets import DatasetSpec, template_columns
from sweeper.spec.errors import SpecIssue
from sweeper.spec.workload import Message
from sweeper.statefile import INPUT, read_state

#: What a JSON file nested deeper than Python's reader allows (its recursion limit) is told.
TOO_DEEP = "not JSON: nested deeper than the reader allows (about 1,000 levels)"
# A CSV field may be as long as a prompt may be (the module's default is 131,072 characters).
csv.field_size_limit(MAX_PROMPT_CHARS + 1)

#: Text columns tried after `prompt_field`, in order.
TEXT_FIELDS = ("prompt", "text", "question", "instruction")
USER_ROLES = ("human", "user")
ANSWER_ROLES = ("gpt", "assistant", "chatgpt", "bard", "model")


@dataclass(frozen=True)
class Item:
    """One dataset item: its user turns (answers come from the AR baseline), or chat messages
    sent as written; where it was read (line, or row for Arrow)."""

    id: str
    category: str | None
    turns: tuple[str, ...] = ()
    messages: tuple[Message, ...] = ()
    system: str | None = None
    line: int | None = None


class FileProblem(ValueError):
    """A file that cannot be read as text at all: where (its line) and why."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def read_text(path: Path) -> str:
    """A text file decoded as the tools that write them do: UTF-8, a leading byte-order mark
    (Excel's, Notepad's) dropped; bytes that are not UTF-8 are a FileProblem at their line."""
    data = read_state(path, INPUT)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FileProblem(line, f"not UTF-8 text (byte 0x{data[exc.start]:02x})") from None


def text_lines(text: str) -> list[str]:
    """JSONL's lines: split on "\\n" only (and a "\\r" before it), never on the other line
    separators (U+2028, U+0085...) that a JSON string may hold raw, as `str.splitlines` does."""
    return [line.removesuffix("\r") for line in text.split("\n")]


class ItemProblem(ValueError):
    """A row that is not a prompt: the field and what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def read_items(path: Path, spec: DatasetSpec) -> tuple[list[Item], list[SpecIssue]]:
    """The file's items and its problems (file:line: field: message); OSError when unreadable."""
    fmt: str = spec.format
    if fmt == "auto":
        fmt = _format_of(path)
    rows: Iterator[tuple[int | None, str, Any]]
    if fmt == "hf":
        rows = _arrow_rows(path, spec.split)
    elif fmt == "csv":
        rows = _csv_rows(path)
    elif fmt == "jsonl" or (fmt == "sharegpt" and path.suffix == ".jsonl"):
        rows = _jsonl_rows(path)
    else:
        rows = _json_rows(path)
    items: list[Item] = []
    issues: list[SpecIssue] = []
    for index, (line, where, row) in enumerate(rows):
        if isinstance(row, SpecIssue):
            issues.append(row)
            continue
        try:
            items.append(row_item(row, spec, index, line, sharegpt=fmt == "sharegpt"))
        except ItemProblem as bad:
            issues.append(SpecIssue(where, line, bad.field, bad.message))
    if not items and not issues:
        issues.append(SpecIssue(str(path), None, "", "the dataset holds no items"))
    return items, issues


def _format_of(path: Path) -> str:
    if path.is_dir():
        return "hf"
    return {".jsonl": "jsonl", ".csv": "csv", ".json": "json"}.get(path.suffix.lower(), "jsonl")


def _jsonl_rows(path: Path) -> Iterator[tuple[int | None, str, Any]]:
    source = str(path)
    for number, raw in enumerate(text_lines(read_text(path)), start=1):
        if not raw.strip():
            continue
        try:
            yield number, source, json.loads(raw)
        except json.JSONDecodeError as exc:
            yield number, source, SpecIssue(source, number, "", f"not JSON: {exc.msg}")
        except RecursionError:
            yield number, source, SpecIssue(source, number, "", TOO_DEEP)


def _json_rows(path: Path) -> Iterator[tuple[int | None, str, Any]]:
    """The elements of a top-level array, each with the line it starts on."""
    source, text = str(path), read_text(path)
    decoder = json.JSONDecoder()
    pos = _skip(text, 0)
    if not text.startswith("[", pos):
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            yield exc.lineno, source, SpecIssue(source, exc.lineno, "", f"not JSON: {exc.msg}")
            return
        except RecursionError:
            yield 1, source, SpecIssue(source, 1, "", TOO_DEEP)
            return
        line = text.count("\n", 0, pos) + 1
        yield line, source, SpecIssue(source, line, "", "a JSON dataset is an array of objects")
        return
    pos = _skip(text, pos + 1)
    while pos < len(text) and text[pos] != "]":
        line = text.count("\n", 0, pos) + 1
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            yield exc.lineno, source, SpecIssue(source, exc.lineno, "", f"not JSON: {exc.msg}")
            return
        except RecursionError:
            yield line, source, SpecIssue(source, line, "", TOO_DEEP)
            return
        yield line, source, value
        pos = _skip(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos = _skip(text, pos + 1)
        elif pos < len(text) and text[pos] != "]":
            line = text.count("\n", 0, pos) + 1
            yield line, source, SpecIssue(source, line, "", "not JSON: expected ',' or ']'")
            return


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _csv_rows(path: Path) -> Iterator[tuple[int | None, str, Any]]:
    import io

    source = str(path)
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            line = reader.line_num + 1  # the line it was reading, not yet counted
            too_long = "field larger than field limit" in str(exc)
            message = f"a field over {MAX_PROMPT_CHARS:,} characters" if too_long else str(exc)
            yield line, source, SpecIssue(source, line, "", f"not CSV: {message}")
            return
        yield reader.line_num, source, {k: v for k, v in row.items() if k is not None}


def _arrow_rows(path: Path, split: str | None) -> Iterator[tuple[int | None, str, Any]]:
    """Rows of a `save_to_disk` directory: a Dataset (state.json names its Arrow files) or a
    DatasetDict (dataset_dict.json names its splits, one Dataset directory each)."""
    import pyarrow as pa

    splits_file = path / "dataset_dict.json"
    if splits_file.is_file():
        splits = list(json.loads(splits_file.read_text())["splits"])
        chosen = split or ("test" if "test" in splits else splits[0] if len(splits) == 1 else None)
        if chosen not in splits:
            message = f"choose a 'split' of {', '.join(splits)}"
            yield None, str(path), SpecIssue(str(path), None, "split", message)
            return
        path = path / str(chosen)
    state = path / "state.json"
    if not state.is_file():
        message = "no state.json: not a directory saved by datasets' save_to_disk"
        yield None, str(path), SpecIssue(str(path), None, "", message)
        return
    row = 0
    try:
        shards = [str(shard["filename"]) for shard in json.loads(read_text(state))["_data_files"]]
    except (ValueError, KeyError, TypeError):
        message = "state.json has no _data_files list of {filename}: not save_to_disk's"
        yield None, str(state), SpecIssue(str(state), None, "_data_files", message)
        return
    for name in shards:
        shard_path = path / name
        with pa.memory_map(str(shard_path)) as source:
            table = pa.ipc.open_stream(source).read_all()
        for record in table.to_pylist():
            row += 1
            yield row, f"{shard_path} row", record


def row_item(
    row: Any, spec: DatasetSpec, index: int, line: int | None, *, sharegpt: bool = False
) -> Item:
    """One row as an item (see the module docstring); ItemProblem names what is wrong."""
    if not isinstance(row, Mapping):
        raise ItemProblem("", f"an item is a JSON object, not {type(row).__name__}")
    category = row.get(spec.category_field)
    category = None if category in (None, "") else str(category)
    item_id = str(index)
    if spec.template:
        rendered = render(spec.template, row)
        if not rendered.strip():  # as a file's empty prompt is no prompt
            named = ", ".join(c for t in spec.template for c in template_columns(t)) or "none"
            raise ItemProblem(
                "template", f"renders an empty prompt (its columns {named} are empty or null)"
            )
        return Item(item_id, category, (rendered,), line=line)
    if "conversations" in row or sharegpt:
        system, turns = _conversation(row.get("conversations"))
        return Item(item_id, category, turns[: spec.turns or 1], system=system, line=line)
    if "messages" in row and spec.prompt_field != "messages" or spec.prompt_field == "messages":
        return Item(item_id, category, messages=_messages(row.get("messages")), line=line)
    if isinstance(row.get("turns"), list) and spec.prompt_field not in row:
        turns = tuple(str(t) for t in row["turns"] if isinstance(t, str) and t.strip())
        if not turns:
            raise ItemProblem("turns", "no user turn")
        return Item(item_id, category, turns[: spec.turns or len(turns)], line=line)
    for name in (spec.prompt_field, *TEXT_FIELDS):
        text = row.get(name)
        if isinstance(text, str) and text.strip():
            if name == "instruction" and isinstance(row.get("input"), str) and row["input"]:
                text = f"{text}\n\n{row['input']}"  # Alpaca: the instruction, then its input
            return Item(item_id, category, (text,), line=line)
    tried = ", ".join(dict.fromkeys((spec.prompt_field, *TEXT_FIELDS)))
    raise ItemProblem(
        spec.prompt_field, f"no prompt: none of {tried}, 'messages' or 'conversations'"
    )


def render(templates: list[str], row: Mapping[str, Any]) -> str:
    """The first template whose columns the row holds, non-empty, filled from the row (the
    last one whatever its columns are empty, as long as the row has them)."""
    for n, template in enumerate(templates):
        columns = template_columns(template)
        absent = [c for c in columns if c not in row]
        if absent:
            held = ", ".join(map(str, row)) or "none"
            raise ItemProblem("template", f"no column {absent[0]!r} (columns: {held})")
        last = n == len(templates) - 1
        if last or all(row[c] not in (None, "") for c in columns):
            return template.format_map({c: "" if row[c] is None else row[c] for c in columns})
    raise AssertionError("unreachable: the last template always renders")


def _conversation(value: Any) -> tuple[str | None, tuple[str, ...]]:
    if not isinstance(value, list) or not value:
        raise ItemProblem("conversations", "a ShareGPT item needs a list of {from, value}")
    system, turns = None, []
    for n, message in enumerate(value):
        if not isinstance(message, Mapping) or not isinstance(message.get("value"), str):
            raise ItemProblem(f"conversations.{n}", "a message is {from, value}")
        role = str(message.get("from", "")).lower()
        if role == "system":
            system = message["value"]
        elif role in USER_ROLES:
            turns.append(message["value"])
        elif role not in ANSWER_ROLES:
            raise ItemProblem(f"conversations.{n}.from", f"unknown speaker {role!r}")
    if not turns:
        raise ItemProblem("conversations", "no human turn")
    return system, tuple(turns)


def _messages(value: Any) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise ItemProblem("messages", "chat messages are a list of {role, content}")
    out = []
    for n, message in enumerate(value):
        try:
            out.append(Message.model_validate(message))
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in ("messages", n, *error["loc"]))
            raise ItemProblem(where, error["msg"]) from None
    if not any(m.role == "user" for m in out):
        raise ItemProblem("messages", "chat messages need a user turn")
    return tuple(out)
