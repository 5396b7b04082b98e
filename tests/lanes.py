"""How the suite shares the machine's cores (a pytest plugin; tests/conftest.py loads it).

`make test` runs the suite in two lanes: the parallel lane on three pytest-xdist workers
(`-n 3 --dist loadgroup -m "not quiet"`: two cores, but many units mostly wait on servers, test
hosts or the Slurm cluster), then the quiet lane alone (`-m quiet`, on the quiet tests the
parallel lane collected: `QUIET_IDS_OPTION`).

- A **work unit** is what one worker runs from start to end: by default a test file, so a
  module-scoped fixture (a server, a loaded model, a run directory built once) is paid once per
  run. Session fixtures are paid once per worker that needs them: the two SSH + systemd test hosts
  (`testhost_pair`, ~2 s to boot) on each worker; tests on the Slurm cluster all go to one worker
  (group `slurm`, set here from the fixture), so the cluster is booted once per run.
- **A new test that shares something expensive with tests in other files** (a session fixture
  that takes long to build, a fixed path or port) names it: `@pytest.mark.xdist_group("NAME")`
  (or `pytestmark = pytest.mark.xdist_group("NAME")` for a module); every test of that group then
  runs on one worker, in one unit. A fixture that needs this for every test using it goes into
  `GROUP_FIXTURES` below instead. A long test that shares nothing with the rest of its file
  (a sweep beside a hand-started server) may take a group of its own, to run beside them.
  Ports come from `free_port()` (the kernel's), results from `tmp_path`, test hosts from free
  subnets: these never collide between workers; a file the tests share in the clone is written
  under a lock (tests/exported_model.py).
- **A timing-sensitive test** (it reads this machine's load, or asserts how late, how fast or how
  evenly something happened) is marked `@pytest.mark.quiet`: it runs in the quiet lane, after the
  parallel lane, with nothing of the suite beside it.

`make test-quick` runs the parallel lane without the slow and root tests (the edit-test loop).
- **A test that costs seconds** (it loads the real model, starts a real server, or runs sweeps or
  a corpus of commands through the CLI as processes) is `slow`. Where a fixture starts the
  expensive thing, the fixture says so, `@slow_fixture` under its `@pytest.fixture`, and every
  test using it, directly or through other fixtures, is marked `slow` here at collection; a test
  that starts it without such a fixture carries `@pytest.mark.slow` itself (or its module's
  `pytestmark`). A grid of parameters whose every cell costs seconds (`grid`) keeps one
  representative cell in the loop and marks the others `slow`.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.root_marker import needs_root_fixture

#: The option by which `make test`'s parallel lane names a file for the ids of the quiet tests
#: it collected (before `-m "not quiet"` leaves them out); the quiet lane then runs exactly those
#: (`pytest @FILE`), importing only their files instead of collecting the whole suite again
#: (~15 s of one core). An option, not the environment: a pytest that a test runs on planted
#: files inherits the environment, and must not write its own ids there.
QUIET_IDS_OPTION = "--quiet-ids"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        QUIET_IDS_OPTION,
        metavar="FILE",
        help="write the ids of the collected quiet tests to FILE (make test's quiet lane)",
    )


#: Session fixtures one worker owns, so they are built once per run: fixture -> xdist group.
GROUP_FIXTURES = {"slurm_cluster": "slurm"}

#: The attribute `slow_fixture` sets on a fixture's function.
SLOW_ATTRIBUTE = "_starts_something_slow"

F = TypeVar("F", bound=Callable[..., Any])


def slow_fixture(function: F) -> F:
    """Declares that this fixture starts something that takes seconds (a real model, a server, a
    sweep through the CLI): the tests that use it are `slow`, left out of `make test-quick`.
    Goes under `@pytest.fixture`, on the function itself."""
    if hasattr(function, "_fixture_function_marker"):
        raise TypeError(f"@slow_fixture goes under @pytest.fixture: {function!r}")
    setattr(function, SLOW_ATTRIBUTE, True)
    return function


def grid(quick: tuple[Any, ...], *axes: Iterable[Any]) -> list[Any]:
    """Every cell of a grid (the product of `axes`, in `parametrize`'s argument order) as
    parameters, each but `quick` marked `slow`: where every cell costs seconds, the edit-test loop
    runs one representative cell and CI the whole grid."""
    cells = list(itertools.product(*axes))
    if quick not in cells:
        raise ValueError(f"{quick} is no cell of the grid")
    slow = [pytest.mark.slow]
    return [pytest.param(*cell, marks=[] if cell == quick else slow) for cell in cells]


def uses_slow_fixture(item: pytest.Item) -> bool:
    """True when a fixture in the item's closure was declared with `slow_fixture`."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        getattr(fixturedef.func, SLOW_ATTRIBUTE, False)
        for fixturedefs in info.name2fixturedefs.values()
        for fixturedef in fixturedefs
    )


def _heavy(item: pytest.Item) -> bool:
    """Loads the real model, runs a real server or builds test hosts (tests/root_marker.py)."""
    return any(item.get_closest_marker(m) for m in ("slow", "root")) or needs_root_fixture(item)


# A wrapper: its first half runs before every other plugin's hook, so the slow and group marks
# are on the items before `-m` deselects (the mark plugin's hook) and before xdist's own hook
# turns the groups into test-id suffixes on a worker; its second half runs after both.
@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Iterator[None]:
    """`slow` from the fixtures (slow_fixture); groups: a fixture's (GROUP_FIXTURES), else the
    file of a heavy test, so that the scheduler, which sees only test ids, can start the heavy
    units first. Then, on an xdist worker under loadgroup, every grouped test's id must carry its
    `@NAME` suffix, the only way xdist tells the scheduler about groups: pytest 9.2 ignores the
    field xdist 3.8 writes it to (pytest-xdist#1386), and then every group is silently dropped
    (the Slurm cluster's files may land on several workers, each booting one; heavy units go out
    last), so that stops the run."""
    for item in items:
        if item.get_closest_marker("slow") is None and uses_slow_fixture(item):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("xdist_group") is not None:
            continue
        names = getattr(item, "fixturenames", ())
        group = next((g for fixture, g in GROUP_FIXTURES.items() if fixture in names), None)
        if group is None and _heavy(item):
            group = item.nodeid.split("::", 1)[0]
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    record_quiet_ids(items, config.getoption(QUIET_IDS_OPTION))
    yield
    if not config.getoption("loadgroup", default=False):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is not None and group_of(item.nodeid) is None:
            said = (
                f"--dist loadgroup left {item.nodeid} without its @group suffix "
                f"(pytest {pytest.__version__}; pytest-xdist#1386): see pyproject.toml's pytest pin"
            )
            # A worker's own errors reach the terminal only as its crash: say why on its stderr.
            print(f"error: {said}", file=sys.__stderr__, flush=True)
            raise pytest.UsageError(said)


def record_quiet_ids(items: Iterable[pytest.Item], target: str | None) -> None:
    """The collected quiet tests' ids, one a line, to the file `target` (None: nowhere). Every
    xdist worker collects the same items and writes the same text; each replaces the file whole,
    so the quiet lane never reads a half-written one."""
    if not target:
        return
    ids = "".join(f"{item.nodeid}\n" for item in items if item.get_closest_marker("quiet"))
    staged = Path(f"{target}.{os.getpid()}")
    staged.write_text(ids)
    os.replace(staged, target)


def group_of(nodeid: str) -> str | None:
    """The xdist group in a test's id (the `@NAME` suffix loadgroup adds), if any."""
    _, sep, group = nodeid.rpartition("@")
    return group if sep and "]" not in group else None  # an "@" in parametrize ids is no group


def scope_of(nodeid: str) -> str:
    """A test's work unit: its xdist group or else its file. A heavy test's group is its file:
    it stays in one unit with its file's other tests."""
    return group_of(nodeid) or nodeid.split("::", 1)[0]


def unit_rank(scope: str, nodeids: Iterable[str]) -> tuple[int, int]:
    """Which unit starts first: named groups (shared fixtures, long tests on their own), then
    files with heavy tests, then the rest; more tests first within each."""
    ids = list(nodeids)
    named = not scope.endswith(".py")
    heavy = any(group_of(i) == scope for i in ids)
    return (2 if named else 1 if heavy else 0, len(ids))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `--dist loadgroup`: xdist's group scheduling, with files (not single tests) as the
    units of the tests outside any group, heavy units handed out first."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FileOrGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            first = max(self.workqueue, key=lambda s: unit_rank(s, self.workqueue[s]))
            self.workqueue.move_to_end(first, last=False)
            super()._assign_work_unit(node)

    return FileOrGroupScheduling(config, log)
