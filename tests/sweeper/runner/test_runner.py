"""The runner against real loopback servers (the fake runtime): every point recorded, failures
recorded with reasons and the sweep going on, and a wrong instance never measured."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from sweeper.engines.registry import engine_for
from sweeper.hosts.local import LocalHost
from sweeper.plan import build_plan
from sweeper.progress import PlainProgress
from sweeper.results.store import RunStore
from sweeper.runner import Runner
from sweeper.services.local_process import ProcessService, port_in_use, wait_port_free
from sweeper.services.runtime_package import runtime_source_hash
from sweeper.spec import load_spec
from sweeper.workers.backends import Backend
from tests.sweeper.conftest import fake_argv
from tests.sweeper.sweep_fixtures import fake_runtime_env, write_spec

pytestmark = pytest.mark.slow

SOURCE_HASH = runtime_source_hash()

POINT_COLUMNS = [
    "host",
    "point_id",
    "engine",
    "budget",
    "topk",
    "block_size",
    "cuda_graph",
    "temperature",
    "concurrency",
    "status",
    "output_tok_s",
    "speedup",
    "tau",
    "ttft_p50",
    "itl_p50",
    "e2e_p50",
    "determinism",
    "reason",
    "log_tail",
]
REQUEST_COLUMNS = [
    "host",
    "point_id",
    "prompt_id",
    "repeat",
    "temperature",
    "ttft",
    "e2e",
    "output_tokens",
    "tau",
    "sha256",
    "text",
    "finish_reason",
    "token_ids",
    "itls",
    "top2_margins",
    "verdict",
    "divergence_index",
]


def _run(tmp: Path, port: int, env: dict[str, str], port_wait_s: float = 10.0, **kw):
    spec = load_spec(write_spec(tmp, port, fake_env=fake_runtime_env(tmp, env), **kw))
    plan = build_plan(spec)
    fields = {"sweep": spec.name, "sweeper_version": "t", "spec": {}}
    store = RunStore.create(tmp / "results", {**fields, "runtime_source_hash": SOURCE_HASH})
    backend = Backend(
        host=LocalHost(),
        service=ProcessService(store.dir / "service", port_wait_s=port_wait_s),
        python=sys.executable,
    )
    engine = engine_for(spec.runtime, SOURCE_HASH)
    code = Runner(spec, plan, store, {"local": backend}, PlainProgress(), engine).run()
    points = pd.read_parquet(store.dir / "points.parquet").set_index("point_id")
    requests = pd.read_parquet(store.dir / "requests.parquet")
    return code, store, points, requests


def test_sweep_measures_every_point(tmp_path: Path, port: int) -> None:
    # 5 ms between tokens: a fake streaming as fast as the CPU allows keeps the client's one
    # process busy most of a point (82-98% of a core measured), and the client's self-check
    # then rightly calls the point client-bound, which withholds its speedup.
    env = {"FAKE_START_DELAY": "0.3", "FAKE_TOKEN_DELAY": "0.005"}
    code, store, points, requests = _run(tmp_path, port, env)
    assert code == 0
    assert list(points["mode"]) == ["ar", "speculative", "speculative"]  # baseline first
    assert set(points.engine) == {"ddtree_runtime"}
    assert set(POINT_COLUMNS) <= set(points.reset_index().columns)
    assert set(REQUEST_COLUMNS) <= set(requests.columns)
    assert (points.status == "ok").all()
    # The baseline has nothing to compare with (its repeats agree); the others match it.
    assert list(points.determinism) == ["n/a", "exact", "exact"]
    assert (points.n_requests == 4).all() and len(requests) == 12
    assert points.speedup.iloc[1:].notna().all() and points.output_tok_s.gt(0).all()
    assert not points.client_bound.any() and (points.client_processes == 1).all()
    assert list(requests.verdict) == ["n/a"] * 4 + ["exact"] * 8
    csv = pd.read_csv(store.dir / "points.csv")
    assert list(csv.point_id) == list(points.index)
    m = store.manifest
    assert (m.status, m.points_done, m.points_ok, m.exit_code) == ("complete", 3, 3, 0)
    assert m.hosts["local"].runtime_version == "0.0.0-fake"
    assert m.hosts["local"].system["cpus"].isdigit() and "Linux" in m.hosts["local"].system["uname"]
    for pid in points.index:
        assert (store.dir / "logs" / f"{pid}.log").exists()
    assert not port_in_use(port)  # stopped at the end


def test_failed_start_is_recorded_and_sweep_goes_on(tmp_path: Path, port: int) -> None:
    env = {"FAKE_CRASH": "9", "FAKE_WHEN": "topk=4"}
    code, _store, points, requests = _run(tmp_path, port, env)
    assert code == 3
    bad = points[points.topk == 4].iloc[0]
    assert bad.status == "failed" and "exited (code 9)" in bad.reason
    assert "injected start failure" in bad.log_tail
    assert (points[points.topk != 4].status == "ok").all()
    assert set(requests.point_id) == set(points[points.status == "ok"].index)


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"FAKE_BAD_FINGERPRINT": "1"}, "fingerprint mismatch"),
        ({"FAKE_LAUNCH_ID": "an-older-launch"}, "launch id mismatch"),
        ({"FAKE_CONFIG_OVERRIDE": '{"budget": 16}'}, "budget: requested 8, server runs 16"),
        ({"FAKE_WRONG_SOURCE_HASH": "0" * 64}, "source hash mismatch"),
        # The launched process replaced itself: same pid, another cmdline or environment.
        ({"FAKE_REEXEC": "argv"}, "process identity: cmdline differs"),
        ({"FAKE_REEXEC": "env", "NOTE": "kept"}, "environment NOTE: requested 'kept', it is unset"),
    ],
)
def test_wrong_instance_is_never_measured(
    tmp_path: Path, port: int, env: dict[str, str], reason: str
) -> None:
    code, _store, points, requests = _run(tmp_path, port, {**env, "FAKE_WHEN": "topk=4"})
    assert code == 3
    bad = points[points.topk == 4].iloc[0]
    assert bad.status == "failed" and reason in bad.reason
    assert bad.name not in set(requests.point_id)  # not one request sent to it was recorded
    assert bad.n_requests == 0


def test_lingering_instance_on_the_port_is_never_measured(tmp_path: Path, port: int) -> None:
    lingering = subprocess.Popen(
        fake_argv(port, "lingering", "--budget", "8"),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = 50
        while not port_in_use(port) and deadline:
            time.sleep(0.1)
            deadline -= 1
        code, _store, points, requests = _run(tmp_path, port, {}, port_wait_s=0.5)
    finally:
        lingering.terminate()
        lingering.wait(10)
    assert code == 3
    assert (points.status == "failed").all()
    assert points.reason.str.contains(f"port {port} is still in use").all()
    assert len(requests) == 0
    assert wait_port_free(port, 5)


def test_request_configs_share_one_restart(tmp_path: Path, port: int) -> None:
    code, store, points, _ = _run(tmp_path, port, {}, temperature=(0.0, 0.7), topk=(1, 2))
    assert code == 0 and len(points) == 6
    assert sorted(points.temperature) == [0.0] * 3 + [0.7] * 3
    # AR + two ddtree configs: the plan switches both in place, but the fake runtime has no
    # switch route, so each refused switch falls back to a load, its reason in the manifest
    # (and, every config loaded, no winner needs confirming on a fresh process).
    assert store.manifest.timings["local.loads"] == 3
    assert "local.switches" not in store.manifest.timings
    ar, *ddtree = store.manifest.identities.values()
    assert (ar.served_by, ar.switch_refused) == ("load", None)
    for identity, label in zip(ddtree, ("b8-k1", "b8-k2"), strict=True):
        assert identity.served_by == "load"
        assert f"refuses to switch to {label}" in str(identity.switch_refused)
    # Each load's instance got its own launch: three fingerprints, two points each.
    assert points.fingerprint.nunique() == 3
    # Each start recorded where it went: the fake reports no phase, so ready is the health
    # poll's, within the start.
    loads = store.manifest.loads
    assert [load.index for load in loads] == [0, 1, 2]
    assert len({load.launch_id for load in loads}) == 3
    for load in loads:
        (ready,) = load.phases
        assert (ready.name, ready.source, ready.at_s) == ("ready", "health", load.ready_s)


def test_a_lingering_instance_sharing_the_port_through_so_reuseport_is_never_measured(
    tmp_path: Path, port: int
) -> None:
    """Both bind with SO_REUSEPORT, so the runtime starts beside the stranger and /health
    answers: only the /proc proof sees that the kernel would split connections."""
    stranger: list[subprocess.Popen] = []

    def start_stranger() -> None:
        # Once our (slow-loading) instance holds the port, a second listener joins it.
        deadline = time.monotonic() + 30
        while not port_in_use(port) and time.monotonic() < deadline:
            time.sleep(0.02)
        stranger.append(subprocess.Popen([sys.executable, "-c", REUSEPORT_SERVER, str(port)]))

    helper = threading.Thread(target=start_stranger)
    helper.start()
    try:
        env = {"FAKE_REUSEPORT": "1", "FAKE_START_DELAY": "2"}
        code, _store, points, requests = _run(tmp_path, port, env, port_wait_s=1, topk=(1,))
    finally:
        helper.join()
        for proc in stranger:
            proc.kill()
            proc.wait()
    assert code == 3 and len(requests) == 0  # nothing was measured
    first = points.iloc[0]
    assert first.status == "failed"
    assert f"port {port} is also held by pid {stranger[0].pid}" in first.reason
    assert "SO_REUSEPORT" in first.reason


REUSEPORT_SERVER = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
time.sleep(120)
"""


def test_a_feature_the_reported_build_would_drop_is_never_sent(tmp_path: Path, port: int) -> None:
    """The fake runtime reports build 0.0.0-fake, older than the runtime's logit_bias: every
    config is started and proven, then refused before any request, in one line."""
    env = {"FAKE_START_DELAY": "0.1"}
    code, _store, points, requests = _run(
        tmp_path, port, env, topk=(1,), extra_workload={"logit_bias": {13: -100}}
    )
    assert code == 3
    assert (points.status == "failed").all() and len(points) == 2
    assert set(points.reason) == {
        "ddtree_runtime 0.0.0-fake: logit_bias is honoured only since 0.2.0"
    }
    assert requests.empty
