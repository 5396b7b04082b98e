"""Waiting for a freshly started runtime, then proving it is the instance and config we asked for.

Readiness polls /health every <= 0.25 s (starting faster, capped backoff) until the deadline and
asks the service each time whether the instance died, to fail fast with its log tail. Identity
then checks /server_info: the launch id is the one just launched, the fingerprint is the sha256
of its canonical inputs, the fingerprinted config equals the requested server params, and the
pid / start time differ from the previous instance. Any mismatch raises `ReadinessError`; the
runner records a failed point and never measures that server. For `engine: sglang`, which has no
launch id or fingerprint, SGLang's /get_server_info must report every requested flag instead.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from sweeper.poll import WaitAborted, WaitTimeout, wait_until
from sweeper.services import Service

POLL_CAP_S = 0.25
POLL_FIRST_S = 0.02


class ReadinessError(RuntimeError):
    """The instance never became ready, died, or is not the one requested."""

    def __init__(self, reason: str, log_tail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.log_tail = log_tail


@dataclass(frozen=True)
class Identity:
    """Who answered: the facts from /server_info that tie measurements to one instance."""

    launch_id: str
    fingerprint: str
    pid: int | None
    start_time: float | None
    source_hash: str | None
    runtime_version: str | None
    info: Mapping[str, Any] = field(default_factory=dict)


def fingerprint_of(inputs: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of `fingerprint_inputs` (README's contract)."""
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def wait_healthy(
    service: Service,
    base_url: str,
    deadline_s: float,
    *,
    log_tail: Any = None,
) -> float:
    """Poll /health until 200; return the seconds waited. Raise on death or deadline."""
    last = "no answer yet"
    tail = log_tail or (lambda: "")

    def died() -> str | None:
        state = service.state()
        return (
            f"runtime exited (code {state.exit_code}) before becoming ready"
            if state.exited
            else None
        )

    with httpx.Client(timeout=httpx.Timeout(2.0, connect=0.5)) as client:

        def healthy() -> bool:
            nonlocal last
            try:
                resp = client.get(f"{base_url}/health")
            except httpx.HTTPError as exc:
                last = f"/health: {type(exc).__name__}"
                return False
            last = f"/health answered {resp.status_code}"
            return resp.status_code == 200

        try:
            return wait_until(
                healthy,
                timeout_s=deadline_s,
                interval_s=POLL_FIRST_S,
                max_interval_s=POLL_CAP_S,
                died=died,
            ).seconds
        except WaitAborted as exc:
            raise ReadinessError(str(exc), tail()) from None
        except WaitTimeout:
            raise ReadinessError(f"not ready after {deadline_s:.0f} s ({last})", tail()) from None


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("true", "on", "1", "yes")


def _same(want: Any, got: Any) -> bool:
    if want == got:
        return True
    if isinstance(want, bool) or isinstance(got, bool):
        return _truthy(want) == _truthy(got)
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(want, got)
    return str(want) == str(got)


def check_identity(
    info: Mapping[str, Any],
    *,
    launch_id: str,
    expected: Mapping[str, Any],
    previous: Identity | None,
) -> Identity:
    """Compare /server_info against what was launched; raise ReadinessError on any mismatch."""
    got_launch = info.get("launch_id")
    if got_launch != launch_id:
        raise ReadinessError(
            f"launch id mismatch: server reports {got_launch!r}, expected {launch_id!r} "
            "(another instance is answering on this port)"
        )
    inputs = info.get("fingerprint_inputs")
    if not isinstance(inputs, Mapping):
        raise ReadinessError("/server_info has no fingerprint_inputs")
    reported = info.get("fingerprint")
    if reported != fingerprint_of(inputs):
        raise ReadinessError(
            f"fingerprint mismatch: server reports {reported!r} but its inputs hash to "
            f"{fingerprint_of(inputs)!r}"
        )
    fp_config = inputs.get("config") or {}
    full_config = info.get("config") or {}
    wrong = []
    for key, want in expected.items():
        if key in fp_config:
            got = fp_config[key]
        elif key in full_config:
            got = full_config[key]
        else:
            wrong.append(f"{key}: requested {want!r}, server does not report it")
            continue
        if not _same(want, got):
            wrong.append(f"{key}: requested {want!r}, server runs {got!r}")
    if wrong:
        raise ReadinessError("config mismatch: " + "; ".join(wrong))
    identity = Identity(
        launch_id=launch_id,
        fingerprint=str(reported),
        pid=info.get("pid"),
        start_time=info.get("start_time"),
        source_hash=info.get("source_hash"),
        runtime_version=info.get("runtime_version"),
        info=dict(info),
    )
    if previous is not None and (
        identity.pid == previous.pid and identity.start_time == previous.start_time
    ):
        raise ReadinessError(
            f"the previous instance (pid {previous.pid}) is still answering; not a new instance"
        )
    return identity


def check_sglang_identity(
    info: Mapping[str, Any], *, launch_id: str, expected: Mapping[str, Any]
) -> Identity:
    """SGLang has no launch id or fingerprint: its server args must match the requested flags.

    That the answering process is the new one rests on the service's own proof (systemd: a new
    InvocationID with the old MainPID gone before the start; a local process: the old process
    group gone and the port free before the start), so no stale SGLang can hold the port.
    """
    wrong = []
    for key, want in expected.items():
        if key not in info:
            if want is None:
                continue
            wrong.append(f"{key}: requested {want!r}, server does not report it")
        elif not (want is None and info[key] is None) and not _same(want, info[key]):
            wrong.append(f"{key}: requested {want!r}, server runs {info[key]!r}")
    if wrong:
        raise ReadinessError("config mismatch: " + "; ".join(wrong))
    reported = {key: info.get(key) for key in sorted(expected)}
    return Identity(
        launch_id=launch_id,
        fingerprint=fingerprint_of({"engine": "sglang", "server_args": reported}),
        pid=None,
        start_time=None,
        source_hash=None,
        runtime_version=str(info.get("version")) if info.get("version") else None,
        info={"engine": "sglang", "server_args": dict(info)},
    )


def fetch_server_info(base_url: str, path: str = "/server_info") -> dict[str, Any]:
    try:
        resp = httpx.get(f"{base_url}{path}", timeout=5.0)
        resp.raise_for_status()
        data = resp.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ReadinessError(f"/server_info unreadable: {exc}") from exc
    if not isinstance(data, dict):
        raise ReadinessError("/server_info is not a JSON object")
    return data


def wait_ready(
    service: Service,
    base_url: str,
    *,
    launch_id: str,
    expected: Mapping[str, Any],
    deadline_s: float,
    previous: Identity | None = None,
    log_tail: Any = None,
    engine: str = "ddtree_runtime",
) -> tuple[Identity, float]:
    """Wait for health, then prove identity. Returns (identity, seconds to ready)."""
    waited = wait_healthy(service, base_url, deadline_s, log_tail=log_tail)
    try:
        if engine == "sglang":
            info = fetch_server_info(base_url, "/get_server_info")
            identity = check_sglang_identity(info, launch_id=launch_id, expected=expected)
        else:
            info = fetch_server_info(base_url)
            identity = check_identity(
                info, launch_id=launch_id, expected=expected, previous=previous
            )
    except ReadinessError as exc:
        exc.log_tail = (log_tail or (lambda: ""))()
        raise
    return identity, waited
