"""The exact command and environment each server config would start with, for `sweeper plan`:
built by the engine and the host's backend exactly as a run builds them, with secrets masked
and the per-start launch id shown as a placeholder. Nothing connects or starts."""

from __future__ import annotations

import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sweeper.engines.registry import engine_for
from sweeper.plan import Plan
from sweeper.spec import secret_source
from sweeper.workers.backends import open_backend

LAUNCH_ID = "<launch-id>"
#: What names a Slurm host's jobs in a run, shown as a placeholder.
RUN_ID = "<run-id>"


@dataclass(frozen=True)
class CommandLine:
    """One server config's command on one host."""

    host: str
    label: str
    argv: tuple[str, ...]
    env: dict[str, str]

    @property
    def shell(self) -> str:
        """The argv as one quoted line (how a shell would be given it)."""
        return shlex.join(self.argv)


def masked_secrets(plan: Plan) -> dict[str, str]:
    """Each secret variable of the server -> where its value comes from, never the value."""
    return {
        name: f"<secret from ${secret_source(reference)}>"
        for name, reference in plan.spec.runtime.secrets.items()
    }


def command_lines(plan: Plan) -> list[CommandLine]:
    """Every host's server configs, in run order, as the engine would launch them."""
    spec = plan.spec
    engine = engine_for(spec.runtime)
    if not engine.launched:
        return []
    secrets = masked_secrets(plan)
    out = []
    with tempfile.TemporaryDirectory() as state:
        for host_plan in plan.hosts:
            backend = open_backend(host_plan.host, spec, Path(state), run_id=RUN_ID)
            for step in host_plan.steps:
                launch = engine.launch(
                    step.server_config,
                    python=backend.python,
                    listen_host=backend.listen_host,
                    workdir=backend.workdir,
                    secrets=secrets,
                )
                argv = tuple(LAUNCH_ID if a == launch.launch_id else a for a in launch.argv)
                env = {**backend.service_env, **launch.env, **launch.secret_env}
                out.append(CommandLine(host_plan.name, step.server_config.label, argv, env))
    return out
