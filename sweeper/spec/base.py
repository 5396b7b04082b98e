"""Building blocks of every spec model: the strict base model and the constrained scalar types.

Every spec model refuses unknown keys (`extra="forbid"`), which `sweeper.spec.errors` words as
"unknown key 'x' (did you mean 'y'?)".
"""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictInt,
    StringConstraints,
)

#: Every integer of a spec ends up in a parquet int64 column (and in C longs on the way), so
#: nothing beyond int64 gets past validation; fields with a tighter natural bound add it.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
Int = Annotated[StrictInt, Field(ge=INT64_MIN, le=INT64_MAX)]
#: A real number: an int or a float, never a bool or a string ("0.5" and true are refused), and
#: finite unless a field says otherwise (a rate's `inf`).
Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]

SLUG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Port = Annotated[Int, Field(ge=1, le=65535)]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
#: Most characters one prompt or message may hold: ~250k tokens, beyond any served context; a
#: larger one is a wrong file, refused at validate instead of minutes into a run.
MAX_PROMPT_CHARS = 1_000_000


#: Prompt text: at most MAX_PROMPT_CHARS of valid Unicode (measuring it refuses a lone
#: surrogate, JSON's "\\ud800", which has no UTF-8 form and would fail only when written).
PromptText = Annotated[str, StringConstraints(max_length=MAX_PROMPT_CHARS)]
#: An http(s) URL of an OpenAI-compatible server, without a trailing slash or path beyond a prefix.
HttpURL = Annotated[str, StringConstraints(pattern=r"^https?://[A-Za-z0-9.\-\[\]:]+(/[^\s?#]*)?$")]

#: Where the `local` host shorthand and the default `hosts` point.
LOCAL_HOST_NAME = "local"


class StrictModel(BaseModel):
    """Base of every spec model: unknown keys are errors (`extra_forbidden`), which `_issue`
    words as "unknown key 'x' (did you mean 'y'?)" using the model found at the error's location.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
