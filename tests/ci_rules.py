"""CI's rule that no test may skip, as a pytest plugin (tests/conftest.py loads it).

Under `SWEEPER_CI=1` (`.ci/run` sets it) every skip, whether a test's own `pytest.skip`, a
`skipif` mark or a module skipped at collection, is reported as a failure with the skip's reason:
in CI a skipped test is a check that did not run, and a set-up step that silently failed to install
sshd once turned 52 tests into skips that CI counted as green. Outside CI skips stay skips, with
their reasons, for developers without root or without the optional venvs. An expected failure
(`xfail`) is not a skip and is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest
from pluggy import Result

#: The variable `.ci/run` sets; one name, read here only.
CI_VARIABLE = "SWEEPER_CI"


def skips_fail() -> bool:
    """True when a skip must fail the run (CI)."""
    return os.environ.get(CI_VARIABLE) == "1"


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        path, line, reason = longrepr
        return f"{reason} ({path}:{line})"
    return str(longrepr)


def _fail_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    report.longrepr = f"{CI_VARIABLE}=1: a skip is a failure in CI: {_skip_reason(report)}"
    report.outcome = "failed"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Result[pytest.TestReport], None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if skips_fail() and report.skipped and not hasattr(report, "wasxfail"):
        _fail_skip(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, Result[pytest.CollectReport], None]:
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()
    if skips_fail() and report.skipped:
        _fail_skip(report)
