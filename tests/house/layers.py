"""The controller's rooms and what each may import, written down once (docs/development.md's
"Layers of the controller" draws this table, and a test holds the drawing to it). A room is a
top-level module or folder of `sweeper`. Every import counts, lazy and TYPE_CHECKING ones included
(`tests.house.imports`). The table has no loop, so the rooms still stand in layers; but a room
may import only the rooms named for it, not everything below: analysis and diagnosis judge
records, so they read only the config room, results and spec (diagnosis also analysis's
verdicts), never plan, engines, hosts, services or workers. The proof (whether outputs are the
target's) stands below analysis and reads the same three, over the statistics room, which
imports no room at all. The scored proof's home (`sweeper.proof.scored`) holds what each engine's
scorer does (`catalog`): the engines read it to ask for scores, the plan to choose who scores, so
both stand above the proof.

Some rooms may import only some packages from outside `sweeper` (`OUTSIDE`): the statistics
room numpy and the standard library, so its tests can be read and rerun anywhere.

Some rooms show others only a face: their modules other rooms may import (`FACES`). The engines'
face is the engine interface, its launch, capabilities, registry and stream reading; the
adapters (`ddtree_runtime`, `sglang`, `vllm`, `openai`) and their helpers (`common`, `render`)
are the engines' own.
"""

from __future__ import annotations

import sys
from graphlib import TopologicalSorter
from pathlib import Path

from tests.house.imports import import_graph

_CONTROL = (
    "bisect",
    "runner",
    "schedule",
    "search",
    "report",
    "diagnosis",
    "analysis",
    "proof",
    "stats",
    "exit_codes",
)
_MACHINERY = ("measure", "workers", "services", "hosts", "engines", "doctor")
_DATA = ("plan", "spec", "catalog", "config", "results", "statefile", "poll", "progress")

#: room -> the rooms it may import, and what the room is.
MAY_IMPORT: dict[str, tuple[frozenset[str], str]] = {
    "cli": (frozenset({"commands"}), "the typer app"),
    "commands": (
        frozenset({*_CONTROL, *_MACHINERY, *_DATA}),
        "one module per verb: parse, call, print",
    ),
    "doctor": (
        frozenset({"engines", "hosts", "services", "spec", "workers"}),
        "is a host ready? (checks; the Slurm doctor)",
    ),
    "runner": (
        frozenset(
            {"analysis", "config", "engines", "exit_codes", "hosts", "measure", "plan"}
            | {"progress", "proof", "results", "services", "spec", "workers"}
        ),
        "the order of a sweep: start, prove, measure, judge, record",
    ),
    "bisect": (
        frozenset({"analysis", "catalog", "config", "diagnosis", "exit_codes", "plan"})
        | frozenset({"proof", "results", "services", "spec", "statefile"}),
        "which commit broke it: steps as ordinary runs, judged, searched",
    ),
    "schedule": (
        frozenset({"analysis", "bisect", "diagnosis", "exit_codes", "report", "results"}),
        "cron and the nightly",
    ),
    "search": (
        frozenset({"analysis", "config", "plan", "proof", "results", "spec", "statefile"})
        | frozenset({"workers"}),
        "which config to try next",
    ),
    "report": (
        frozenset({"analysis", "config", "diagnosis", "proof", "results", "spec", "statefile"}),
        "HTML, figures, the tables only the report shows",
    ),
    "exit_codes": (frozenset({"proof"}), "what a sweep's exit code says"),
    "diagnosis": (
        frozenset({"analysis", "config", "proof", "results", "spec"}),
        "factors, rule, follow-up experiments, evidence",
    ),
    "analysis": (
        frozenset({"config", "proof", "results", "spec"}),
        "numbers, ranking, speed credibility, compare",
    ),
    "proof": (
        frozenset({"config", "results", "spec", "stats"}),
        "is the output the target's? verdicts at T = 0 and T > 0, calibration",
    ),
    "stats": (frozenset(), "statistics beneath the proof: tests, bounds, combinations"),
    "measure": (
        frozenset({"config", "engines", "hosts", "plan", "poll", "results", "spec", "statefile"}),
        "a point's load and client -> records",
    ),
    "workers": (
        frozenset({"config", "hosts", "plan", "progress", "services", "spec"}),
        "backends per host; Slurm allocations and the work dealt to them",
    ),
    "services": (
        frozenset({"config", "engines", "hosts", "poll", "statefile"}),
        "a server kept running, ready and proven; the runtime's package",
    ),
    "hosts": (frozenset({"poll"}), "where commands run and files go"),
    "engines": (
        frozenset({"catalog", "config", "proof", "results", "spec"}),
        "adapters: argv, expected config, proof, request, stream",
    ),
    "plan": (
        frozenset({"catalog", "config", "proof", "spec"}),
        "grid -> configs, points, restarts",
    ),
    "spec": (frozenset({"catalog", "config", "results", "statefile"}), "the YAML schema"),
    "catalog": (frozenset(), "each engine, and published reference tables, as plain data"),
    "results": (
        frozenset({"config", "statefile"}),
        "record models, store, the one run loader, recovery",
    ),
    "config": (frozenset(), "server and request configs: ids, labels, ranges, columns"),
    "statefile": (
        frozenset(),
        "reading a file back as state: a regular file, under its kind's cap, never blocking",
    ),
    "poll": (frozenset(), "waits"),
    "progress": (frozenset(), "progress lines"),
}

#: room -> the packages from outside `sweeper` it may import, besides the standard library (a
#: room not named may import any).
OUTSIDE: dict[str, frozenset[str]] = {"stats": frozenset({"numpy"})}

#: room -> its modules other rooms may import (a room not named shows all of them).
FACES: dict[str, frozenset[str]] = {
    "engines": frozenset(
        f"sweeper.engines{part}"
        for part in ("", ".base", ".capabilities", ".launch", ".registry", ".stream")
    ),
}


def room_of(module: str) -> str | None:
    """`sweeper.measure.point` -> "measure"; the package root itself has no room."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "sweeper" else None


def layer_order() -> list[str]:
    """The rooms bottom first, by layer (one above the highest room it may import), then name;
    CycleError if the table has a loop."""
    depth: dict[str, int] = {}
    for room in TopologicalSorter({k: v[0] for k, v in MAY_IMPORT.items()}).static_order():
        depth[room] = 1 + max((depth[other] for other in MAY_IMPORT[room][0]), default=-1)
    return sorted(depth, key=lambda room: (depth[room], room))


def layer_violations(root: Path) -> list[str]:
    """Every import of `sweeper` the table does not allow, every import of a module behind a
    room's face, every outside package a room held to some (`OUTSIDE`) imports beyond them, and
    every room the table does not name."""
    graph = import_graph(root, ("sweeper",))
    found: set[str] = set()
    for module in sorted(graph.edges):
        here = room_of(module)
        if here is None:
            continue
        if here not in MAY_IMPORT:
            found.add(f"{module}: room {here!r} is not in the table (add it to MAY_IMPORT)")
            continue
        if here in OUTSIDE:
            allowed_outside = OUTSIDE[here] | sys.stdlib_module_names | {"__future__"}
            for package in sorted(graph.external[module] - allowed_outside):
                named = ", ".join(sorted(OUTSIDE[here])) or "nothing"
                found.add(
                    f"{module} imports {package}: {here} may import only {named} and the "
                    "standard library from outside sweeper"
                )
        allowed = MAY_IMPORT[here][0]
        for target in sorted(graph.edges[module]):
            there = room_of(target)
            if there is None or there == here or there not in MAY_IMPORT:
                continue
            if there not in allowed:
                named = ", ".join(sorted(allowed)) or "nothing"
                found.add(
                    f"{module} imports {target}: {here} may not import {there} "
                    f"({here} may import {named})"
                )
            elif there in FACES and target not in FACES[there]:
                found.add(
                    f"{module} imports {target}: behind the {there} room's face "
                    f"({', '.join(sorted(FACES[there]))})"
                )
    return sorted(found)


def drawing() -> str:
    """The table as docs/development.md draws it: a markdown table, each room above all it may
    import."""
    lines = ["| room | what it is | may import |", "| --- | --- | --- |"]
    for room in reversed(layer_order()):
        allowed, what = MAY_IMPORT[room]
        may = "every room below" if room == "commands" else ", ".join(sorted(allowed)) or "-"
        if room in OUTSIDE:
            may += f" (outside sweeper: only {', '.join(sorted(OUTSIDE[room]))} and the stdlib)"
        lines.append(f"| {room} | {what} | {may} |")
    return "\n".join(lines)
