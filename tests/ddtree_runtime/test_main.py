"""`python -m ddtree_runtime serve` starts torch with passive OpenMP waits unless told otherwise
(why: `ddtree_runtime/__main__.py`), and only once its flags are good: a bad flag is refused
before torch is imported."""

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
    code = main(["serve", *sys.argv[1:]])
except SystemExit as exit:
    code = exit.code
print("exit", code, "policy at torch import:", seen[0] if seen else "none", file=sys.stderr)
sys.exit(code)
"""

# Good flags and a model that does not exist: torch loads (the model loader's), then exit 2.
GOOD_FLAGS_NO_MODEL = ["--model", "/no/such/model", "--budget", "4"]


def serve_through_probe(flags: list[str], env_value: str | None) -> str:
    """The probe's last line: the serve command's exit and the policy torch was imported with."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_value is not None:
        env["OMP_WAIT_POLICY"] = env_value
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *flags], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]  # refused: a bad flag, or no such model
    return done.stderr.strip().splitlines()[-1]


def test_serve_loads_torch_with_passive_waits() -> None:
    assert serve_through_probe(GOOD_FLAGS_NO_MODEL, None).endswith("at torch import: PASSIVE")


def test_a_policy_the_user_set_is_kept() -> None:
    assert serve_through_probe(GOOD_FLAGS_NO_MODEL, "ACTIVE").endswith("at torch import: ACTIVE")


@pytest.mark.parametrize("flags", [["--budget", "-1"], ["--no-such-flag"]])
def test_a_bad_flag_is_refused_before_torch_is_imported(flags: list[str]) -> None:
    assert serve_through_probe(flags, None).endswith("at torch import: none")
