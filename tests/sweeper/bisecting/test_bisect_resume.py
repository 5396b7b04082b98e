"""Issue 40 item 1, as the issue tells it, end to end on a history of the fake runtime: a
bisect interrupted after its good end, its spec then edited (a prompt and `max_tokens`), is
refused on `--resume` with one line naming what changed; the interrupted step's own run
refusing its changed inputs stops the bisect without blaming the commit; once restored,
`--resume` names the commit that holds the fault, measuring the good end once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from sweeper.bisect.state import STATE_FILE
from sweeper.exit_codes import EXIT_BAD_SPEC, EXIT_INTERRUPTED, EXIT_OK
from tests.sweeper.bisecting.bisect_helpers import bisect_argv, bisect_spec, state_of
from tests.sweeper.bisecting.histories import runtime_history

pytestmark = pytest.mark.slow


def _bisect(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


def test_item1_a_resume_asks_the_same_question_or_is_refused(tmp_path: Path, port: int) -> None:
    shas = runtime_history(tmp_path / "repo", 1, events={1: "fault"}, fake=True)
    spec = bisect_spec(tmp_path, port, tmp_path / "repo", fake=True)
    results = tmp_path / "results"
    argv = bisect_argv(spec, shas[0], shas[1], results)
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline, runs = time.monotonic() + 200, list[Path]()
        while time.monotonic() < deadline and first.poll() is None and not runs:
            runs = list(results.glob(f"bisect/*/steps/{shas[1][:12]}/runs/bis/*/manifest.json"))
            time.sleep(0.2)
        os.kill(first.pid, signal.SIGTERM)  # the bad end in flight: its run has begun
        assert first.wait(timeout=120) == EXIT_INTERRUPTED, (tmp_path / "first.log").read_text()
    (directory,) = {p.parent for p in results.glob(f"bisect/*/{STATE_FILE}")}
    assert [s.sha for s in state_of(directory).steps] == [shas[0]]

    original = spec.read_text()
    spec.write_text(
        original.replace("max_tokens: 8", "max_tokens: 6").replace("number 0:", "number zero:")
    )
    refused = _bisect([*argv, "--resume"])
    assert refused.returncode == EXIT_BAD_SPEC, refused.stderr
    assert refused.stderr.strip().splitlines()[-1] == (
        f"error: --resume: the bisect of this range in {directory} asked another question: "
        "spec workload.prompts[0].text; spec workload.max_tokens changed since. Restore them "
        "to resume it, or run without --resume to bisect the question as it is now"
    )
    assert [s.sha for s in state_of(directory).steps] == [shas[0]]

    # The interrupted step's run refuses its inputs (they changed since it began): the bisect
    # stops, exit 2 with that run's line, the commit left unjudged.
    spec.write_text(original)
    (run_dir,) = [p.parent for p in runs]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["spec"]["workload"]["max_tokens"] = 6
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    stopped = _bisect([*argv, "--resume"])
    assert stopped.returncode == EXIT_BAD_SPEC, stopped.stderr
    line = stopped.stderr.strip().splitlines()[-1]
    assert line.startswith("error: the step's run ended with exit 2: error: ")
    assert "ran other inputs: spec workload.max_tokens changed" in line
    assert line.endswith("nothing of this step is recorded; fix it and --resume measures it again")
    state = state_of(directory)
    assert [s.sha for s in state.steps] == [shas[0]] and state.status == line

    manifest["spec"]["workload"]["max_tokens"] = 8
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    answered = _bisect([*argv, "--resume"])
    assert answered.returncode == EXIT_OK, answered.stderr
    state = state_of(directory)
    assert state.answer is not None and state.answer.culprits == [shas[1]]
    assert f"good end {shas[0][:10]}: good (measured before:" in answered.stderr
    bad = state.step_of(shas[1])
    assert bad is not None and bad.outcome == "bad" and bad.runs == [str(run_dir)]
