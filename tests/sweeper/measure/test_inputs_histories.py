"""`Inputs.resolve` and the AR baseline: a later turn's history is asked only of an AR server, so
a speculative server (`ar=False`) that finds it unresolved is refused before anything is sent;
once an AR server answered (this run's inputs.json, or an earlier run's), any server reads it.
Synthetic prompts need only the served tokenizer, whatever the server. Against the fake runtime
(a real loopback server speaking the runtime's contract: /tokenize, chat streams)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweeper.engines.base import Engine
from sweeper.engines.registry import engine_for
from sweeper.measure.inputs import INPUTS_FILE, Inputs, InputsError
from sweeper.spec import RuntimeSpec, WorkloadSpec, parse_spec
from tests.sweeper.conftest import fake_argv, free_port, serving

HISTORIES = (
    "workload:\n"
    "  seed: 3\n"
    "  max_tokens: 4\n"
    "  prompts:\n"
    "    - {id: one, text: hello there}\n"
    "    - id: two\n"
    "      messages:\n"
    "        - {role: user, content: hello there}\n"
    "        - {role: assistant, content: ''}\n"
    "        - {role: user, content: go on}\n"
    "      answers_from: [one]\n"
)
SYNTHETIC = (
    "workload:\n"
    "  api: completions\n"
    "  seed: 3\n"
    "  prompts: [{id: s16, tokens: 16}, {id: s40, tokens: 40}, {id: plain, text: hi}]\n"
)


def workload_of(text: str) -> WorkloadSpec:
    return parse_spec("name: t\n" + text).workload


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = free_port()
    with serving(fake_argv(port, "inputs", "--model", "m"), port) as url:
        yield url


@pytest.fixture(scope="module")
def engine() -> Engine:
    return engine_for(RuntimeSpec(model="m"))


def closed_url() -> str:
    """A loopback URL nothing listens on: a request there could only fail."""
    return f"http://127.0.0.1:{free_port()}"


def test_histories_are_never_asked_of_a_speculative_server(
    server: str, engine: Engine, tmp_path: Path
) -> None:
    inputs = Inputs(workload_of(HISTORIES), tmp_path, engine)
    assert inputs.needed and inputs.histories
    with pytest.raises(InputsError, match="AR baseline") as caught:
        inputs.resolve(server, "m", ar=False)
    assert "speculative server" in str(caught.value)
    assert not (tmp_path / INPUTS_FILE).exists()
    # Refused again, not half-resolved: nothing was kept.
    with pytest.raises(InputsError, match="AR baseline"):
        inputs.resolve(closed_url(), "m", ar=False)


def test_an_ar_servers_answers_serve_every_server_after(
    server: str, engine: Engine, tmp_path: Path
) -> None:
    workload = workload_of(HISTORIES)
    resolved = Inputs(workload, tmp_path, engine).resolve(server, "m")  # ar=True: the default
    messages = resolved["two"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    answer = messages[1]["content"]
    assert answer  # the AR server's greedy answer to turn one
    assert (messages[0]["content"], messages[2]["content"]) == ("hello there", "go on")
    written = json.loads((tmp_path / INPUTS_FILE).read_text())
    assert written["answers"] == {"one": answer}
    assert written["asked_of"] == server
    # A speculative server of this run (a resumed run, another host) reads the file: nothing
    # is asked, so a URL nothing listens on does.
    again = Inputs(workload, tmp_path, engine).resolve(closed_url(), "m", ar=False)
    assert again == resolved


def test_an_earlier_runs_histories_serve_a_speculative_server(
    server: str, engine: Engine, tmp_path: Path
) -> None:
    workload = workload_of(HISTORIES)
    earlier, run = tmp_path / "earlier", tmp_path / "run"
    earlier.mkdir()
    run.mkdir()
    resolved = Inputs(workload, earlier, engine).resolve(server, "m", ar=True)
    reused = Inputs(workload, run, engine, earlier=earlier).resolve(closed_url(), "m", ar=False)
    assert reused == resolved


def test_synthetic_prompts_resolve_on_any_server(
    server: str, engine: Engine, tmp_path: Path
) -> None:
    workload = workload_of(SYNTHETIC)
    (tmp_path / "spec").mkdir()
    (tmp_path / "ar").mkdir()
    inputs = Inputs(workload, tmp_path / "spec", engine)
    assert inputs.needed and not inputs.histories
    resolved = inputs.resolve(server, "m", ar=False)
    assert set(resolved) == {"s16", "s40"}
    assert [len(resolved[p]["token_ids"]) for p in ("s16", "s40")] == [16, 40]
    # The same ids from an AR server: the inputs do not depend on which server tokenized.
    assert Inputs(workload, tmp_path / "ar", engine).resolve(server, "m", ar=True) == resolved


def test_synthetic_prompts_still_need_the_tokenizer(engine: Engine, tmp_path: Path) -> None:
    inputs = Inputs(workload_of(SYNTHETIC), tmp_path, engine)
    with pytest.raises(InputsError, match="served tokenizer"):
        inputs.resolve(closed_url(), "m", ar=False)


def test_text_prompts_need_nothing(engine: Engine, tmp_path: Path) -> None:
    workload = workload_of("workload:\n  prompts: [{id: a, text: hi}]\n")
    assert Inputs(workload, tmp_path, engine).resolve(closed_url(), "m", ar=False) == {}
    assert not (tmp_path / INPUTS_FILE).exists()
