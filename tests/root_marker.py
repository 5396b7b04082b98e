"""The `root` marker, derived in one place (a pytest plugin; tests/conftest.py loads it).

A test that uses a fixture booting disposable SSH + systemd or Slurm test hosts, directly or
through other fixtures, is marked `root` here at collection, before `-m` selects: `pytest -m "not
root"` then runs everything a machine without root can. Tests that need root without those
fixtures (they boot their own hosts, mount a tmpfs, limit a cgroup, use another user's crontab)
carry `@pytest.mark.root` themselves; tests/house/test_root_marker.py checks both. The marker only
selects: where hosts cannot be built the tests still skip with their reason, and under
SWEEPER_CI=1 that skip still fails (tests/ci_rules.py).
"""

from __future__ import annotations

import pytest

#: Session fixtures that boot test hosts: tests/sweeper/testhost_fixture.py, tests/slurm_fixture.py.
ROOT_FIXTURES = frozenset({"testhost_pair", "slurm_cluster"})


def needs_root_fixture(item: pytest.Item) -> bool:
    """True when the item's fixture closure holds a fixture that boots test hosts."""
    return not ROOT_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


# tryfirst: the marker must be on the items before `-m` deselects (the mark plugin's own hook).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if needs_root_fixture(item) and item.get_closest_marker("root") is None:
            item.add_marker(pytest.mark.root)
