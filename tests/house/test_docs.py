"""README.md and docs/ against the tree and the real command line (`tests.house.docs`): every
relative link and anchor resolves, every `sweeper ...` line parses; and planted pages that break
each are caught."""

from __future__ import annotations

from pathlib import Path

from sweeper.cli import app
from tests.house.docs import command_problems, link_problems, pages

ROOT = Path(__file__).resolve().parents[2]


def test_every_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    docs = ROOT / "docs"
    unlinked = [p.name for p in pages(ROOT)[1:] if f"](docs/{p.relative_to(docs)})" not in readme]
    assert unlinked == []


def test_every_relative_link_and_anchor_resolves() -> None:
    assert link_problems(ROOT) == []


def test_every_sweeper_command_line_parses() -> None:
    assert command_problems(ROOT, app) == []


def test_planted_rot_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "# Top\n\n[ok](docs/a.md#a-section) [gone](docs/gone.md) [bad anchor](docs/a.md#nope)\n"
        "`sweeper run SPEC [--dry-run]` and `sweeper runn`\n"
    )
    (tmp_path / "docs" / "a.md").write_text(
        "# Page\n\n## A section\n\n```sh\n"
        "sweeper compare RUN_A RUN_B [--threshold 5%]\n"
        "sweeper compare RUN_A                  # a missing argument\n"
        "sweeper run SPEC [--resume-latest | --no-such-flag]\n"
        "sweeper cron install SPEC --keep many  # not an int\n"
        "```\n\n[here](#a-section) [there](#missing)\n"
    )
    assert link_problems(tmp_path) == [
        "README.md:3: docs/gone.md: no such file",
        "README.md:3: docs/a.md#nope: no heading with anchor #nope",
        "docs/a.md:12: #missing: no heading with anchor #missing",
    ]
    found = command_problems(tmp_path, app)
    assert [line.split(": ")[:2] for line in found] == [
        ["README.md:4", "sweeper runn"],
        ["docs/a.md:7", "sweeper compare RUN_A"],
        ["docs/a.md:8", "sweeper run SPEC --no-such-flag"],
        ["docs/a.md:9", "sweeper cron install SPEC --keep many"],
    ], found
