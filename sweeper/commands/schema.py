"""`sweeper schema`: print the JSON Schema of a sweep spec (for editors and reviewers)."""

from __future__ import annotations

import json

import typer

from sweeper.spec import spec_json_schema


def command() -> None:
    """Print the spec's JSON Schema."""
    typer.echo(json.dumps(spec_json_schema(), indent=2))
