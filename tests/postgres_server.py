"""A throwaway PostgreSQL server for the history tests (Debian 12's PostgreSQL 15, installed by
.ci/setup-system.sh; the driver is the `history-pg` extra, installed by `make setup`).

`postgres_server` runs `initdb` into a fresh temporary directory and `pg_ctl start`s a server
listening only on a unix socket in that directory (no TCP port, so no collision between xdist
workers), with fsync off: it is thrown away. As root it runs as the `postgres` user the package
creates (PostgreSQL refuses to run as root); otherwise as the caller. Stopped with `-m immediate`
and deleted at the end. `fresh_database` makes one empty database per test. Tests skip with
`skip_reason()` where the server or the driver is missing (a failure under SWEEPER_CI=1).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.lanes import slow_fixture

#: The newest PostgreSQL the machine has (`/usr/lib/postgresql/<major>/bin`), or None.
_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
BIN = _BINS[-1].parent if _BINS else None
USER = "sweeper"
START_TIMEOUT_S = 60


def skip_reason() -> str | None:
    """Why a PostgreSQL server cannot be started here, or None."""
    if BIN is None:
        return "history PostgreSQL tests need postgresql (run .ci/setup-system.sh)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "history PostgreSQL tests need psycopg (the history-pg extra: make setup)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "history PostgreSQL tests need the 'postgres' user as root (postgresql)"
    return None


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextmanager
def postgres_server() -> Iterator[str]:
    """A running server; yields the URL of its `postgres` database (superuser `sweeper`)."""
    assert BIN is not None
    # Under /tmp itself, whatever TMPDIR says: the `postgres` user must reach it, and the
    # socket's path must stay under the 107 bytes a unix socket's name may have.
    base = Path(tempfile.mkdtemp(prefix="pg-", dir="/tmp"))
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(base, owner.pw_uid, owner.pw_gid)
    data = base / "data"
    try:
        _start(base, data)
        yield f"postgresql://{USER}@/postgres?host={base}"
    finally:
        stop = [str(BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]
        subprocess.run(_as_owner(stop), check=False, capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def _start(base: Path, data: Path) -> None:
    """initdb, then start the server on a unix socket in `base`; RuntimeError with its log."""
    assert BIN is not None
    initdb = [str(BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", USER, "--no-sync"]
    options = f"-k {base} -c listen_addresses='' -c fsync=off -c full_page_writes=off"
    start = [str(BIN / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-o", options]
    for argv in (initdb, [*start, "start"]):
        done = subprocess.run(
            _as_owner(argv), capture_output=True, text=True, timeout=START_TIMEOUT_S
        )
        if done.returncode != 0:
            log = base / "log"
            said = log.read_text() if log.exists() else ""
            raise RuntimeError(f"PostgreSQL did not start: {done.stderr}{said}")


def fresh_database(server_url: str, name: str) -> str:
    """A new empty database on the server; its URL."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.replace("/postgres?", f"/{name}?")


# -- pytest fixtures (tests/conftest.py loads this module as a plugin) ---------------------------


@pytest.fixture(scope="session")
@slow_fixture
def postgres_url() -> Iterator[str]:
    """A started server's URL (its `postgres` database), one per worker that needs it."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One history database per test, on each backend: the embedded file, and an empty
    database of the throwaway server."""
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite3")
    server = request.getfixturevalue("postgres_url")
    return fresh_database(server, f"t{uuid.uuid4().hex[:12]}")
