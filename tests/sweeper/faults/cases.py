"""A case of the fault corpus, and the bad-spec cases: each builds its input, runs one sweeper
command as a process and names the exit code and the one line it must print; `after` checks
what must (not) have happened (on disk too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sweeper.exit_codes import EXIT_BAD_SPEC, EXIT_OK
from tests.sweeper.faults.context import (
    Ctx,
    Outcome,
    sweeper,
)


@dataclass(frozen=True)
class Case:
    """One input or fault: how to provoke it, the command shown, what it must print."""

    name: str
    #: What went wrong before (the issue's words, short).
    before: str
    run: Callable[[Ctx], tuple[str, Outcome]]
    code: int
    expect: str
    after: Callable[[Ctx, Outcome], None] | None = None
    #: Needs root (tmpfs mounts): CI runs as root.
    root: bool = False


def _validate(text: str, verb: str = "validate") -> Callable[[Ctx], tuple[str, Outcome]]:
    def run(ctx: Ctx) -> tuple[str, Outcome]:
        spec = ctx.spec(text)
        return f"sweeper {verb} SPEC", sweeper(verb, str(spec))

    return run


def _grid(grid: str, extra: str = "") -> str:
    return f"name: t\ngrid:\n{grid}{extra}workload:\n  prompts: [{{id: a, text: hi}}]\n"


# --- spec cases ---------------------------------------------------------------------------------

SPEC_CASES = [
    Case(
        "float_ids_distinct",
        "temperature 0.1234561 and 0.1234562 shared id t0.123456: one point silently dropped",
        _validate(_grid("  budget: [8]\n  topk: [1, 4]\n  temperature: [0.1234561, 0.1234562]\n")),
        EXIT_OK,
        "ok: 3 server configs, 6 points",
    ),
    Case(
        "budget_beyond_int64",
        "budget 10^29 passed validate, crashed the parquet writer, unresumable",
        _validate(_grid("  budget: [100000000000000000000000000000]\n")),
        EXIT_BAD_SPEC,
        "grid.budget[0]: Input should be less than or equal to 9223372036854775807",
    ),
    Case(
        "max_tokens_beyond_context",
        "no bound from the model's context length",
        _validate(
            "name: t\nruntime:\n  max_model_len: 2048\n"
            "workload:\n  max_tokens: 4096\n  prompts: [{id: a, text: hi}]\n"
        ),
        EXIT_BAD_SPEC,
        "workload.max_tokens: 4096 exceeds runtime.max_model_len 2048",
    ),
    Case(
        "temperature_bool",
        "temperature: true accepted as 1.0",
        _validate(_grid("  temperature: [true]\n")),
        EXIT_BAD_SPEC,
        "grid.temperature[0]: Input should be a valid number",
    ),
    Case(
        "temperature_string",
        'temperature: "0.5" accepted as a number',
        _validate(_grid('  temperature: ["0.5"]\n')),
        EXIT_BAD_SPEC,
        "grid.temperature[0]: Input should be a valid number",
    ),
    Case(
        "flag_value_control_character",
        "a runtime flag value could carry a newline",
        _validate(_grid('  my_flag: ["a\\nb"]\n')),
        EXIT_BAD_SPEC,
        "grid.my_flag[0]: a flag value must have no control characters",
    ),
    Case(
        "zero_points",
        "validate 'ok: 0 points', run exit 0 complete, report KeyError",
        _validate(
            _grid("  temperature: [0]\n  exclude: [{temperature: 0}]\n", "baseline: false\n")
        ),
        EXIT_BAD_SPEC,
        "grid: the spec selects no points (check the exclude rules)",
    ),
    Case(
        "everything_excluded_but_baseline",
        "silently became an AR-only sweep",
        _validate(_grid("  topk: [4]\n  exclude: [{topk: 4}]\n")),
        EXIT_OK,
        "note: no speculative point is left",
    ),
    Case(
        "grid_defaulted",
        "grid: {} silently ran b16 k4 bs8",
        _validate("name: t\ngrid: {}\nworkload:\n  prompts: [{id: a, text: hi}]\n"),
        EXIT_OK,
        "note: the grid names no speculative key, so it runs the defaults",
    ),
    Case(
        "huge_grid",
        "10^6 points: validate 29 s and 690 MB",
        _validate(
            _grid(
                "".join(
                    f"  {k}: [{', '.join(str(v) for v in range(lo, lo + 10))}]\n"
                    for k, lo in (
                        ("budget", 1),
                        ("topk", 1),
                        ("block_size", 2),
                        ("f1", 0),
                        ("f2", 0),
                        ("temperature", 0),
                    )
                )  # fmt: skip
            )
        ),
        EXIT_BAD_SPEC,
        "grid: the grid expands to 1,000,000 combinations",
    ),
    Case(
        "large_plan_summarised",
        "plan printed 33 MB for a large grid",
        _validate(
            _grid("  budget: [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]\n  topk: [1, 2, 3, 4]\n"),
            verb="plan",
        ),
        EXIT_OK,
        "summarised: 9 server configs not listed; sweeper plan",
    ),
    Case(
        "dflash_budget_and_topk",
        "only budget was named",
        _validate(
            "name: t\nruntime:\n  engine: sglang\n  preset: sglang-dflash\n  model: /m\n"
            "grid:\n  budget: [8]\n  topk: [4]\nworkload:\n  prompts: [{id: a, text: hi}]\n"
        ),
        EXIT_BAD_SPEC,
        "grid.topk: topk is not used by sglang-dflash",
        after=lambda ctx, out: assert_that(
            "grid.budget: budget is not used" in out.stderr, out.stderr
        ),
    ),
]


def assert_that(condition: bool, detail: object = "") -> None:
    if not condition:
        raise AssertionError(detail)
