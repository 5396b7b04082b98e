"""The source extractor, and the PR #29907 test data it produced.

The extractor is tested on small sources written here in SGLang's declaration style; the data
file is checked for its provenance and for the DDTREE names that issue 9 relies on. Whether a
preset's flags exist in that build is the sglang engine's test, against this same data.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.engines_oracles import sglang_source_extract as extract

DATA = Path(__file__).parent / "data" / "sglang_pr29907.json"
PR29907_COMMIT = "93e9850e430035f8a363fd881a6a0c5436b95108"

SERVER_ARGS = """
import dataclasses
FOO_CHOICES = ["a", "b"]

@dataclasses.dataclass
class ServerArgs:
    model_path: A[str, Arg(help="Model.", aliases=["--model"])]
    tp_size: A[int, Arg(help="TP.", cli_name="--tp", aliases=["--tensor-parallel-size"])] = 1
    foo: A[Optional[str], Arg(help="Foo.", choices=FOO_CHOICES)] = None
    mode: A[Optional[Literal["x", "y"]], "Mode."] = None
    hidden: A[bool, Arg(no_cli=True)] = False
    flag: A[bool, "A switch."] = False
    sizes: A[Optional[List[int]], "Sizes."] = None
    big: A[int, "Big."] = 10 * 1000
    plain: Optional[int] = None
    speculative_algorithm: A[Optional[str], "Algo. Builtins: EAGLE, DDTREE. Or more."] = None

    def method(self):
        pass
"""
ENVIRON = """
import os
class Envs:
    # a comment
    SGLANG_A = EnvInt(6)
    SGLANG_B = EnvFloat(0.2)  # trailing
    SGLANG_C = EnvBoolWithAlias(
        True, deprecated_name="SGLANG_OLD_C"
    )
    SGLANG_D = EnvStr(os.path.expanduser("~/x"))
    SGLANG_E = EnvInt(2**31)

envs = Envs()
"""


def _by(entries: list[dict], key: str) -> dict[str, dict]:
    return {entry[key]: entry for entry in entries}


def test_flags_are_derived_as_sglang_derives_them() -> None:
    flags, _ = extract.extract_server_args(SERVER_ARGS)
    by_field = _by(flags, "field")
    assert "plain" not in by_field  # no A[...] annotation: no CLI surface
    assert by_field["model_path"]["flags"] == ["--model-path", "--model"]
    assert by_field["model_path"]["default"] == {"expr": "required"}
    assert by_field["tp_size"]["flags"] == ["--tp", "--tensor-parallel-size"]
    assert by_field["foo"]["choices"] == ["a", "b"]
    assert by_field["mode"]["choices"] == ["x", "y"]
    assert by_field["hidden"]["flags"] == []
    assert (by_field["flag"]["kind"], by_field["sizes"]["kind"]) == ("store_true", "list")
    assert by_field["big"]["default"] == 10000
    algorithms = extract.speculative_algorithms(SERVER_ARGS, flags)
    assert algorithms["names"] == ["EAGLE", "DDTREE"]


def test_env_vars_with_defaults_aliases_and_source_hashes() -> None:
    env, declarations = extract.extract_environ(ENVIRON)
    by_name = _by(env, "name")
    assert list(by_name) == ["SGLANG_A", "SGLANG_B", "SGLANG_C", "SGLANG_D", "SGLANG_E"]
    assert (by_name["SGLANG_A"]["type"], by_name["SGLANG_A"]["default"]) == ("EnvInt", 6)
    assert by_name["SGLANG_B"]["default"] == 0.2
    assert by_name["SGLANG_C"]["deprecated_name"] == "SGLANG_OLD_C"
    assert by_name["SGLANG_D"]["default"] == {"expr": "os.path.expanduser('~/x')"}
    assert by_name["SGLANG_E"]["default"] == 2**31
    # An excerpt made of these declaration lines hashes the same as the whole file's.
    _, again = extract.extract_environ(declarations)
    assert again == declarations
    line = "    SGLANG_B = EnvFloat(0.2)  # trailing\n"
    assert by_name["SGLANG_B"]["source_sha256"] == hashlib.sha256(line.encode()).hexdigest()


def test_a_whole_file_of_the_wrong_length_is_refused(tmp_path: Path) -> None:
    """The hash of a 'whole file' must be checkable against the commit: a source shorter or
    longer than the upstream file is a prefix or an excerpt, and must say so."""
    (tmp_path / "s.py").write_text(SERVER_ARGS)
    (tmp_path / "e.py").write_text(ENVIRON)
    argv = ["--repo", "r", "--commit", "c", "--server-args", str(tmp_path / "s.py")]
    argv += ["--environ", str(tmp_path / "e.py"), "--out", str(tmp_path / "out.json")]
    with pytest.raises(ValueError, match="not the whole file"):
        extract.main([*argv, "--file-chars", f"environ={len(ENVIRON) + 1}"])
    extract.main([*argv, "--file-chars", f"environ={len(ENVIRON)}", "--prefix", "server_args=x"])
    sources = json.loads((tmp_path / "out.json").read_text())["provenance"]["sources"]
    assert [s["kind"] for s in sources] == ["prefix", "whole file"]
    assert sources[1]["text_sha256"] == hashlib.sha256(ENVIRON.encode()).hexdigest()


def test_pr29907_data_is_pinned_to_its_commit_and_hashes_its_source_text() -> None:
    data = json.loads(DATA.read_text())
    provenance = data["provenance"]
    assert provenance["repo"] == "sgl-project/sglang" and provenance["commit"] == PR29907_COMMIT
    sources = {source["path"]: source for source in provenance["sources"]}
    assert set(sources) == {"python/sglang/srt/server_args.py", "python/sglang/srt/environ.py"}
    # environ.py whole; server_args.py's first characters (its fields through speculation):
    # both hashes are over upstream text as it stands at the commit, not over a rearrangement.
    environ = sources["python/sglang/srt/environ.py"]
    assert environ["kind"] == "whole file"
    assert environ["text_chars"] == environ["upstream_file_chars"] == 50473
    server_args = sources["python/sglang/srt/server_args.py"]
    assert server_args["kind"] == "prefix" and server_args["upstream_file_chars"] == 325800
    assert server_args["text_chars"] < server_args["upstream_file_chars"]
    for source in sources.values():
        assert len(source["text_sha256"]) == 64 and source["read"]


def test_pr29907_declares_ddtree_flags_and_env() -> None:
    data = json.loads(DATA.read_text())
    assert "DDTREE" in data["speculative_algorithms"]["names"]
    flags = {flag: entry for entry in data["flags"] for flag in entry["flags"]}
    for flag in (
        "--speculative-algorithm",
        "--speculative-ddtree-budget",
        "--speculative-num-draft-tokens",
        "--speculative-dflash-block-size",
        "--attention-backend",
        "--page-size",
    ):
        assert flag in flags, flag
    # The module-level list, read from the same file: the backends this build accepts.
    assert {"triton", "fa3", "flashinfer"} <= set(flags["--attention-backend"]["choices"])
    assert flags["--speculative-ddtree-budget"]["default"] is None
    env = _by(data["env"], "name")
    assert env["SGLANG_DDTREE_MAX_TOPK"]["default"] == 6
    assert env["SGLANG_DDTREE_DEPTH_BONUS"]["default"] == 0.2
    # Not in this build: env vars never reach its /server_info.
    assert "SGLANG_EXPOSE_OWN_ENV_VARS" not in env
