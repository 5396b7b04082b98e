"""The command line's own parsing: options whose value may be left out."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sweeper.cli import with_optional_values


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "s.yaml", "--wait-for-hosts"], ["run", "s.yaml", "--wait-for-hosts", "inf"]),
        (["run", "--wait-for-hosts", "s.yaml"], ["run", "--wait-for-hosts", "inf", "s.yaml"]),
        (
            ["run", "s.yaml", "--wait-for-hosts", "--plain"],
            ["run", "s.yaml", "--wait-for-hosts", "inf", "--plain"],
        ),
        (["run", "s.yaml", "--wait-for-hosts", "90"], ["run", "s.yaml", "--wait-for-hosts", "90"]),
        (["run", "--", "--wait-for-hosts"], ["run", "--", "--wait-for-hosts"]),
    ],
)
def test_a_value_less_wait_for_hosts_waits_as_long_as_it_takes(
    argv: list[str], expected: list[str]
) -> None:
    assert with_optional_values(argv) == expected


def test_a_negative_wait_is_a_usage_error() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sweeper.cli", "run", "sweeps/local.yaml", "--wait-for-hosts", "-5"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == "error: --wait-for-hosts takes a number of seconds >= 0"
