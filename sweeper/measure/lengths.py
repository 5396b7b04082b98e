"""Which input and output lengths a point's requests held: the request columns that say where a
prompt came from and what lengths it asked for, and the point's count of answers that ended
before the length they were to hold, with the reason in words.

An output length is held with `ignore_eos` + `min_tokens` where the engine takes them (its
`length_control`); where it does not, the request is sent without them and an answer that ends
at EOS is recorded as not held, so a length sweep never silently measures shorter answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sweeper.engines.base import RequestSpec


def request_columns(spec: RequestSpec, record: Mapping[str, Any]) -> dict[str, Any]:
    """A request's dataset, category, turn and asked lengths, and whether its answer held the
    asked output length (None: none asked)."""
    held = None
    if spec.hold_tokens is not None:
        held = not record.get("error") and record.get("output_tokens") == spec.hold_tokens
    ids = spec.prompt_token_ids
    return {
        # What this request asked for: its prompt's own length where it has one.
        "max_tokens": spec.max_tokens,
        "dataset": spec.dataset,
        "category": spec.category,
        "turn": spec.turn,
        "asked_input_tokens": len(ids) if ids is not None else None,
        "asked_output_tokens": spec.hold_tokens,
        "length_held": held,
    }


def point_lengths(records: Sequence[tuple[RequestSpec, Mapping[str, Any]]]) -> dict[str, Any]:
    """How many asked output lengths were not held, and why."""
    short = [
        spec
        for spec, record in records
        if spec.hold_tokens is not None
        and not record.get("error")
        and record.get("output_tokens") != spec.hold_tokens
    ]
    if not short:
        return {"lengths_not_held": 0, "length_note": ""}
    asked = sum(spec.hold_tokens is not None for spec, _ in records)
    unheld = [s for s in short if not s.ignore_eos and not s.min_tokens]
    why = (
        "the engine takes neither ignore_eos nor min_tokens"
        if unheld
        else "the engine was sent ignore_eos/min_tokens and stopped early all the same"
    )
    note = f"{len(short)} of {asked} answers ended before their asked length: {why}"
    return {"lengths_not_held": len(short), "length_note": note}
