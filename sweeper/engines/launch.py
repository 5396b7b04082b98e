"""What an engine hands the services to start one server config: the `Launch`.

Written by an engine (`Engine.launch`), carried out by a service (`sweeper.services`), so it
lives down here with the engines: the services import it, the engines need nothing of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one server config of the runtime.

    `argv` is the full command (python, -m, ddtree_runtime, serve, flags...). `secret_env` values
    never reach logs or results: a systemd service puts them in a 0600 EnvironmentFile.
    `launch_id` is passed as `--launch-id` and echoed by /server_info, so readiness can prove that
    the instance answering is the one just started.
    """

    argv: tuple[str, ...]
    port: int
    launch_id: str
    env: Mapping[str, str] = field(default_factory=dict)
    secret_env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None
    #: An endpoint that is already running (engine openai): the sweeper starts nothing and
    #: reaches it here.
    url: str | None = None
    #: What the started server must report of its config, rendered together with `argv` from
    #: one split of the server config (`sweeper.engines.render`); the engine's proof checks it.
    expected: Mapping[str, Any] = field(default_factory=dict)
