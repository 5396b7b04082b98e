"""YAML data plus the line of every key and item, so errors can say `file:line: field`.

PyYAML's composer keeps a start mark on every node; `YamlLines` keeps the composed node tree beside
the plain data and maps a validation location such as `("grid", "budget", 1)` back to a line and a
readable field path (`grid.budget[1]`). It also refuses duplicate keys, which PyYAML would
otherwise resolve silently by keeping the last one.

It is the one YAML reader of the sweeper (specs, reference tables, built-in or a user's), and it
is safe on hostile text: the safe loader (no Python objects), and a document whose aliases would
expand it by more than `MAX_ALIAS_NODES` nodes (an alias bomb: nine lines can stand for a
billion, which every walk of the data would then take) is refused before it is constructed, as
is one nested too deeply for the parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from sweeper.spec.errors import SpecError, SpecIssue

#: How many nodes aliases may add to a document beyond those written out: generous for
#: anchors reused in a spec (a shared env, a list of hosts), far below a bomb's millions.
MAX_ALIAS_NODES = 100_000


@dataclass(frozen=True)
class YamlLines:
    """Parsed YAML (`data`) and the node tree it came from (`root`, None for an empty file)."""

    source: str
    data: Any
    root: yaml.Node | None

    @classmethod
    def parse(cls, text: str, source: str) -> YamlLines:
        """Parse `text`; raise `SpecError` for YAML syntax errors and duplicate keys."""
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            _refuse_alias_bombs(root, source)
            data = loader.construct_document(root) if root is not None else None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = exc.problem or exc.context or "invalid YAML"
            if exc.context and exc.context_mark is not None and exc.problem:
                problem += f" ({exc.context} started at line {exc.context_mark.line + 1})"
            raise SpecError([SpecIssue(source, line, "", f"invalid YAML: {problem}")]) from None
        except yaml.YAMLError as exc:
            raise SpecError([SpecIssue(source, None, "", f"invalid YAML: {exc}")]) from None
        except RecursionError:
            message = "invalid YAML: nested too deeply (hundreds of levels) to be read"
            raise SpecError([SpecIssue(source, None, "", message)]) from None
        finally:
            loader.dispose()
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


def _refuse_alias_bombs(root: yaml.Node | None, source: str) -> None:
    """SpecError when aliases expand the document by more than `MAX_ALIAS_NODES` nodes: each
    node's expanded size, counted once per node (iteratively: never the expansion itself)."""
    if root is None:
        return
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in size:
            continue
        kids = _children(node)
        if not children_done:
            stack.append((node, True))
            stack.extend((kid, False) for kid in kids if id(kid) not in size)
            continue
        size[id(node)] = 1 + sum(size[id(kid)] for kid in kids)
    added = size[id(root)] - len(size)
    if added <= MAX_ALIAS_NODES:
        return
    # The line to show: the top-level entry whose expansion is the largest.
    top = max(_children(root), key=lambda kid: size[id(kid)], default=root)
    message = (
        f"aliases expand this file by {added:,} nodes, more than the {MAX_ALIAS_NODES:,} "
        "allowed (an alias bomb?): write the values out, or reuse fewer"
    )
    raise SpecError([SpecIssue(source, top.start_mark.line + 1, "", message)])


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


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
