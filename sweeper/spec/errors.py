"""Spec problems: `SpecError` (every problem with file, line, field) and the wording of pydantic's
errors for people: "required" for a missing key, and "unknown key 'budgets' (did you mean
'budget'?)" for an unknown one, suggesting the closest key of the model the key was found in.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Sequence
from typing import Annotated, Any, NamedTuple, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError


class SpecIssue(NamedTuple):
    """One problem in a spec: where it is and what is wrong."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class SpecError(ValueError):
    """A spec that cannot be used; `issues` lists every problem (file, line, field, message)."""

    def __init__(self, issues: Sequence[SpecIssue]) -> None:
        self.issues = list(issues)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(issue) for issue in self.issues)


def problem(message: str, at: tuple[str | int, ...] = ()) -> PydanticCustomError:
    """A validation error whose location is `at` below the model raising it.

    The message travels in the context (not the template) so braces in it are never formatted.
    """
    return PydanticCustomError("spec", "{message}", {"message": message, "at": at})


def problems(title: str, found: Sequence[tuple[str, tuple[str | int, ...]]]) -> ValidationError:
    """Several `problem`s at once (message, location below the root model), for a root
    validator that finds more than one: every one of them is reported, not only the first."""
    return ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(
                type=PydanticCustomError("spec", "{message}", {"message": message, "at": ()}),
                loc=at,
                input=None,
            )
            for message, at in found
        ],
    )


def suggest(key: str, known: Sequence[str]) -> str:
    """`unknown key 'budgets' (did you mean 'budget'?)`; no hint when nothing is close."""
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r}{hint}"


def error_loc(error: Any) -> tuple[str | int, ...]:
    """A pydantic error's location, extended by the `at` of a `problem`."""
    return tuple(error["loc"]) + tuple((error.get("ctx") or {}).get("at", ()))


def error_message(error: Any, root: type[BaseModel]) -> str:
    """Pydantic's message, except: "required" for a missing key, and a suggestion for an
    unknown one (the known keys are those of the model the key was found in)."""
    if error["type"] == "missing":
        return "required"
    if error["type"] == "extra_forbidden":
        model = _model_at(root, tuple(error["loc"])[:-1])
        known = list(model.model_fields) if model is not None else []
        return suggest(str(error["loc"][-1]), known)
    return str(error["msg"])


def _model_at(root: type[BaseModel], loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model class validating the value at `loc` (a pydantic error location below `root`)."""
    current: Any = root
    parts = list(loc)
    while True:
        origin, args = get_origin(current), get_args(current)
        if origin is Annotated:
            current = args[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in args if a is not type(None)]
            tagged = [m for m in members if parts and _tag(m) == parts[0]]
            if tagged:  # a discriminated union puts the member's tag in the location
                current = tagged[0]
                parts.pop(0)
            elif len(members) == 1:
                current = members[0]
            else:
                return None
        elif not parts:
            return current if isinstance(current, type) and issubclass(current, BaseModel) else None
        elif origin is list and isinstance(parts[0], int):
            current, parts = args[0], parts[1:]
        elif origin is dict:
            current, parts = args[1], parts[1:]
        elif isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(parts[0]))
            if field is None:
                return None
            current, parts = field.annotation, parts[1:]
        else:
            return None


def _tag(model: Any) -> Any:
    """The `kind` literal of a host model (the discriminator of `HostSpec`)."""
    fields = getattr(model, "model_fields", {})
    return fields["kind"].default if "kind" in fields else None
