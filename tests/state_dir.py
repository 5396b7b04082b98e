"""The tests' own controller state directory (`SWEEPER_STATE_DIR`): the local host's lease lies
there, so a sweep the developer runs beside `make test` and the suite's runs never see each
other's lease. Set for the whole session before any test (subprocesses inherit it)."""

from __future__ import annotations

import os
import tempfile

import pytest


def pytest_configure(config: pytest.Config) -> None:
    os.environ["SWEEPER_STATE_DIR"] = tempfile.mkdtemp(prefix="sweeper-test-state-")
