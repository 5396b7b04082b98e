"""`hf:` datasets say what is wrong in one line each, naming the dataset, column or setting (issue
40 #9-#12), read by the real `datasets` library from local data: a hub that cannot be reached is
found in a moment and said without the libraries' retry chatter; a `field` the data lacks or
that holds no text is one problem at the spec's line; settings the data cannot honour are
refused; a local directory's errors carry no internals."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import huggingface_hub.constants
import pytest

from sweeper.spec import SpecError, parse_spec
from sweeper.spec.hub_access import hub_unreachable
from tests.sweeper.spec.test_hub import gsm_clone, offline  # noqa: F401 (a fixture)

ROWS = [
    {"q": f"question {i}", "n": i, "l": [i, i], "z": None, "topic": "ab"[i % 2]} for i in range(5)
]


def _data(root: Path) -> None:
    root.mkdir()
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))


def _issues(text: str, base: Path) -> list[tuple[int | None, str, str]]:
    with pytest.raises(SpecError) as refused:
        parse_spec(text, source="s.yaml", base_dir=base)
    return [(i.line, i.field, i.message) for i in refused.value.issues]


def _entry(**keys: object) -> str:
    inner = ", ".join(f"{k}: {json.dumps(v)}" for k, v in keys.items())
    return f"name: h\nworkload:\n  datasets:\n    - {{hf: d, {inner}}}\n"


def test_an_unreachable_hub_is_one_line_in_moments(tmp_path: Path) -> None:
    """#9: no HF_HUB_OFFLINE, and the hub's port refuses: one line naming the dataset, why the
    hub was not asked and the caches read; not 11 retry lines over 26 s, not "cached in None"."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens once it is closed
    spec = tmp_path / "s.yaml"
    spec.write_text("name: h\nworkload:\n  datasets:\n    - {hf: openai/gsm8k, config: main}\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE")}
    env |= {"HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HOME": str(tmp_path / "home")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "validate", str(spec)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    took = time.monotonic() - started
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{spec}:4: workload.datasets[0].hf: dataset hf:openai/gsm8k, ")
    assert "the hub cannot be reached (127.0.0.1: Connection refused)" in lines[0]
    assert f"not in the cache ({tmp_path / 'home'}/datasets, " in lines[0]
    assert "None" not in lines[0] and "Retry" not in done.stderr
    assert took < 20, took  # the retries alone took 26 s (a python start is ~3 s here)


def test_the_hub_probe_gives_up_in_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)  # answers 501
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", endpoint)
        assert hub_unreachable(timeout=2) is None  # an answer, whatever its status
    finally:
        server.shutdown()
        server.server_close()
    # A name that never resolves (.invalid is reserved): unreachable, said at once.
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "https://no-such-hub.invalid")
    started = time.monotonic()
    said = hub_unreachable(timeout=1)
    assert said is not None and said.startswith("no-such-hub.invalid: ")
    assert time.monotonic() - started < 3


@pytest.mark.parametrize(
    ("field", "said"),
    [
        ("nope", "'nope' is not a column of {d} [test] (columns: q, n, l, z, topic)"),
        ("n", "column 'n' of {d} [test] holds int 0 at row 1 (and 4 more rows)"),
        ("l", "column 'l' of {d} [test] holds list [0, 0] at row 1 (and 4 more rows)"),
        ("z", "column 'z' of {d} [test] holds null at row 1 (and 4 more rows)"),
    ],
)
def test_a_field_the_data_lacks_or_that_holds_no_text_is_one_problem(
    field: str,
    said: str,
    tmp_path: Path,
    offline: Path,  # noqa: F811
) -> None:
    """#10: one problem at the spec's `field` line, naming the column and a row (it was one per
    row, each saying "no prompt: none of n, prompt, text, ...")."""
    _data(tmp_path / "d")
    ((line, where, message),) = _issues(_entry(field=field), tmp_path)
    assert (line, where) == (4, "workload.datasets[0].field")
    assert message.startswith(said.format(d=tmp_path / "d")), message


@pytest.mark.parametrize(
    ("keys", "field", "said"),
    [
        ({"template": "{z}"}, "template",
         "renders an empty prompt (its columns z are empty or null) (and 4 more rows)"),
        ({"field": "q", "template": "{q}"}, "workload.datasets[0].template",
         "give 'field' or 'template', not both"),
        ({"field": "q", "category_field": "kind"}, "workload.datasets[0].category_field",
         "'kind' is not a column of"),
        ({"field": "q", "revision": "v1"}, "workload.datasets[0].revision",
         "is no git checkout: 'revision' applies to a hub id or a clean git checkout"),
    ],
)  # fmt: skip
def test_settings_the_data_cannot_honour_are_refused(
    keys: dict,
    field: str,
    said: str,
    tmp_path: Path,
    offline: Path,  # noqa: F811
) -> None:
    """#11: each was accepted silently (empty prompts, a field ignored, every prompt in no
    category, a revision that pinned nothing)."""
    _data(tmp_path / "d")
    ((_, where, message),) = _issues(_entry(**keys), tmp_path)
    assert where == field and said in message, message


def test_a_revision_the_checkout_is_not_at_is_refused(tmp_path: Path, offline: Path) -> None:  # noqa: F811
    head = gsm_clone(tmp_path / "d", n=2)
    text = _entry(config="main", field="question", revision="HEAD~0")
    assert parse_spec(text, base_dir=tmp_path).workload.datasets[0].revision == head
    ((_, where, message),) = _issues(
        _entry(config="main", field="question", revision="v9"), tmp_path
    )
    assert where == "workload.datasets[0].revision"
    assert f"is checked out at {head[:12]}, not at revision 'v9' (not in its history)" in message


def test_local_directory_errors_carry_no_internals(tmp_path: Path) -> None:
    """#12: an empty directory ("functools.partial(<function resolve_pattern at 0x...>"), an
    empty data file ("StopIteration"), a corrupt parquet file (datasets' own log line first):
    one line each, the spec's."""
    for name in ("empty", "nothing", "corrupt"):
        (tmp_path / name).mkdir()
    (tmp_path / "nothing" / "test.jsonl").write_text("")
    (tmp_path / "corrupt" / "test.parquet").write_text("not parquet")
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: h\nworkload:\n  datasets:\n    - {hf: empty}\n    - {hf: nothing}\n"
        "    - {hf: corrupt}\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "validate", str(spec)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 3, done.stderr
    for line, (n, _, said) in zip(lines, [
        (4, "empty", "doesn't contain any data files"),
        (5, "nothing", "a data file holds no rows"),
        (6, "corrupt", "Parquet magic bytes not found"),
    ], strict=True):  # fmt: skip
        assert line.startswith(f"{spec}:{n}: workload.datasets[{n - 4}].hf: cannot read "), line
        assert line.endswith(said) or said in line, line
        for internal in ("StopIteration", "functools", "<function", "0x7", "Failed to read"):
            assert internal not in line, line
