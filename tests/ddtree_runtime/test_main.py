"""`python -m ddtree_runtime serve` starts torch with passive OpenMP waits unless told otherwise
(why: `ddtree_runtime/__main__.py`)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Each case imports torch in a fresh interpreter (seconds).
pytestmark = pytest.mark.slow

# What the process's OpenMP runtime was loaded with: the policy in the environment at the
# moment torch was first imported (it reads it once, then), through the serve command's path.
PROBE = """
import builtins, os, sys
seen = []
real_import = builtins.__import__
def spy(name, *args, **kwargs):
    if name == "torch" and not seen:
        seen.append(os.environ.get("OMP_WAIT_POLICY"))
    return real_import(name, *args, **kwargs)
builtins.__import__ = spy
from ddtree_runtime.__main__ import main
try:
    main(["serve", "--help"])
except SystemExit:
    pass
print("policy at torch import:", seen[0] if seen else "torch never imported", file=sys.stderr)
"""


def policy_at_torch_import(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_value is not None:
        env["OMP_WAIT_POLICY"] = env_value
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr.strip().splitlines()[-1].removeprefix("policy at torch import: ")


def test_serve_loads_torch_with_passive_waits() -> None:
    assert policy_at_torch_import(None) == "PASSIVE"


def test_a_policy_the_user_set_is_kept() -> None:
    assert policy_at_torch_import("ACTIVE") == "ACTIVE"
