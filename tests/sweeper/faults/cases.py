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


def _with_file(
    name: str, data: bytes | None, dataset: str = "file"
) -> Callable[[Ctx], tuple[str, Outcome]]:
    """Validate a spec whose one dataset (or prompts_file) is the file `name` holding `data`
    (None: a symlink to itself, a loop)."""

    def run(ctx: Ctx) -> tuple[str, Outcome]:
        path = ctx.tmp / name
        if data is None:
            path.symlink_to(name)
        else:
            path.write_bytes(data)
        if dataset == "prompts_file":
            text = f"name: t\nworkload:\n  prompts_file: '{name}'\n"
        else:
            text = f"name: t\nworkload:\n  api: chat\n  datasets:\n    - {{file: '{name}'}}\n"
        spec = ctx.spec(text)
        return f"sweeper validate SPEC ({name})", sweeper("validate", str(spec))

    return run


def _hf_strings(ctx: Ctx) -> tuple[str, Outcome]:
    folder = ctx.tmp / "hf"
    folder.mkdir()
    (folder / "state.json").write_text('{"_data_files": ["data-00000.arrow"]}')
    spec = ctx.spec("name: t\nworkload:\n  datasets:\n    - {file: hf}\n")
    return "sweeper validate SPEC (state.json's _data_files are strings)", sweeper(
        "validate", str(spec)
    )


def _synthetic(length: str, count: int = 2) -> Callable[[Ctx], tuple[str, Outcome]]:
    text = (
        "name: t\nworkload:\n  datasets:\n"
        f"    - synthetic: {{count: {count}, input_tokens: {length}}}\n"
    )
    return _validate(text)


_ROW = b'{"prompt": "hi"}\n'

#: Issue 28's input items, each a file or value that passed validate and failed later (or
#: failed validate with a traceback), now one line at validate.
INPUT_CASES = [
    Case(
        "lone_surrogate",
        "issue 28 #7: passed validate; run died with PydanticSerializationError",
        _with_file("s.jsonl", b'{"prompt": "lone \\ud800"}\n'),
        EXIT_BAD_SPEC,
        "s.jsonl:1: text: Input should be a valid string",
    ),
    Case(
        "dataset_symlink_loop",
        "issue 28 #8: RuntimeError traceback",
        _with_file("loop.jsonl", None),
        EXIT_BAD_SPEC,
        "cannot read dataset",
    ),
    Case(
        "prompts_file_symlink_loop",
        "issue 28 #8: RuntimeError traceback",
        _with_file("loop.jsonl", None, dataset="prompts_file"),
        EXIT_BAD_SPEC,
        "Too many levels of symbolic links",
    ),
    Case(
        "csv_field_over_131072",
        "issue 28 #8: _csv.Error traceback",
        _with_file("big.csv", b"prompt\n" + b"x" * 140_000 + b"\n"),
        EXIT_OK,
        "ok: 2 server configs",
    ),
    Case(
        "csv_field_over_the_prompt_limit",
        "issue 28 #8/#12: _csv.Error traceback",
        _with_file("huge.csv", b"prompt\n" + b"x" * 1_000_100 + b"\n"),
        EXIT_BAD_SPEC,
        "huge.csv:2: not CSV: a field over 1,000,000 characters",
    ),
    Case(
        "json_nested_200000",
        "issue 28 #8: RecursionError traceback",
        _with_file("deep.json", b"[" * 200_000 + b"]" * 200_000),
        EXIT_BAD_SPEC,
        "deep.json:1: not JSON: nested deeper than the reader allows",
    ),
    Case(
        "hf_state_json_strings",
        "issue 28 #8: TypeError traceback",
        _hf_strings,
        EXIT_BAD_SPEC,
        "state.json: _data_files: state.json has no _data_files list of {filename}",
    ),
    Case(
        "prompts_file_not_utf8",
        "issue 28 #8: UnicodeDecodeError traceback",
        _with_file("p.jsonl", _ROW + b'{"prompt": "caf\xe9"}\n', dataset="prompts_file"),
        EXIT_BAD_SPEC,
        "p.jsonl:2: not UTF-8 text (byte 0xe9)",
    ),
    Case(
        "synthetic_mean_1e300",
        "issue 28 #8: OverflowError traceback",
        _synthetic("{dist: normal, mean: 1.0e+300, std: 1}"),
        EXIT_BAD_SPEC,
        "input_tokens.mean: Input should be less than or equal to 10000000",
    ),
    Case(
        "synthetic_mean_inf",
        "issue 28 #8: OverflowError traceback",
        _synthetic("{dist: normal, mean: .inf, std: 1}"),
        EXIT_BAD_SPEC,
        "input_tokens.mean: Input should be a finite number",
    ),
    Case(
        "synthetic_std_inf",
        "issue 28 #8: traceback",
        _synthetic("{dist: normal, mean: 8, std: .inf}"),
        EXIT_BAD_SPEC,
        "input_tokens.std: Input should be a finite number",
    ),
    Case(
        "synthetic_output_above_max_tokens",
        "issue 28 #3: 20 tokens generated, 8 recorded in max_tokens and the plan's estimate",
        _validate(
            "name: t\nworkload:\n  max_tokens: 8\n  datasets:\n"
            "    - synthetic: {count: 2, input_tokens: 8, output_tokens: 20}\n"
        ),
        EXIT_BAD_SPEC,
        "synthetic.output_tokens: output lengths up to 20 above workload.max_tokens (8)",
    ),
    Case(
        "tpe_seed_negative",
        "issue 28 #11: plan traceback; run spent the AR restart then exit 3",
        _validate(
            "name: t\nsearch: {strategy: tpe, seed: -1}\n"
            "workload:\n  prompts: [{id: a, text: hi}]\n"
        ),
        EXIT_BAD_SPEC,
        "search.seed: Input should be greater than or equal to 0",
    ),
    Case(
        "tpe_seed_2_32",
        "issue 28 #11: plan traceback",
        _validate(
            "name: t\nsearch: {strategy: tpe, seed: 4294967296}\n"
            "workload:\n  prompts: [{id: a, text: hi}]\n"
        ),
        EXIT_BAD_SPEC,
        "search.seed: Input should be less than or equal to 4294967295",
    ),
    Case(
        "grace_s_1e300",
        "issue 28 #11: 'cannot convert float infinity to integer', exit 3",
        _validate(
            "name: t\nworkload:\n  prompts: [{id: a, text: hi}]\n"
            "  load: {rate: [1], duration_s: 10, grace_s: 1.0e+300}\n"
        ),
        EXIT_BAD_SPEC,
        "workload.load.grace_s: Input should be less than or equal to 3600",
    ),
    Case(
        "synthetic_count_1e8",
        "issue 28 #12: validate OOM-killed",
        _synthetic("8", count=100_000_000),
        EXIT_BAD_SPEC,
        "synthetic.count: Input should be less than or equal to 100000",
    ),
    Case(
        "prompt_10_mb",
        "issue 28 #12: validated, then 123 s and 2.4 GB to fail, a 10 MB manifest",
        _with_file("big.jsonl", b'{"prompt": "' + b"x" * 10_000_000 + b'"}\n'),
        EXIT_BAD_SPEC,
        "big.jsonl:1: text: String should have at most 1000000 characters",
    ),
    Case(
        "rate_1e-300",
        "issue 28 #12: validated; plan printed a 300-digit estimate",
        _validate(
            "name: t\nworkload:\n  prompts: [{id: a, text: hi}]\n"
            "  load: {rate: [1.0e-300], duration_s: 10}\n"
        ),
        EXIT_BAD_SPEC,
        "workload.load.rate[0]: Input should be greater than or equal to 0.001",
    ),
    Case(
        "jsonl_raw_line_separators",
        "issue 28 #13: 'Unterminated string', line numbers shifted",
        _with_file("u.jsonl", '{"prompt": "a\u2028b\u0085c"}\n'.encode() + b"not json\n"),
        EXIT_BAD_SPEC,
        "u.jsonl:2: not JSON",
        # The first line is one record: its separators split nothing (main cut it in three).
        after=lambda ctx, out: assert_that(
            (out.stdout + out.stderr).count("not JSON") == 1, out.stdout + out.stderr
        ),
    ),
    Case(
        "jsonl_utf8_bom",
        "issue 28 #14: refused ('Unexpected UTF-8 BOM')",
        _with_file("b.jsonl", b"\xef\xbb\xbf" + _ROW),
        EXIT_OK,
        "ok: 2 server configs",
    ),
    Case(
        "excel_csv_bom",
        "issue 28 #14: 'no prompt' though the header has prompt",
        _with_file("b.csv", b"\xef\xbb\xbfprompt,category\r\nhi,a\r\n"),
        EXIT_OK,
        "ok: 2 server configs",
    ),
    Case(
        "file_stem_not_a_slug",
        "issue 28 #15: a pydantic dump with URLs",
        _with_file("my data.jsonl", _ROW),
        EXIT_OK,
        "ok: 2 server configs",
    ),
    Case(
        "messages_without_user_turn",
        "issue 28 #15: a pydantic dump with URLs",
        _with_file("m.jsonl", b'{"messages": [{"role": "system", "content": "s"}]}\n'),
        EXIT_BAD_SPEC,
        "m.jsonl:1: messages: chat messages need a user turn",
    ),
]


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
