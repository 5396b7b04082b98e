"""YAML data plus the line of every key and item, so errors can say `file:line: field`.

PyYAML's composer keeps a start mark on every node; `YamlLines` keeps the composed node tree beside
the plain data and maps a validation location such as `("grid", "budget", 1)` back to a line and a
readable field path (`grid.budget[1]`). It also refuses duplicate keys, which PyYAML would
otherwise resolve silently by keeping the last one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from sweeper.spec.errors import SpecError, SpecIssue


@dataclass(frozen=True)
class YamlLines:
    """Parsed YAML (`data`) and the node tree it came from (`root`, None for an empty file)."""

    source: str
    data: Any
    root: yaml.Node | None

    @classmethod
    def parse(cls, text: str, source: str) -> YamlLines:
        """Parse `text`; raise `SpecError` for YAML syntax errors and duplicate keys."""
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
            data = yaml.safe_load(text)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = exc.problem or exc.context or "invalid YAML"
            if exc.context and exc.context_mark is not None and exc.problem:
                problem += f" ({exc.context} started at line {exc.context_mark.line + 1})"
            raise SpecError([SpecIssue(source, line, "", f"invalid YAML: {problem}")]) from None
        except yaml.YAMLError as exc:
            raise SpecError([SpecIssue(source, None, "", f"invalid YAML: {exc}")]) from None
        duplicates = list(_duplicate_keys(root, ()))
        if duplicates:
            raise SpecError(
                [
                    SpecIssue(
                        source,
                        node.start_mark.line + 1,
                        _field(path),
                        f"duplicate key {node.value!r}",
                    )
                    for node, path in duplicates
                ]
            )
        return cls(source=source, data=data, root=root)

    def locate(self, loc: Sequence[str | int]) -> tuple[int | None, str]:
        """Line and field path of the deepest part of `loc` present in the file.

        Location parts that are not in the data (a union's tag such as `ssh`, or a missing key)
        are skipped, except a missing last part, which is named: `hosts[0].address` for a missing
        address reports the line of `hosts[0]`.
        """
        node = self.root
        line = node.start_mark.line + 1 if node is not None else None
        path: list[str | int] = []
        for position, part in enumerate(loc):
            child = _child(node, part)
            if child is None:
                if position == len(loc) - 1:
                    path.append(part)
                continue
            key_node, node = child
            line = (key_node or node).start_mark.line + 1
            path.append(part)
        return line, _field(path)


def _child(node: yaml.Node | None, part: str | int) -> tuple[yaml.Node | None, yaml.Node] | None:
    """(key node, value node) of `part` under a mapping, or (None, item) under a sequence."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if str(key_node.value) == str(part):
                return key_node, value_node
    elif (
        isinstance(node, yaml.SequenceNode)
        and isinstance(part, int)
        and 0 <= part < len(node.value)
    ):
        return None, node.value[part]
    return None


def _duplicate_keys(node: yaml.Node | None, path: tuple[str | int, ...]) -> Any:
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key in seen:
                yield key_node, (*path, key)
            seen.add(key)
            yield from _duplicate_keys(value_node, (*path, key))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicate_keys(item, (*path, index))


def _field(path: Sequence[str | int]) -> str:
    """`("grid", "budget", 1)` -> `grid.budget[1]`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
