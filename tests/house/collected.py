"""What a planted suite collects under a marker selection, with one of our marker plugins
loaded (the root and slow markers are checked this way, in process)."""

from __future__ import annotations

import pytest


def collected(pytester: pytest.Pytester, plugin: str, selection: str) -> list[str]:
    """The planted tests' names `-m selection` collects with `plugin` (a module path) loaded."""
    result = pytester.runpytest_inprocess(
        "--collect-only", "-q", "-p", "no:asyncio", "-p", plugin, "-m", selection
    )
    return sorted(line.split("::")[1] for line in result.outlines if "::" in line)
