"""What keeps README.md and docs/ from rotting: every relative link and anchor must resolve, and
every `sweeper ...` command line must parse with the real typer app.

A command line in a fenced block is parsed whole, as the user would paste it (with its
arguments: a missing or extra one, an unknown option or a bad value fails); one in prose (an
inline code span) names a command and options, so it is parsed with `--help` appended. Usage
notation is expanded first: `[...]` is optional and `a | b` inside it is one of them, so each
variant is parsed (a line `sweeper run SPEC [--resume RUN | --resume-latest]` is three lines).
Parsing is in-process (the app's own parser, `make_context`): nothing runs, it takes milliseconds.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import shlex
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import typer
from typer.core import TyperGroup

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Line:
    """One line of a page, outside or inside a fenced code block."""

    path: Path
    number: int
    text: str
    fenced: bool


def pages(root: Path) -> list[Path]:
    """README.md and every markdown page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def lines(path: Path) -> Iterator[Line]:
    fenced = False
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(text.lstrip()):
            fenced = not fenced
            continue
        yield Line(path, number, text, fenced)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup and punctuation dropped, lower case, spaces to -."""
    text = re.sub(r"[`*]|<[^>]+>", "", heading).strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LMN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor on a page (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for line in lines(path):
        match = HEADING.match(line.text)
        if line.fenced or not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def link_problems(root: Path) -> list[str]:
    """`page:line: link: why` for each relative link (or anchor) that does not resolve."""
    problems = []
    for page in pages(root):
        for line in lines(page):
            if line.fenced:
                continue
            prose = INLINE_CODE.sub("", line.text)
            for target in LINK.findall(prose):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:
                file_part, _, anchor = target.partition("#")
                resolved = (page.parent / file_part).resolve() if file_part else page
                where = f"{page.relative_to(root)}:{line.number}: {target}"
                if not resolved.exists():
                    problems.append(f"{where}: no such file")
                elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                    problems.append(f"{where}: no heading with anchor #{anchor}")
    return problems


def command_lines(root: Path) -> Iterator[tuple[str, str, bool]]:
    """(`page:line`, the command line, whether it is whole) for each `sweeper ...` line."""
    for page in pages(root):
        for line in lines(page):
            where = f"{page.relative_to(root)}:{line.number}"
            if line.fenced:
                text = line.text.strip().removeprefix("$ ")
                if text.startswith("sweeper "):
                    yield where, text, True
                continue
            for _ticks, code in INLINE_CODE.findall(line.text):
                if code.startswith("sweeper ") or code == "sweeper":
                    yield where, code, False


def variants(words: list[str]) -> list[list[str]]:
    """Every command line the usage notation stands for: `[x]` with and without x, `[a | b]`
    as a, as b and as neither; `...` is dropped."""
    symbols = _symbols(words)
    alternatives, end = _group(symbols, 0)
    if end != len(symbols):
        raise ValueError(f"unbalanced ] in {' '.join(words)}")
    return [list(v) for v in _expand(alternatives)]


def _symbols(words: list[str]) -> list[str]:
    """Words with their leading `[` and their unbalanced trailing `]` split off as symbols
    (`COLUMN[:min|:max]` stays one word)."""
    out = []
    for word in words:
        body = word.lstrip("[")
        out += ["["] * (len(word) - len(body))
        closes = 0
        while body.endswith("]") and body.count("]") > body.count("["):
            body, closes = body[:-1], closes + 1
        if body and body != "...":
            out.append(body)
        out += ["]"] * closes
    return out


# Alternatives, each a list of items: a word, or an optional group (its own alternatives).
_Alternatives = list[list["str | _Optional"]]


@dataclass
class _Optional:
    alternatives: _Alternatives


def _group(symbols: list[str], i: int) -> tuple[_Alternatives, int]:
    """The alternatives from symbols[i] to the `]` closing this group (or the end); the index
    of that `]`."""
    alternatives: _Alternatives = [[]]
    while i < len(symbols) and symbols[i] != "]":
        if symbols[i] == "[":
            inner, i = _group(symbols, i + 1)
            if i == len(symbols):
                raise ValueError("unclosed [")
            alternatives[-1].append(_Optional(inner))
        elif symbols[i] == "|":
            alternatives.append([])
        else:
            alternatives[-1].append(symbols[i])
        i += 1
    return alternatives, i


def _expand(alternatives: _Alternatives) -> Iterator[tuple[str, ...]]:
    for items in alternatives:
        choices: list[list[tuple[str, ...]]] = []
        for item in items:
            if isinstance(item, str):
                choices.append([(item,)])
            else:
                choices.append([(), *_expand(item.alternatives)])
        for combination in itertools.product(*choices):
            yield tuple(word for part in combination for word in part)


def parse(root: TyperGroup, argv: list[str], help: bool) -> None:
    """Parse `argv` (after `sweeper`) as the real app (`root`, its command) does, down to its
    leaf command, without running it; raise the parser's error (a `typer.TyperException`) for
    what it refuses."""
    from sweeper.cli import with_optional_values

    args = with_optional_values(argv) + (["--help"] if help else [])
    group, name, ctx = root, "sweeper", None
    while True:
        ctx = typer.Context(group, info_name=name, parent=ctx)
        if not args or args[0] == "--help":
            return
        sub = group.get_command(ctx, args[0])
        if sub is None:
            raise typer.BadParameter(f"no such command {args[0]!r}")
        name, args = args[0], args[1:]
        if not isinstance(sub, TyperGroup):
            break
        group = sub
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # --help prints, then exits
            sub.make_context(name, args, parent=ctx)
    except typer.Exit:
        pass


def command_problems(root: Path, app: typer.Typer) -> list[str]:
    """`page:line: command: the parser's error` for each command line (each variant of its
    usage notation) that does not parse."""
    problems = []
    command = typer.main.get_command(app)
    assert isinstance(command, TyperGroup)
    for where, text, whole in command_lines(root):
        try:
            expanded = variants(shlex.split(text, comments=True)[1:])
        except ValueError as error:
            problems.append(f"{where}: {text}: {error}")
            continue
        for argv in expanded:
            try:
                parse(command, argv, help=not whole)
            except typer.TyperException as error:
                message = error.format_message() if hasattr(error, "format_message") else error
                problems.append(f"{where}: {' '.join(['sweeper', *argv])}: {message}")
    return problems
