"""Spec loading: every bad spec in the corpus names its file, line, field and problem; good specs
load; prompts files, host shorthand and secrets resolve as documented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper.spec import (
    LocalHostSpec,
    SlurmHostSpec,
    SpecError,
    SSHHostSpec,
    load_spec,
    parse_spec,
    resolve_secrets,
    spec_json_schema,
)
from sweeper.spec.errors import suggest
from sweeper.spec.hosts import slurm_time_seconds

ROOT = Path(__file__).resolve().parents[3]
BAD_SPECS = sorted((Path(__file__).parent / "bad_specs").glob("*.yaml"))
MINIMAL = "name: ok\nworkload:\n  prompts: [{id: a, text: hi}]\n"


def _expectation(path: Path) -> tuple[int, str, str]:
    """`# expect: LINE: FIELD: MESSAGE` on the first line of each corpus file."""
    first = path.read_bytes().splitlines()[0].decode("ascii")
    assert first.startswith("# expect: "), f"{path.name} lacks its '# expect:' line"
    line, field, message = first.removeprefix("# expect: ").split(": ", 2)
    return int(line), field, message


def test_corpus_is_large_enough() -> None:
    assert len(BAD_SPECS) >= 15


@pytest.mark.parametrize("path", BAD_SPECS, ids=[p.stem for p in BAD_SPECS])
def test_bad_spec_names_file_line_field_and_problem(path: Path) -> None:
    line, field, message = _expectation(path)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    issues = caught.value.issues
    assert issues, "a SpecError must carry at least one issue"
    matching = [i for i in issues if i.line == line and i.field == field and message in i.message]
    assert matching, f"expected {line}: {field}: {message!r}, got {[str(i) for i in issues]}"
    assert all(i.file == str(path) for i in issues)
    # str() lists each as file:line: field: message, one per line.
    assert str(matching[0]).startswith(f"{path}:{line}: ")
    assert len(str(caught.value).splitlines()) == len(issues)


def test_unknown_key_suggestion() -> None:
    expected = "unknown key 'budgets' (did you mean 'budget'?)"
    assert suggest("budgets", ["budget", "topk"]) == expected
    assert suggest("zzz", ["budget", "topk"]) == "unknown key 'zzz'"


def test_several_errors_are_all_reported() -> None:
    text = "name: x\nruntime: {port: 0}\nworkload:\n  prompts: [{id: a, text: hi}]\n  repeats: 0\n"
    with pytest.raises(SpecError) as caught:
        parse_spec(text, source="s.yaml")
    assert [(i.line, i.field) for i in caught.value.issues] == [
        (2, "runtime.port"),
        (5, "workload.repeats"),
    ]


def test_search_budget_was_renamed_to_stop() -> None:
    """`budget` is only the tree budget (a grid key): the search's old `budget` is refused with
    its new name, at its own line, not as an unknown key."""
    text = MINIMAL + "grid: {budget: [8, 16]}\nsearch:\n  strategy: tpe\n  budget: {restarts: 3}\n"
    with pytest.raises(SpecError) as caught:
        parse_spec(text, source="s.yaml")
    [issue] = caught.value.issues
    assert (issue.file, issue.line, issue.field) == ("s.yaml", 7, "search.budget")
    assert issue.message.startswith("renamed to 'stop'") and "unknown key" not in issue.message
    spec = parse_spec(
        MINIMAL + "grid: {budget: [8, 16]}\nsearch: {stop: {restarts: 3, hours: 2}}\n"
    )
    assert spec.search is not None and spec.search.stop is not None
    assert (spec.search.stop.restarts, spec.search.stop.hours) == (3, 2)
    assert spec.grid.budget == [8, 16]
    with pytest.raises(SpecError, match=r"s.yaml:5: search.stop: stop needs restarts or hours"):
        parse_spec(MINIMAL + "search:\n  stop: {}\n", source="s.yaml")


@pytest.mark.parametrize("name", ["local.yaml", "local-rate.yaml"])
def test_shipped_specs_load(name: str) -> None:
    spec = load_spec(ROOT / "sweeps" / name)
    assert spec.name == Path(name).stem
    assert len(spec.workload.prompts) >= 4


def test_defaults_and_local_shorthand() -> None:
    spec = parse_spec(MINIMAL)
    assert spec.hosts == [LocalHostSpec()]
    assert spec.baseline is True
    assert spec.runtime.engine == "ddtree_runtime"
    assert spec.runtime.model == "smollm2-135m"
    assert spec.runtime.draft == "ngram"


def test_ssh_host_fields_from_the_remote_issue() -> None:
    text = MINIMAL + (
        "hosts:\n"
        "  - local\n"
        "  - name: b300-a\n"
        "    address: b300-a\n"  # an ~/.ssh/config alias
        "    port: 2222\n"
        "    user: ubuntu\n"
        "    key_file: ~/.ssh/id_ed25519\n"
        "    access: tunnel\n"
        "    remote_root: /srv/ddtree\n"
        "    python: /usr/bin/python3.11\n"
        "    sudo: true\n"
        "    known_hosts: /tmp/known_hosts\n"
        "shard: true\n"
        "leave_running: true\n"
    )
    spec = parse_spec(text)
    ssh = spec.hosts[1]
    assert isinstance(ssh, SSHHostSpec)
    assert (ssh.address, ssh.port, ssh.user, ssh.access, ssh.sudo) == (
        "b300-a",
        2222,
        "ubuntu",
        "tunnel",
        True,
    )
    assert ssh.accept_new_host_key is False  # strict host keys unless asked
    assert ssh.remote_root == "/srv/ddtree"
    assert spec.shard and spec.leave_running


def test_slurm_host_fields_from_the_slurm_issue() -> None:
    text = MINIMAL + (
        "hosts:\n"
        "  - kind: slurm\n"
        "    name: cluster\n"
        "    address: login1\n"
        "    user: me\n"
        "    access: tunnel\n"
        "    shared_dir: /shared/sweeper/\n"
        "    partition: gpu\n"
        "    account: acct\n"
        "    qos: high\n"
        "    time_limit: '1-02:00:00'\n"
        "    gpus_per_node: 8\n"
        "    constraint: b300\n"
        "    sbatch_args: ['--reservation=bench']\n"
        "    allocations: 4\n"
        "    replace_wait_s: 120\n"
    )
    host = parse_spec(text).hosts[0]
    assert isinstance(host, SlurmHostSpec)
    assert (host.address, host.user, host.access, host.shared_dir) == (
        "login1",
        "me",
        "tunnel",
        "/shared/sweeper",
    )
    assert (host.partition, host.account, host.qos, host.constraint) == (
        "gpu",
        "acct",
        "high",
        "b300",
    )
    assert (host.time_limit, host.gpus_per_node, host.allocations) == ("1-02:00:00", 8, 4)
    assert host.sbatch_args == ["--reservation=bench"]
    assert host.accept_new_host_key is False  # the login host's key is checked strictly
    assert host.queue_wait_s is None and host.replace_wait_s == 120


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800.0),
        ("1:30", 90.0),
        ("2:00:00", 7200.0),
        ("2-0", 172800.0),
        ("2-3:04", 183840.0),
        ("1-02:03:04", 93784.0),
        ("2h", None),
        ("1:2:3:4", None),
    ],
)
def test_slurm_time_limits_read_as_sbatch_reads_them(text: str, seconds: float | None) -> None:
    assert slurm_time_seconds(text) == seconds


def test_relative_remote_root_is_refused() -> None:
    text = MINIMAL + "hosts:\n  - {name: g, address: g, remote_root: opt/x}\n"
    with pytest.raises(SpecError, match="absolute path"):
        parse_spec(text)


def test_shell_metacharacters_stay_plain_values() -> None:
    # Quoting is the host's job; the spec must keep such a value byte for byte.
    text = MINIMAL + "runtime:\n  extra_args: ['--served-model-name', '\"; touch /tmp/pwned #\"']\n"
    spec = parse_spec(text)
    assert spec.runtime.extra_args[1] == '"; touch /tmp/pwned #"'


def test_prompts_file_is_relative_to_the_spec(tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text(
        json.dumps({"id": "p1", "text": "one"})
        + "\n\n"
        + json.dumps({"id": "p2", "messages": [{"role": "user", "content": "two"}]})
        + "\n"
    )
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(
        "name: s\nworkload:\n  prompts: [{id: inline, text: zero}]\n  prompts_file: prompts.jsonl\n"
    )
    spec = load_spec(spec_file)
    assert [p.id for p in spec.workload.prompts] == ["inline", "p1", "p2"]
    assert spec.workload.prompts_file == str(tmp_path / "prompts.jsonl")


def test_bad_line_in_prompts_file_names_that_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text('{"id": "p1", "text": "one"}\n{"id": "p2"}\nnot json\n')
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text("name: s\nworkload:\n  prompts_file: prompts.jsonl\n")
    with pytest.raises(SpecError) as caught:
        load_spec(spec_file)
    where = [(i.file, i.line) for i in caught.value.issues]
    assert where == [(str(tmp_path / "prompts.jsonl"), 2), (str(tmp_path / "prompts.jsonl"), 3)]


def test_duplicate_prompt_id_across_inline_and_file(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"id": "a", "text": "again"}\n')
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(
        "name: s\nworkload:\n  prompts: [{id: a, text: hi}]\n  prompts_file: p.jsonl\n"
    )
    with pytest.raises(SpecError, match="duplicate prompt id 'a'"):
        load_spec(spec_file)


def test_grid_accepts_other_runtime_flags_as_lists() -> None:
    spec = parse_spec(MINIMAL + "grid:\n  tp: [4, 8]\n  attention_backend: [sdpa]\n")
    assert spec.grid.extra_flags() == {"tp": [4, 8], "attention_backend": ["sdpa"]}


def test_extra_runtime_flag_must_be_a_list() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(MINIMAL + "grid:\n  tp: 8\n", source="s.yaml")
    assert str(caught.value) == "s.yaml:5: grid.tp: grid value for 'tp' must be a non-empty list"


def test_secrets_resolve_from_the_controller_environment() -> None:
    spec = parse_spec(
        MINIMAL + "runtime:\n  secrets:\n    HF_TOKEN: ${env:MY_HF}\n    OTHER: PLAIN_VAR\n"
    )
    env = {"MY_HF": "hf_secret", "PLAIN_VAR": "x"}
    assert resolve_secrets(spec.runtime, env) == {"HF_TOKEN": "hf_secret", "OTHER": "x"}
    with pytest.raises(ValueError) as caught:
        resolve_secrets(spec.runtime, {"MY_HF": "hf_secret"})
    assert "PLAIN_VAR" in str(caught.value)
    assert "hf_secret" not in str(caught.value)


def test_unreadable_spec_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(tmp_path / "absent.yaml")


def test_json_schema_forbids_unknown_keys() -> None:
    schema = spec_json_schema()
    assert schema["additionalProperties"] is False
    assert "workload" in schema["required"]
    assert schema["$defs"]["RuntimeSpec"]["additionalProperties"] is False


def test_every_unknown_key_and_bad_value_is_reported_at_once() -> None:
    text = (
        "name: x\n"
        "hosts:\n"
        "  - name: gpu1\n"
        "    adress: gpu1.example\n"
        "runtime: {modle: x, port: 0}\n"
        "grid:\n"
        "  budget: [8, -1]\n"
        "workload:\n"
        "  prompts: [{id: a, txt: hi}]\n"
        "  repeat: 2\n"
    )
    with pytest.raises(SpecError) as caught:
        parse_spec(text, source="s.yaml")
    assert [str(issue) for issue in caught.value.issues] == [
        "s.yaml:3: hosts[0].address: required",
        "s.yaml:4: hosts[0].adress: unknown key 'adress' (did you mean 'address'?)",
        "s.yaml:5: runtime.port: Input should be greater than or equal to 1",
        "s.yaml:5: runtime.modle: unknown key 'modle' (did you mean 'model'?)",
        "s.yaml:7: grid.budget[1]: budget must be an integer >= 0 (tree nodes per verify; 0 is "
        "autoregressive decoding), got -1",
        "s.yaml:9: workload.prompts[0].txt: unknown key 'txt' (did you mean 'text'?)",
        "s.yaml:10: workload.repeat: unknown key 'repeat' (did you mean 'repeats'?)",
    ]
