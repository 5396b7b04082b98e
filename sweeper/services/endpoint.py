"""An endpoint that is already running (`engine: openai`) as a `Service`: the sweeper starts,
stops and restarts nothing, and has no log of it. It counts as running; whether it answers is
readiness's question."""

from __future__ import annotations

from sweeper.engines.launch import Launch
from sweeper.services import Instance, ServiceState


class EndpointService:
    """Nothing to manage: see the module docstring."""

    def start(self, launch: Launch) -> Instance:
        return Instance(launch=launch, pid=None)

    def state(self) -> ServiceState:
        return ServiceState(running=True, exited=False, detail="not managed by the sweeper")

    def logs(self, cursor: str | None = None) -> tuple[str, str]:
        return "", cursor or ""

    def stop(self, timeout: float = 15.0) -> None:
        """Never stops a server the sweeper did not start."""
