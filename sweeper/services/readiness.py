"""Waiting for a freshly started server, then proving it is the instance and config asked for.

Readiness polls the engine's health path every <= 0.25 s (starting faster, capped backoff) until
the deadline, asking the service each time whether the instance died, to fail fast with its log
tail. Identity then needs two proofs, and a failure of either fails the server config's points
with the reason (the runner never measures it):
- from /proc, needing nothing of the engine (`sweeper.services.identity`): the launched process is
  alive and new (not the previous instance), runs the requested argv with the requested
  environment, and it alone holds the listening sockets on the port; after an in-place switch
  it is the SAME process as before the switch (a switch never restarts);
- from the engine (`Engine.prove`): what the server reports of its effective config (the
  runtime's fingerprint, launch id and source hash; SGLang's resolved server args).
An endpoint the sweeper did not start (`engine: openai`) gets only what the engine can prove,
and the identity says what it could not. Then, before it is measured, the engine negotiates
what the build gives (`negotiate`: token ids, acceptance, margins, scoring;
`sweeper.engines.capabilities`), and the identity carries the choice and its evidence to the
manifest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx

from sweeper.config import RequestConfig, ServerConfig
from sweeper.config.features import used
from sweeper.engines.base import Engine, EngineError, RequestSpec
from sweeper.hosts import Host
from sweeper.poll import WaitAborted, WaitTimeout, wait_until
from sweeper.services import Instance, Service
from sweeper.services.identity import Identity, ProbeError, check_process, read_process

POLL_CAP_S = 0.25
POLL_FIRST_S = 0.02


class ReadinessError(RuntimeError):
    """The instance never became ready, died, or is not the one requested."""

    def __init__(self, reason: str, log_tail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.log_tail = log_tail


def wait_healthy(
    service: Service,
    base_url: str,
    deadline_s: float,
    *,
    path: str = "/health",
    log_tail: object = None,
) -> float:
    """Poll `path` until 200; return the seconds waited. Raise on death or deadline."""
    last = "no answer yet"
    tail = log_tail if callable(log_tail) else (lambda: "")

    def died() -> str | None:
        state = service.state()
        if not state.exited:
            return None
        said = f": {state.reason}" if state.reason else ""
        return f"server exited (code {state.exit_code}) before becoming ready{said}"

    with httpx.Client(timeout=httpx.Timeout(2.0, connect=0.5)) as client:

        def healthy() -> bool:
            nonlocal last
            try:
                resp = client.get(f"{base_url}{path}")
            except httpx.HTTPError as exc:
                last = f"{path}: {type(exc).__name__}"
                return False
            last = f"{path} answered {resp.status_code}"
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


def served_model(client: httpx.Client, base_url: str) -> str | None:
    """The model name requests must carry: the first id of /v1/models (None when unreadable)."""
    try:
        data = client.get(f"{base_url}/v1/models", timeout=10.0).json()
        return str(data["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        return None


@dataclass(frozen=True)
class Where:
    """Where the instance runs, for the /proc probe: the host, its Python, whether sudo."""

    host: Host
    python: str
    sudo: bool = False


def prove_identity(
    engine: Engine,
    base_url: str,
    instance: Instance,
    server_config: ServerConfig,
    where: Where,
    previous: Identity | None,
    *,
    switched_from: Identity | None = None,
) -> Identity:
    """Both proofs of the module docstring; ReadinessError with every mismatch found.
    `switched_from`: the instance was switched in place from that proven one, whose process
    it must still be (`instance.launch` is the load's, its `expected` the new config's)."""
    launch = instance.launch
    process = None
    proven: list[str] = []
    unproven: list[str] = []
    if engine.launched:
        if instance.pid is None:
            raise ReadinessError("the service reported no pid for the launched process")
        try:
            process = read_process(
                where.host,
                where.python,
                instance.pid,
                launch.port,
                [*launch.env, *launch.secret_env],
                list(launch.secret_env),
                sudo=where.sudo,
            )
        except ProbeError as exc:
            raise ReadinessError(str(exc)) from None
        problems = check_process(
            process,
            argv=launch.argv,
            env=launch.env,
            secret_env=launch.secret_env,
            port=launch.port,
            previous=previous.process if previous and not switched_from else None,
        )
        before = switched_from.process if switched_from else None
        if before is not None and (before.pid, before.start_ticks) != (
            process.pid,
            process.start_ticks,
        ):
            problems.append(
                f"a switch keeps its process: pid {before.pid} served before it, pid "
                f"{process.pid} (or a new process of that pid) answers now"
            )
        if problems:
            raise ReadinessError("process identity: " + "; ".join(problems))
        proven += [
            f"pid {process.pid} is the process switched in place, runs the loaded argv and "
            "environment"
            if switched_from
            else f"pid {process.pid} is new, runs the requested argv and environment",
            f"only its process tree listens on port {launch.port}",
        ]
    else:
        unproven.append("the process: the sweeper did not start it and cannot see it")
    with httpx.Client(timeout=httpx.Timeout(10.0, connect=2.0)) as client:
        try:
            proof = engine.prove(client, base_url, launch, server_config)
        except EngineError as exc:
            raise ReadinessError(str(exc)) from None
        model = served_model(client, base_url)
    return Identity(
        launch_id=launch.launch_id,
        process=process,
        proof=proof,
        proven=(*proven, *proof.proven),
        unproven=(*unproven, *proof.unproven),
        model=model,
    )


#: Output tokens of a negotiation probe: enough to see ids, acceptance and logprobs.
PROBE_TOKENS = 8


def negotiate(
    engine: Engine,
    base_url: str,
    server_config: ServerConfig,
    identity: Identity,
    probe: RequestSpec,
) -> Identity:
    """The identity with what the engine negotiated with the proven server (one short request
    per path, shaped like `probe`: the workload's first prompt, `sweeper.measure.drive`);
    ReadinessError with the one line naming what it lacks."""
    probe = replace(probe, max_tokens=min(probe.max_tokens, PROBE_TOKENS), repeat=-1)
    with httpx.Client(timeout=httpx.Timeout(10.0, connect=2.0)) as client:
        try:
            caps = engine.negotiate(client, base_url, server_config, probe, identity.model)
        except EngineError as exc:
            raise ReadinessError(str(exc)) from None
        sampling, said = advertised_sampling(client, base_url, identity.proof.info)
        bound = engine.bind(caps)
        version = identity.proof.version
        basis, k, order, scored = bound.negotiate_scoring(
            client, base_url, server_config, probe, identity.model, version
        )
    caps = replace(
        caps,
        sampling=sampling,
        scoring=basis,
        scoring_k=k,
        scoring_order=order,
        evidence=(*caps.evidence, said, scored),
    )
    return replace(identity, capabilities=caps)


def advertised_sampling(
    client: httpx.Client, base_url: str, info: Mapping[str, Any]
) -> tuple[str, str]:
    """`coupled` when the server says so in /server_info (`sampling.coupled: true`; read from
    its proof when the engine fetched it, else asked once), else `independent`; and the
    evidence in words. A server that says nothing is never assumed coupled."""
    if "sampling" not in info:
        try:
            resp = client.get(f"{base_url}/server_info", timeout=10.0)
            found = resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            found = None
        info = found if isinstance(found, Mapping) else {}
    block = info.get("sampling")
    if isinstance(block, Mapping) and block.get("coupled") is True:
        return "coupled", "sampling: coupled (/server_info sampling.coupled)"
    return "independent", "sampling: independent (no coupled sampling advertised)"


def negotiate_features(
    engine: Engine,
    base_url: str,
    server_config: ServerConfig,
    request_configs: Iterable[RequestConfig],
    probe: RequestSpec,
    model: str | None,
    build: str | None,
) -> str | None:
    """Why the proven server drops a request feature its request configs ask, in one line
    naming engine, build and parameter (the engine's probes: `Engine.negotiate_features`), or
    None. Each feature is probed once, with the first value a config asks of it."""
    wanted: dict[str, Any] = {}
    for config in request_configs:
        for feature, value in used(config.feature_values()):
            wanted.setdefault(feature.name, value)
    if not wanted:
        return None
    with httpx.Client(timeout=httpx.Timeout(10.0, connect=2.0)) as client:
        try:
            refused, _ = engine.negotiate_features(
                client, base_url, server_config, probe, wanted, model, build
            )
        except EngineError as exc:
            return f"the request features could not be probed: {exc}"
    return refused
