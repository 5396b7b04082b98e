"""Pytest fixture for the Slurm tests: one real Slurm cluster (controller/login + two compute
test hosts, tests/slurm_cluster.py) per session, torn down at the end.

Registered for the whole suite by `tests/conftest.py`. Tests that use it skip with the reason
from `tests.slurm_cluster.skip_reason()` (not root, Slurm packages missing).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.slurm_cluster import (
    SlurmCluster,
    boot_slurm_cluster,
    shutdown_slurm_cluster,
    skip_reason,
)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A booted Slurm with both compute nodes idle."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = boot_slurm_cluster()
    try:
        yield cluster
    finally:
        shutdown_slurm_cluster(cluster)
