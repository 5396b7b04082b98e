"""`sweeper bisect` over SSH + systemd: every step's tree is shipped to the test host as the
run's runtime bundle, started there as a systemd unit and proven by its source hash; the
history is the fake runtime's shim package (a test host starts it in a second).

Root only (test hosts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sweeper.bisecting.bisect_helpers import bisect_spec, run_bisect, state_of
from tests.sweeper.bisecting.histories import runtime_history
from tests.sweeper.testhost_fixture import hosts_yaml
from tests.testhosts import TestHost

pytestmark = pytest.mark.slow


def test_bisect_over_ssh_and_systemd(
    testhost_pair: list[TestHost], session_known_hosts: str, tmp_path: Path
) -> None:
    host = testhost_pair[0]
    shas = runtime_history(tmp_path / "repo", 4, events={3: "fault"}, fake=True)
    hosts = hosts_yaml([host], session_known_hosts, access="tunnel")
    spec = bisect_spec(tmp_path, 18350, tmp_path / "repo", fake=True, hosts=hosts)
    code, directory, stderr = run_bisect(spec, shas[0], shas[-1], tmp_path / "results")
    assert code == 0, stderr[-3000:]
    state = state_of(directory)
    assert state.answer is not None and state.answer.culprits == [shas[3]]
    assert state.points == [f"{host.name}-b8-k4-bs4-cg0-t0-c1"]
    assert len(state.steps) <= 2 + 2  # both ends + ceil(log2 4)
    for step in state.steps:
        manifest = json.loads((Path(step.runs[0]) / "manifest.json").read_text())
        facts = manifest["hosts"][host.name]
        # the step's own tree ran on the host, proven by the hash the server reported
        assert facts["reported_source_hash"] == manifest["runtime_source_hash"]
        assert manifest["spec"]["runtime"]["package"].endswith(f"{step.sha[:12]}/tree")
    hashes = {
        json.loads((Path(s.runs[0]) / "manifest.json").read_text())["runtime_source_hash"]
        for s in state.steps
    }
    assert len(hashes) == len(state.steps)  # every commit a different source, each deployed
