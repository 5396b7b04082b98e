"""Crontab entries against Debian's real `crontab`, in a throwaway user's crontab removed after.

Needs root (to create the user and edit its crontab) and the `cron` package
(`.ci/setup-system.sh`); skips with the reason otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.commands import cron as cron_command
from sweeper.schedule import cron

USER = "sweepercrontest"
pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(shutil.which("crontab") is None, reason="no crontab: .ci/setup-system.sh"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to use a throwaway user's crontab"),
]


def crontab_text() -> str:
    done = subprocess.run(["crontab", "-u", USER, "-l"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else ""


@pytest.fixture
def user() -> Iterator[str]:
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", USER], check=True)
    subprocess.run(["crontab", "-u", USER, "-r"], capture_output=True)
    yield USER
    subprocess.run(["crontab", "-u", USER, "-r"], capture_output=True)
    subprocess.run(["userdel", USER], capture_output=True)


@pytest.fixture
def specs(tmp_path: Path) -> tuple[Path, Path]:
    one = tmp_path / "local.yaml"
    two = tmp_path / "with space's.yaml"
    for spec in (one, two):
        spec.write_text("name: x\n")
    return one, two


def test_install_list_remove_in_a_real_crontab(
    user: str, specs: tuple[Path, Path], tmp_path: Path
) -> None:
    one, two = specs
    results = tmp_path / "results"
    cron.install(one, "0 2 * * *", 14, results, user)
    cron.install(two, "30 3 * * 1-5", 3, results, user)
    cron.install(one, "15 1 * * *", 7, results, user)  # replaces, never duplicates
    text = crontab_text()
    assert text.count(cron.TAG) == 2
    assert f"15 1 * * * cd {os.getcwd()} && {sys.executable} -m sweeper.cli nightly {one}" in text
    assert "--keep 7" in text and "0 2 * * *" not in text
    assert "'" + str(two).replace("'", "'\"'\"'") + "'" in text  # the odd path stays one word
    assert [(e.spec, e.schedule) for e in cron.entries(user)] == [
        (str(two), "30 3 * * 1-5"),
        (str(one), "15 1 * * *"),
    ]
    assert cron.remove(one, user) == 1
    assert cron.remove(one, user) == 0
    assert [e.spec for e in cron.entries(user)] == [str(two)]
    assert cron.remove(two, user) == 1
    assert cron.TAG not in crontab_text()


def test_other_lines_of_the_crontab_are_left_alone(
    user: str, specs: tuple[Path, Path], tmp_path: Path
) -> None:
    subprocess.run(
        ["crontab", "-u", user, "-"], input="5 4 * * * echo mine\n", text=True, check=True
    )
    cron.install(specs[0], "0 2 * * *", 14, tmp_path, user)
    cron.remove(specs[0], user)
    assert crontab_text().strip() == "5 4 * * * echo mine"


def test_cli_install_list_remove_and_bad_schedule(
    user: str, specs: tuple[Path, Path], tmp_path: Path
) -> None:
    run = CliRunner().invoke
    app = cron_command.app
    spec = str(specs[0])
    bad = run(app, ["install", spec, "--schedule", "61 2 * * *", "--user", user])
    assert bad.exit_code == 2 and "bad schedule" in bad.output
    missing = run(app, ["install", str(tmp_path / "nope.yaml"), "--user", user])
    assert missing.exit_code == 2 and "no spec file" in missing.output
    ok = run(app, ["install", spec, "--schedule", "0 2 * * *", "--keep", "5", "--user", user])
    assert ok.exit_code == 0, ok.output
    listed = run(app, ["list", "--user", user])
    assert f"0 2 * * *  {spec}" in listed.output
    assert run(app, ["remove", spec, "--user", user]).exit_code == 0
    again = run(app, ["remove", spec, "--user", user])  # nothing to remove: usage, not regression
    assert again.exit_code == 2 and "no nightly entry" in again.output
    assert "no nightly sweeps installed" in run(app, ["list", "--user", user]).output
