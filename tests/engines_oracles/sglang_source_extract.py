"""Extract SGLang's CLI flags and environment variables from its source text into test data.

For SGLang builds we cannot install here (PR #29907's DDTREE, forks), the names a preset may
emit are checked against the build's own `server_args.py` and `environ.py`, read as text and
parsed with `ast` (never imported). Usage:

    python tests/engines_oracles/sglang_source_extract.py --repo sgl-project/sglang \\
        --commit <sha> --server-args FILE --environ FILE [--file-chars ROLE=N] \\
        [--prefix ROLE=WHAT | --excerpt ROLE=WHAT] --out tests/engines_oracles/data/<name>.json

A source is the whole upstream file (its length must then be the file's `--file-chars`), a
prefix of it (`--prefix`: its first characters, cut after a whole statement, so it parses), or
an excerpt (`--excerpt`: the verbatim source of some module-level `*_CHOICES` lists, then the
`class ServerArgs:` / `class Envs:` line and some of the class's declarations, in file order).
`text_sha256` is taken over the source text as read, so for a whole file or a prefix it is
checkable against the commit itself (sha256 of the file, or of its first `text_chars`
characters). Each entry also records the sha256 of its own declaration text, the same whatever
the source's kind, so any two readings of one declaration can be compared.

Flags are derived as SGLang's
`add_cli_args_from_dataclass` derives them (sglang 0.5.23 `srt/arg_groups/arg_utils.py`:
`A[T, "help"]` or `A[T, Arg(...)]`; flag = cli_name or `--` + field with dashes, plus aliases;
`no_cli` fields have none; bool -> store_true; Literal types give choices). Flags registered by
hand in `add_cli_args` (deprecated spellings, dynamic choices) are not fields and are not here.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import operator
import re
from pathlib import Path
from typing import Any

_UPSTREAM = {
    "server_args": "python/sglang/srt/server_args.py",
    "environ": "python/sglang/srt/environ.py",
}
_ARITHMETIC = {ast.Mult: operator.mul, ast.Pow: operator.pow, ast.Add: operator.add}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise ValueError(f"no `class {name}` in the source")


def _segment(lines: list[str], node: ast.stmt) -> str:
    assert node.end_lineno is not None
    return "".join(lines[node.lineno - 1 : node.end_lineno])


def _value(node: ast.expr | None) -> Any:
    """A literal as JSON, simple integer arithmetic folded, anything else as {"expr": source}."""
    if node is None:
        return {"expr": None}
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _value(node.left), _value(node.right)
        if isinstance(left, int) and isinstance(right, int):
            return _ARITHMETIC[type(node.op)](left, right)
    return {"expr": ast.unparse(node)}


def _literal_choices(annotation: ast.expr) -> list[Any] | None:
    for node in ast.walk(annotation):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Literal":
            inner = node.slice
            elements = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            return [ast.literal_eval(e) for e in elements]
    return None


def _module_lists(tree: ast.Module, lines: list[str]) -> tuple[dict[str, list[Any]], str]:
    """Module-level `NAME_CHOICES = [literal, ...]` lists (what Arg(choices=NAME) refers to)."""
    found, texts = {}, []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            value = _value(node.value)
            if name.endswith("_CHOICES") and isinstance(value, (list, set)):
                found[name] = sorted(value) if isinstance(value, set) else value
                texts.append(_segment(lines, node))
    return found, "".join(texts)


def _flag_entry(
    field: ast.AnnAssign, text: str, named_lists: dict[str, list[Any]]
) -> dict[str, Any] | None:
    """One `name: A[T, meta] = default` field as SGLang's CLI would expose it."""
    annotation = field.annotation
    if not (isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "A"):
        return None  # not an A[...] field: SGLang gives it no CLI surface
    assert isinstance(field.target, ast.Name) and isinstance(annotation.slice, ast.Tuple)
    type_node, meta = annotation.slice.elts[0], annotation.slice.elts[1]
    name = field.target.id
    arg: dict[str, ast.expr] = {}
    if isinstance(meta, ast.Call) and ast.unparse(meta.func) == "Arg":
        arg = {kw.arg: kw.value for kw in meta.keywords if kw.arg}
    type_text = ast.unparse(type_node)
    no_cli = bool(_value(arg["no_cli"])) if "no_cli" in arg else False
    flags: list[str] = []
    if not no_cli:
        flags = [_value(arg["cli_name"]) if "cli_name" in arg else "--" + name.replace("_", "-")]
        flags += _value(arg["aliases"]) if "aliases" in arg else []
    choices: Any = None
    choices_from = None
    literal = _literal_choices(type_node)
    if "choices" in arg:
        choices = _value(arg["choices"])
        choices_from = "Arg(choices=...)"
        reference = choices.get("expr") if isinstance(choices, dict) else None
        if reference in named_lists:
            choices = named_lists[reference]
            choices_from = f"Arg(choices={reference}), the module-level list"
        elif reference is not None and literal is not None:
            choices, choices_from = literal, f"Literal type (Arg(choices={reference}) not literal)"
    elif literal is not None:
        choices, choices_from = literal, "Literal type"
    bare = re.sub(r"^Optional\[(.*)\]$", r"\1", type_text)
    kind = "store_true" if bare == "bool" else ("list" if bare.startswith("List[") else "value")
    return {
        "field": name,
        "flags": flags,
        "type": type_text,
        "kind": kind,
        "default": _value(field.value) if field.value is not None else {"expr": "required"},
        "choices": choices,
        "choices_from": choices_from,
        "source_sha256": _sha256(text),
    }


def extract_server_args(source: str) -> tuple[list[dict[str, Any]], str]:
    """Flag entries of `class ServerArgs` and the text of its declarations."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    named_lists, lists_text = _module_lists(tree, lines)
    entries, texts = [], []
    for node in _class(tree, "ServerArgs").body:
        if isinstance(node, ast.AnnAssign):
            text = _segment(lines, node)
            texts.append(text)
            if (entry := _flag_entry(node, text, named_lists)) is not None:
                entries.append(entry)
    return entries, lists_text + "class ServerArgs:\n" + "".join(texts)


def extract_environ(source: str) -> tuple[list[dict[str, Any]], str]:
    """Environment variable entries of `class Envs` and the text of its declarations."""
    lines = source.splitlines(keepends=True)
    cls = _class(ast.parse(source), "Envs")
    entries, texts = [], []
    for node in cls.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        target = node.targets[0]
        assert isinstance(target, ast.Name)
        call = node.value
        text = _segment(lines, node)
        texts.append(text)
        keywords = {kw.arg: _value(kw.value) for kw in call.keywords if kw.arg}
        entries.append(
            {
                "name": target.id,
                "type": ast.unparse(call.func),
                "default": _value(call.args[0]) if call.args else None,
                "deprecated_name": keywords.get("deprecated_name"),
                "source_sha256": _sha256(text),
            }
        )
    return entries, "class Envs:\n" + "".join(texts)


def speculative_algorithms(source: str, flags: list[dict[str, Any]]) -> dict[str, Any]:
    """The built-in algorithm names: --speculative-algorithm's choices, else its help's list."""
    field = next(f for f in flags if f["field"] == "speculative_algorithm")
    if field["choices"]:
        return {"names": field["choices"], "from": "choices of --speculative-algorithm"}
    annotation = next(
        node.annotation
        for node in _class(ast.parse(source), "ServerArgs").body
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "speculative_algorithm"
    )
    help_text = next((n.value for n in ast.walk(annotation) if isinstance(n, ast.Constant)), "")
    match = re.search(r"Builtins: ([A-Z0-9_, ]+)\.", str(help_text))
    if match is None:
        raise ValueError("--speculative-algorithm lists no builtins in its help")
    return {
        "names": [name.strip() for name in match.group(1).split(",")],
        "from": "help text of --speculative-algorithm (a free string; other names may be "
        "registered at run time via SpeculativeAlgorithm.register)",
    }


def _kind(role: str, text: str, args: argparse.Namespace) -> tuple[str, str]:
    """(kind, what was read) of one source; ValueError for a 'whole file' of the wrong length."""
    prefixes = dict(item.split("=", 1) for item in args.prefix)
    excerpts = dict(item.split("=", 1) for item in args.excerpt)
    file_chars = {k: int(v) for k, v in (item.split("=", 1) for item in args.file_chars)}
    if role in prefixes:
        return "prefix", prefixes[role]
    if role in excerpts:
        return "excerpt", excerpts[role]
    if role in file_chars and file_chars[role] != len(text):
        raise ValueError(
            f"{role}: {len(text)} characters read, the upstream file has {file_chars[role]}: "
            "not the whole file (say --prefix or --excerpt)"
        )
    return "whole file", "whole file"


def build(args: argparse.Namespace) -> dict[str, Any]:
    """The test-data document for the sources named on the command line."""
    file_chars = {k: int(v) for k, v in (item.split("=", 1) for item in args.file_chars)}
    sources, data, texts = [], {}, {}
    for role, path in (("server_args", args.server_args), ("environ", args.environ)):
        text = texts[role] = Path(path).read_text()
        kind, read = _kind(role, text, args)
        entries, declarations = (
            extract_server_args(text) if role == "server_args" else extract_environ(text)
        )
        data[role] = entries
        sources.append(
            {
                "role": role,
                "path": _UPSTREAM[role],
                "upstream_file_chars": file_chars.get(role),
                "kind": kind,
                "read": read,
                "text_chars": len(text),
                "text_sha256": _sha256(text),
                "declarations_sha256": _sha256(declarations),
            }
        )
    flags = data["server_args"]
    return {
        "provenance": {
            "repo": args.repo,
            "commit": args.commit,
            "sources": sources,
            "extracted_by": "tests/engines_oracles/sglang_source_extract.py",
            "note": args.note,
        },
        "speculative_algorithms": speculative_algorithms(texts["server_args"], flags),
        "flags": flags,
        "env": data["environ"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--server-args", required=True, help="server_args.py or an excerpt")
    parser.add_argument("--environ", required=True, help="environ.py or an excerpt")
    parser.add_argument("--prefix", action="append", default=[], metavar="ROLE=WHAT")
    parser.add_argument("--excerpt", action="append", default=[], metavar="ROLE=WHAT")
    parser.add_argument("--file-chars", action="append", default=[], metavar="ROLE=N")
    parser.add_argument("--note", default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    document = build(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=1) + "\n")


if __name__ == "__main__":
    main()
