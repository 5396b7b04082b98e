"""The controller's layers, written down once: a room (a top-level module or folder of
`sweeper`) imports only rooms on lines below its own; rooms on one line do not import each other.
Every import counts, lazy and TYPE_CHECKING ones included (`tests.house.imports`).

Top to bottom, the same picture as the README's "Layers":

    cli                                     the typer app
    commands                                one module per verb: parse, call, print
    doctor                                  is a host ready? (checks, the Slurm doctor)
    runner, schedule                        the order of a sweep, its serving records; cron, nightly
    report, search, exit_codes              HTML; which config to try next; exit codes
    diagnosis                               factors, rule, follow-up experiments, evidence
    analysis | measure                      records -> verdicts | readiness, client, load -> records
    workers                                 backends per host; Slurm allocations, work dealt to them
    services                                a server kept running (process, unit, step); who it is
    hosts                                   where commands run and files go
    engines                                 adapters: argv, readiness, proof, request, stream
    plan                                    grid -> server configs and request configs
    spec                                    the YAML schema (validated against the catalog)
    catalog                                 engines as plain data (one record each)
    results, poll, progress                 record models, store, the one loader; waits; progress
"""

from __future__ import annotations

from pathlib import Path

from tests.house.imports import import_graph

LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("commands",),
    ("doctor",),
    ("runner", "schedule"),
    ("report", "search", "exit_codes"),
    ("diagnosis",),
    ("analysis", "measure"),
    ("workers",),
    ("services",),
    ("hosts",),
    ("engines",),
    ("plan",),
    ("spec",),
    ("catalog",),
    ("results", "poll", "progress"),
)
RANK = {room: depth for depth, line in enumerate(LAYERS) for room in line}


def room_of(module: str) -> str | None:
    """`sweeper.measure.point` -> "measure"; the package root itself has no room."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "sweeper" else None


def layer_violations(root: Path) -> list[str]:
    """Every import of `sweeper` that points up or sideways, and every room with no layer."""
    graph = import_graph(root, ("sweeper",))
    found: set[str] = set()
    for module in sorted(graph.edges):
        here = room_of(module)
        if here is None:
            continue
        if here not in RANK:
            found.add(f"{module}: room {here!r} has no layer (add it to LAYERS)")
            continue
        for target in sorted(graph.edges[module]):
            there = room_of(target)
            if there is None or there == here or there not in RANK:
                continue
            if RANK[there] < RANK[here]:
                found.add(f"{module} imports {target}: {here} may not import {there} (above it)")
            elif RANK[there] == RANK[here]:
                found.add(f"{module} imports {target}: {here} and {there} share a layer")
    return sorted(found)
