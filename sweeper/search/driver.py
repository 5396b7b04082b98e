"""The search's side of a sweep: which server config the runner starts next, until its stop.

The runner calls `SearchOrder(host_plan, done)` (its `order` hook) and runs the steps it yields,
recording each point into `done` before asking for the next step; so after each step the driver
reads the step's points back from `done`, scores them and tells the strategy. The records are the
source of truth: on resume, configs already measured are scored from them, and
`search.stop.restarts` counts the server configs the run holds records of (the AR baseline's
included). What the search did is also written to `search.json` in the run directory (written
whole, atomically): the time spent (so `search.stop.hours` survives a resume) and each trial's
score, in order.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sweeper.analysis.drift import Drift, baseline_drift, mark_drift
from sweeper.analysis.impossible import mark_impossible
from sweeper.analysis.objective import Score, score
from sweeper.plan import HostPlan, Plan, Step
from sweeper.proof.calibration import calibrated_points
from sweeper.results.reader import REQUESTS_LOG, read_jsonl
from sweeper.results.repair import DAMAGED_DIR
from sweeper.results.store import atomic_write
from sweeper.search.space import Space, params_key
from sweeper.search.strategies import make_strategy
from sweeper.spec.search import SearchSpec
from sweeper.statefile import JOURNAL, STATE, read_state
from sweeper.workers import Work

SEARCH_LOG = "search.json"
STUDY_FILE = "search.optuna.jsonl"


class SearchStateError(ValueError):
    """A search whose state files cannot be resumed from (damaged beyond a torn tail)."""


def resumable_search(run_dir: Path) -> list[str]:
    """Check a search's state before a resume; what was done about it, one line each. A torn
    last line of the study's journal (a kill mid-write: never a complete record) is cut and
    kept verbatim in damaged/; anything else unreadable is a SearchStateError naming the file
    and line, never a JSON error from inside Optuna."""
    notes = []
    journal = run_dir / STUDY_FILE
    if journal.exists() or journal.is_symlink():  # there but no file: said, never skipped
        try:
            data = read_state(journal, JOURNAL)
        except OSError as exc:
            raise SearchStateError(
                f"{journal} cannot be read ({exc.strerror or exc}): the study cannot be resumed "
                "from it; restore the file, or remove it to go on with a new study"
            ) from None
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            kept = _keep_aside(run_dir, STUDY_FILE, data[cut:])
            atomic_write(journal, lambda tmp: tmp.write_bytes(data[:cut]))
            notes.append(f"{STUDY_FILE}: cut a torn last line (kept in {kept})")
            data = data[:cut]
        for number, line in enumerate(data.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if not isinstance(entry, dict) or "op_code" not in entry:
                raise SearchStateError(
                    f"{journal}:{number}: not one of the study's records (a JSON object with an "
                    "op_code): the study cannot be resumed from it; restore the file, or remove "
                    "it to go on with a new study (configs already measured are not measured "
                    "again)"
                )
    log = run_dir / SEARCH_LOG
    if log.exists() or log.is_symlink():
        problem = _search_log_problem(log)
        if problem:
            raise SearchStateError(
                f"{log} is unreadable ({problem}): it holds the time the search has spent; "
                "restore it, or remove it to resume with search.stop.hours counted from now"
            )
    return notes


def _search_log_problem(log: Path) -> str:
    """What is wrong with `search.json` ("" when it reads as the driver writes it): an object
    with a finite, non-negative `spent_s` and `trials`, a list of objects each with `params`
    (an object) and `restart` (a whole number)."""
    try:
        text = read_state(log, STATE).decode()
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    except UnicodeDecodeError as exc:
        return f"cannot be read: {exc}"
    if not text.strip():
        return "empty"
    try:
        state = json.loads(text)
    except ValueError:
        return "truncated or not JSON"
    if not isinstance(state, dict):
        return f"it holds {json.dumps(state)[:40]}, not an object"
    spent = state.get("spent_s")
    if isinstance(spent, bool) or not isinstance(spent, (int, float)) or not 0 <= spent < math.inf:
        return f"spent_s {spent!r} is not a number of seconds"
    trials = state.get("trials")
    if not isinstance(trials, list):
        return "trials is not a list"
    for number, trial in enumerate(trials, start=1):
        if not (
            isinstance(trial, dict)
            and isinstance(trial.get("params"), dict)
            and isinstance(trial.get("restart"), int)
        ):
            return f"trial {number} is not a trial (params and restart)"
    return ""


def _keep_aside(run_dir: Path, name: str, data: bytes) -> Path:
    folder = run_dir / DAMAGED_DIR  # beside what `sweeper repair` keeps aside
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.{int(time.time())}.torn"
    atomic_write(path, lambda tmp: tmp.write_bytes(data))
    return path.relative_to(run_dir)


class SearchOrder:
    """The runner's `order` hook for a spec with `search:` (one host; see the spec's check)."""

    def __init__(
        self, plan: Plan, run_dir: Path, clock: Callable[[], float] = time.monotonic
    ) -> None:
        assert plan.spec.search is not None
        self.plan, self.search = plan, plan.spec.search
        self.run_dir, self.clock = run_dir, clock
        self.log: dict[str, Any] = {"strategy": self.search.strategy, "spent_s": 0.0, "trials": []}
        if (run_dir / SEARCH_LOG).exists():
            self.log = json.loads(read_state(run_dir / SEARCH_LOG, STATE))
        self.stopped_by = ""

    def __call__(
        self, host_plan: HostPlan, done: Mapping[str, Mapping[str, Any]]
    ) -> Iterator[Work]:
        space = Space.of(host_plan)
        started = self.clock()
        spent_before = float(self.log.get("spent_s", 0.0))
        for baseline in space.baselines:
            pending = [p for p in space.points(baseline) if p.point_id not in done]
            if pending:
                yield Work(baseline, pending)
        strategy = make_strategy(
            space, self.search, self.run_dir / STUDY_FILE, f"{self.plan.spec.name}-{host_plan.name}"
        )
        remember = getattr(strategy, "remember", None)
        if remember is not None:
            drifts = baseline_drift(done.values())
            for candidate in space.candidates:
                rows = self._rows(space, candidate, done)
                recorded = self._point_rows(space, candidate, done)
                if rows and all(r is not None for r in recorded):
                    remember(candidate, self._score(self._calibrated(rows, done), drifts))
        while True:
            step = strategy.ask()
            if step is None:
                self.stopped_by = self.stopped_by or "the strategy tried all it would"
                break
            # A trial is every restart the plan holds of it (`repeats.restarts`); a halving rung
            # is the one restart asked for.
            runs = space.restarts_of(step) if step.server_config.restart == 0 else [step]
            length = getattr(strategy, "length", lambda _: 1)  # halving's rungs measure longer
            for run in runs:
                pending = [p for p in space.points(run, length(run)) if p.point_id not in done]
                if not pending:
                    continue
                why = self._past_stop(done, spent_before + self.clock() - started)
                if why:
                    self.stopped_by = why
                    break
                yield Work(run, pending)
            if self.stopped_by:
                break
            judged = self._calibrated(self._rows(space, step, done), done)
            result = self._score(judged, baseline_drift(done.values()))
            strategy.tell(step, result)
            self._note(step, result, spent_before + self.clock() - started)
            for check in self._checks_due(space, done):
                why = self._past_stop(done, spent_before + self.clock() - started)
                if why:
                    self.stopped_by = why
                    break
                yield check
            if self.stopped_by:
                break
        self._save(spent_before + self.clock() - started)

    def _checks_due(self, space: Space, done: Mapping[str, Mapping[str, Any]]) -> Iterator[Work]:
        """The AR drift checks due after the configs measured so far (`repeats.baseline_every`):
        one after every N measured configs, as in a grid. A search never knows its last trial
        in advance, so its run ends on the last check due rather than on a closing one."""
        every = self.plan.spec.repeats.baseline_every
        if every is None:
            return
        started = {str(r.get("server_config_id")) for r in done.values()}
        measured = sum(c.server_config.id in started for c in space.candidates)
        for group in space.check_rounds()[: measured // every]:
            for check in group:
                pending = [p for p in space.points(check) if p.point_id not in done]
                if pending:
                    yield Work(check, pending)

    def _point_rows(
        self, space: Space, step: Step, done: Mapping[str, Mapping[str, Any]]
    ) -> list[Mapping[str, Any] | None]:
        return [done.get(p.point_id) for p in space.points(step)]

    def _rows(
        self, space: Space, step: Step, done: Mapping[str, Mapping[str, Any]]
    ) -> list[Mapping[str, Any]]:
        """Every recorded point of the step's server config, all its restarts so far."""
        first = step.server_config.again(0)
        planned = [s.server_config.restart for s in space.restarts_of(step)]
        last = max([step.server_config.restart, *planned])
        rows = []
        for restart in range(last + 1):
            sc = first.again(restart) if restart else first
            found = self._point_rows(space, Step(sc, step.request_configs), done)
            rows += [r for r in found if r is not None]
        return rows

    def _calibrated(
        self, rows: list[Mapping[str, Any]], done: Mapping[str, Mapping[str, Any]]
    ) -> Sequence[Mapping[str, Any]]:
        """The trial's rows as `best` judges them: near-ties above the AR-vs-AR control (over
        every request recorded so far) count as violations (`calibrated_points`)."""
        if not any(r.get("determinism") == "near-tie" for r in rows):
            return rows  # nothing the calibration could change: skip reading the requests
        keep = {(pid, p.get("attempt")) for pid, p in done.items()}
        requests = [
            r
            for r in read_jsonl(self.run_dir / REQUESTS_LOG)
            if (r.get("point_id"), r.get("attempt")) in keep
        ]
        return list(calibrated_points(rows, requests))

    def _score(self, rows: Sequence[Mapping[str, Any]], drifts: list[Drift]) -> Score:
        """The trial's score as `best` would give it now: the drift of every AR measurement
        recorded so far (`drifts`, checks included) marks its rows, so a lone speedup against a
        baseline that moved is withheld here too, and so is one above its tau (marked after the
        drift, which it names as the cause)."""
        if not rows:
            return Score("failed", "not measured")
        marked = mark_impossible(mark_drift(rows, drifts))
        return score(marked, self.search.objective, self.search.constraints)

    def _past_stop(self, done: Mapping[str, Mapping[str, Any]], spent_s: float) -> str:
        """Why another restart would pass `search.stop` (empty: it would not)."""
        stop = self.search.stop
        if stop is None:
            return ""
        started = len({str(r.get("server_config_id")) for r in done.values()})
        if stop.restarts is not None and started + 1 > stop.restarts:
            return f"search.stop: {stop.restarts} restarts"
        if stop.hours is not None and spent_s >= stop.hours * 3600:
            return f"search.stop: {stop.hours:g} hours"
        return ""

    def _note(self, step: Step, result: Score, spent_s: float) -> None:
        sc = step.server_config
        interval = result.interval
        trial = {
            "label": sc.label,
            "params": dict(sc.params),
            "restart": sc.restart,
            "state": result.state,
            "value": result.value,
            "low": interval.low if interval else None,
            "high": interval.high if interval else None,
            "reason": result.reason,
        }
        trials = [
            t
            for t in self.log["trials"]
            if params_key(t["params"]) != params_key(sc.params) or t["restart"] != sc.restart
        ]
        self.log["trials"] = [*trials, trial]
        self._save(spent_s)

    def _save(self, spent_s: float) -> None:
        self.log["spent_s"] = spent_s
        self.log["stopped_by"] = self.stopped_by
        text = json.dumps(self.log, indent=1, default=str)
        atomic_write(self.run_dir / SEARCH_LOG, lambda tmp: tmp.write_text(text))


def search_of(plan: Plan) -> SearchSpec | None:
    """The plan's search, when it has one."""
    return plan.spec.search
