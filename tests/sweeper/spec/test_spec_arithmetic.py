"""What a shipped spec's comment says of its size is what `sweeper plan` prints.

The convention (docs/spec.md, "Sizes stated in comments"): every spec in sweeps/ and
bench/specs/ states its size in one comment line, the first two figures of the totals line
`sweeper plan SPEC` prints:

    # sweeper plan: 18 restarts, 108 points

and a search adds where it stops, as the plan's `stop:` line says:

    # sweeper plan: 19 restarts, 38 points; search stop: 8 restarts

The working that leads there is free text around it. A figure written there as `N restarts` or
`N points` must be one the checked line states (a count per host or per config is written
otherwise: `9 per host`, `started 3 times`), so a stale claim cannot hide in prose. Each spec is
planned by the CLI itself (in process), on the copy `shipped_here` makes where the spec needs hub
datasets or a planted runtime this machine lacks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sweeper.cli import app
from tests.sweeper.shipped_specs import shipped_here

ROOT = Path(__file__).resolve().parents[3]
SPECS = sorted([*(ROOT / "sweeps").glob("*.yaml"), *(ROOT / "bench" / "specs").glob("*.yaml")])

CHECKED = re.compile(
    r"^#\s*sweeper plan: (?P<restarts>\d+) restarts, (?P<points>\d+) points"
    r"(?:; search stop: (?P<stop>\d+) restarts)?\s*$"
)
#: A figure in free text: "= 14 restarts", "84 points", "1 restart" (not "c=1 points").
FIGURE = re.compile(r"(?<![\w.,=])(\d[\d,]*)\s+(restart|point)s?\b")
TOTALS = re.compile(r"^(\d+) restarts, (\d+) points, ", re.MULTILINE)
STOP = re.compile(r"^stop: (\d+) restarts of the grid's", re.MULTILINE)


@dataclass(frozen=True)
class Sizes:
    """A plan's restarts and points, and where its search stops (None: no stop in restarts)."""

    restarts: int
    points: int
    stop: int | None = None


def comments(text: str) -> list[tuple[int, str]]:
    """(line number, text from '#') of each comment: a '#' where YAML's scanner found no token
    (so not inside a quoted scalar), at a line's start or after a blank."""
    covered: set[int] = set()
    for token in yaml.scan(text):
        covered.update(range(token.start_mark.index, token.end_mark.index))
    found = []
    start = 0
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        for column, char in enumerate(line):
            at = start + column
            if char == "#" and at not in covered and (column == 0 or line[column - 1].isspace()):
                found.append((number, line[column:].rstrip()))
                break
        start += len(line)
    return found


def problems(text: str, printed: Sizes) -> list[str]:
    """Where the spec's comments disagree with what `sweeper plan` printed (empty: they agree)."""
    said = comments(text)
    checked = [(n, m) for n, line in said if (m := CHECKED.match(line))]
    example = f"# sweeper plan: {printed.restarts} restarts, {printed.points} points"
    if printed.stop is not None:
        example += f"; search stop: {printed.stop} restarts"
    if len(checked) != 1:
        return [f"{len(checked)} '# sweeper plan: ...' lines, want one: {example}"]
    line, match = checked[0]
    stop = match["stop"]
    claim = Sizes(int(match["restarts"]), int(match["points"]), int(stop) if stop else None)
    found = []
    if claim != printed:
        found.append(f"line {line}: {match.group(0)!r}, but `sweeper plan` says: {example}")
    allowed: dict[str, set[int | None]] = {
        "restart": {claim.restarts, claim.stop},
        "point": {claim.points},
    }
    for number, comment in said:
        if number == line:
            continue
        for figure in FIGURE.finditer(comment):
            if int(figure[1].replace(",", "")) not in allowed[figure[2]]:
                found.append(
                    f"line {number}: {figure.group(0)!r} in free text is not what line {line} "
                    "states; write the plan's figures, or a partial count another way "
                    "('9 per host', 'started 3 times')"
                )
    return found


def planned(path: Path, scratch: Path) -> Sizes:
    """What `sweeper plan` prints for the shipped spec at `path` (its totals and search stop);
    a copy it needs to load here is written under `scratch`."""
    done = CliRunner().invoke(app, ["plan", str(shipped_here(path, scratch))])
    assert done.exit_code == 0, done.output
    totals = TOTALS.search(done.output)
    assert totals is not None, done.output
    stop = STOP.search(done.output)
    return Sizes(int(totals[1]), int(totals[2]), int(stop[1]) if stop else None)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_shipped_spec_states_what_sweeper_plan_prints(path: Path, tmp_path: Path) -> None:
    assert problems(path.read_text(), planned(path, tmp_path)) == []


def test_a_stale_figure_fails_in_the_checked_line_and_in_free_text(tmp_path: Path) -> None:
    """b300.yaml once said 14 restarts and 84 points where the plan (speed-baseline twins and
    the AR starts that score sampled points added) has 20 and 108: each way of saying so
    again is caught."""
    path = ROOT / "sweeps" / "b300.yaml"
    text = path.read_text()
    printed = planned(path, tmp_path)
    assert printed == Sizes(20, 108) and problems(text, printed) == []
    checked = "sweeper plan: 20 restarts, 108 points"
    assert text.count(checked) == 1
    [stale] = problems(text.replace(checked, "sweeper plan: 14 restarts, 84 points"), printed)
    assert "sweeper plan: 14 restarts, 84 points', but `sweeper plan` says" in stale
    assert stale.endswith(f"says: # {checked}")
    prose = text.replace(checked, f"Arithmetic: = 14 restarts; points = 84\n# {checked}")
    found = problems(prose, printed)
    assert [f.split(": ", 1)[1].split(" in free text")[0] for f in found] == ["'14 restarts'"]
    assert len(problems(prose.replace("points = 84", "84 points"), printed)) == 2
    unchecked = text.replace(checked, "20 restarts")
    assert problems(unchecked, printed) == [f"0 '# sweeper plan: ...' lines, want one: # {checked}"]


def test_comments_are_found_by_the_yaml_scanner_not_by_a_hash_in_a_string() -> None:
    text = (
        "# head: 3 restarts\n"
        "name: x  # inline 4 points\n"
        'text: "a # 5 restarts in a string"\n'
        "url: a#b\n"
        "multi: 'first\n  # 6 points, still the string'\n"
    )
    assert comments(text) == [(1, "# head: 3 restarts"), (2, "# inline 4 points")]


def test_a_search_states_where_it_stops(tmp_path: Path) -> None:
    path = ROOT / "bench" / "specs" / "search-tpe.yaml"
    printed = planned(path, tmp_path)
    assert printed == Sizes(25, 50, stop=10)
    text = path.read_text()
    assert problems(text, printed) == []
    without = re.sub(r"; search stop: \d+ restarts", "", text)
    example = f"; search stop: {printed.stop} restarts"
    assert any(found.endswith(example) for found in problems(without, printed))
