"""`engine: openai` against running endpoints the sweeper did not start (real loopback servers):
it measures and judges, records what identity it could and could not prove, and when the server
gives no token ids it falls back to re-tokenized text, marked approximate in records and
verdicts. Without a baseline its verdicts are n/a and the report says why."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
import yaml

from sweeper.engines.launch import Launch
from sweeper.report.assemble import build_view
from sweeper.results.reader import read_run
from sweeper.services.local_process import ProcessService
from sweeper.services.readiness import wait_healthy
from tests.sweeper.conftest import fake_argv, free_port

pytestmark = pytest.mark.slow


@contextmanager
def endpoint(tmp: Path, name: str, env: dict[str, str]) -> Iterator[str]:
    """A fake server started by hand (as someone else's server would be), with its URL."""
    port = free_port()
    svc = ProcessService(tmp / name)
    svc.start(Launch(argv=fake_argv(port, name), port=port, launch_id=name, env=env))
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(svc, url, 30)
        yield url
    finally:
        svc.stop(5)


def _sweep(tmp: Path, runtime: dict, api: str = "completions") -> tuple[int, Path]:
    spec = {
        "name": "endpoint",
        "runtime": {"engine": "openai", **runtime},
        "grid": {"temperature": [0]},
        "workload": {
            "api": api,
            "prompts": [{"id": f"p{i}", "text": f"prompt {i}"} for i in range(2)],
            "max_tokens": 6,
            "repeats": 2,
            "warmup": 1,
            "seed": 3,
        },
    }
    path = tmp / "endpoint.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    argv = [sys.executable, "-m", "sweeper.cli", "run", str(path), "--results", str(tmp / "r")]
    done = subprocess.run([*argv, "--plain"], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip(), done.stderr[-3000:]
    return done.returncode, Path(done.stdout.strip().splitlines()[-1])


def test_endpoint_without_token_ids_is_judged_on_approximate_ids(tmp_path: Path) -> None:
    plain = {"FAKE_PLAIN": "1", "FAKE_START_DELAY": "0"}
    with endpoint(tmp_path, "spec", plain) as spec_url, endpoint(tmp_path, "ar", plain) as ar_url:
        code, run = _sweep(tmp_path, {"base_url": spec_url, "baseline_url": ar_url})
    assert code == 0
    points = pd.read_parquet(run / "points.parquet").set_index("mode")
    requests = pd.read_parquet(run / "requests.parquet")
    assert (points.status == "ok").all() and points.loc["speculative", "determinism"] == "exact"
    assert set(points.token_ids_source) == {"approximate"}
    assert set(requests.token_ids_source) == {"approximate"}
    # No /tokenize there either: the ids are the text's UTF-8 bytes.
    first = requests.iloc[0]
    assert list(first.token_ids) == list(first.text.encode())
    manifest = json.loads((run / "manifest.json").read_text())
    identity = manifest["identities"]["local/spec"]
    assert identity["proven"] == ["/v1/models serves fake"]
    assert any("did not start it" in u for u in identity["unproven"])
    assert "what software the server is" in identity["unproven"]


def test_a_known_server_gives_engine_ids_and_no_baseline_means_unproven(tmp_path: Path) -> None:
    with endpoint(tmp_path, "spec", {"FAKE_START_DELAY": "0"}) as url:
        code, run = _sweep(tmp_path, {"base_url": url}, api="chat")
    assert code == 6  # nothing proven
    points = pd.read_parquet(run / "points.parquet")
    requests = pd.read_parquet(run / "requests.parquet")
    # Nothing to compare its outputs with: no verdict, and the point says why.
    assert list(points["mode"]) == ["speculative"] and points.determinism.iloc[0] == "unproven"
    assert "no baseline" in points.unproven_reason.iloc[0]
    # It reports a fingerprinted /server_info: ids were asked for and came from the engine.
    assert set(requests.token_ids_source) == {"engine"}
    assert requests.tau.notna().all()
    view = build_view(read_run(run))
    assert any("No AR baseline in this run" in note for note in view.missing)


def test_an_earlier_run_serves_as_the_baseline(tmp_path: Path) -> None:
    with (
        endpoint(tmp_path, "spec", {"FAKE_START_DELAY": "0"}) as s,
        endpoint(tmp_path, "ar", {"FAKE_START_DELAY": "0"}) as a,
    ):
        first_code, first = _sweep(tmp_path, {"base_url": s, "baseline_url": a})
        (tmp_path / "again").mkdir()
        code, run = _sweep(tmp_path / "again", {"base_url": s, "baseline_run": str(first)})
    assert first_code == 0 and code == 0
    points = pd.read_parquet(run / "points.parquet")
    assert list(points["mode"]) == ["speculative"] and points.determinism.iloc[0] == "exact"
