"""The follow-up experiments of `sweeper diagnose`: what separates what a run's grid could not.

From a run's spec, its diagnosis and its request rows, pick a *focus*: the failing point (given,
or the one with the most violations), on its host, with the prompts that failed there. Then plan
pairs of arms that differ in one thing, each measured on those prompts:

- `batching`: the focus at batch 1 vs batch N (N of its prompts' repeats sent together);
- `cuda graph`: the focus's server config with cuda_graph off vs on, at batch 1;
- `chain`: topk 1 at the focus's budget (cuda_graph on: the same fixed verify width) vs the
  focus at batch 1: branching against padding;
- `no padding`: a topk 1 chain whose budget is the drafted length (block_size - 1, what a full
  draft fills) vs the chain at the focus's budget, both at the fixed width: padding alone;
- `repeats`: every arm runs each prompt REPEATS times, so a nondeterministic result tells itself
  from a deterministic one; the focus alone, repeated, is planned when the violations include
  nondeterministic ones or nothing else is left open.

An experiment is planned only when the diagnosis left its question open: a factor it turns is
implicated, confounded, modulates, inconclusive, not varied or unknown (not `cleared`, not
`acts only through` another factor: the grid settled those), and the engine has the knob it
turns (a chain needs topk). The follow-up is plain data: a `Spec` whose grid is the arms as
include rules, at the focus's request config (temperature, top-p, top-k, the request features),
with the same runtime, engine, model, determinism policy and AR baseline as the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sweeper.config import REQUEST_KEYS, SERVER_KEYS, temperature_of
from sweeper.diagnosis.rule import Diagnosis
from sweeper.proof.verdicts import VIOLATIONS
from sweeper.results.rows import is_missing, rows_of
from sweeper.spec import Spec

#: Repeats of each prompt in every arm (also the batch of the batching experiment's N arm).
REPEATS = 4
#: At most this many failing prompts are carried into the follow-up.
MAX_PROMPTS = 2
#: Statuses that leave a factor's question open (`acts only through` is settled: the grid showed
#: it matters only through another factor; `cleared` is settled).
OPEN = {"implicated", "confounded", "modulates", "inconclusive", "not varied", "unknown"}
#: The factors each experiment turns (any open one makes it worth running).
QUESTIONS: dict[str, tuple[str, ...]] = {
    "batching": ("concurrency", "batched_rounds"),
    "cuda graph": ("cuda_graph", "fixed_shape_rounds"),
    "chain": ("topk",),
    "no padding": ("padded_rounds",),
}


@dataclass(frozen=True)
class Arm:
    """One side of an experiment: server params (grid keys, in order) and its batch."""

    items: tuple[tuple[str, Any], ...]
    concurrency: int

    @classmethod
    def of(cls, params: Mapping[str, Any], concurrency: int) -> Arm:
        return cls(tuple(params.items()), concurrency)

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.items)

    @property
    def label(self) -> str:
        shown = " ".join(f"{k}={_show(v)}" for k, v in self.items)
        return f"{shown} c={self.concurrency}"


@dataclass(frozen=True)
class Experiment:
    """Two arms that differ in one thing (or one arm, repeated), and what that separates."""

    name: str
    question: str
    arms: tuple[Arm, ...]


@dataclass(frozen=True)
class FollowUp:
    """The planned follow-up: the focus it started from, its experiments and its spec."""

    focus: Mapping[str, Any]
    prompts: tuple[str, ...]
    experiments: tuple[Experiment, ...]
    skipped: tuple[str, ...]
    spec: Spec | None


def _plain(key: str, value: Any) -> Any:
    """A record value as a grid value: bools for cuda_graph, ints for whole numbers."""
    if hasattr(value, "item"):
        value = value.item()
    if key == "cuda_graph":
        return bool(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _focus(rows: list[Mapping[str, Any]], point: str | None) -> Mapping[str, Any] | None:
    broken = [r for r in rows if r.get("verdict") in VIOLATIONS]
    if point is not None:
        mine = [r for r in rows if str(r.get("point_id")) == point]
        if not mine:
            raise ValueError(f"no request of point {point!r} in this run")
        return next((r for r in mine if r in broken), mine[0])
    if not broken:
        return None
    # The point with the most violations; a speculative one first (the experiments turn its
    # knobs), then the first point id.
    counts = Counter((str(r.get("mode")) != "ar", str(r.get("point_id"))) for r in broken)
    top = max((speculative, n) for (speculative, _), n in counts.items())
    chosen = min(p for (speculative, p), n in counts.items() if (speculative, n) == top)
    return next(r for r in broken if str(r.get("point_id")) == chosen)


def _open(diagnosis: Diagnosis, experiment: str) -> bool:
    statuses = {f.column: f.status for f in diagnosis.findings}
    return any(statuses.get(c) in OPEN for c in QUESTIONS[experiment])


def plan_followup(
    spec: Spec, diagnosis: Diagnosis, requests: Any, point: str | None = None
) -> FollowUp:
    """The follow-up of a run (see the module docstring); `spec` is the run's resolved spec."""
    rows = rows_of(requests)
    focus = _focus(rows, point)
    if focus is None:
        return FollowUp({}, (), (), ("no violations: nothing to follow up",), None)
    # The focus's server params: the keys its engine uses (None: a key it has not).
    keys = [*SERVER_KEYS, *spec.grid.extra_flags()]
    base = {k: _plain(k, focus.get(k)) for k in keys if not is_missing(focus.get(k))}
    batch = max(2, *(spec.workload.concurrency or [1]))
    experiments: list[Experiment] = []
    skipped: list[str] = []

    def add(name: str, question: str, a: Arm, b: Arm, needs: tuple[str, ...] = ()) -> None:
        missing = [k for k in needs if k not in base]
        if missing:
            skipped.append(f"{name}: the focus has no {', '.join(missing)} (its engine or mode)")
        elif not _open(diagnosis, name):
            skipped.append(f"{name}: the run already settled it ({question})")
        else:
            experiments.append(Experiment(name, question, (a, b)))

    alone = Arm.of(base, 1)
    add("batching", "batch 1 vs batch N, same prompt", alone, Arm.of(base, batch))
    graphs = ({**base, "cuda_graph": False}, {**base, "cuda_graph": True})
    add(
        "cuda graph",
        "cuda graph off vs on, same budget",
        Arm.of(graphs[0], 1),
        Arm.of(graphs[1], 1),
    )
    chain = {**base, "topk": 1, "cuda_graph": True}
    add(
        "chain",
        "a chain (topk 1) at the same verify width vs the tree",
        Arm.of(chain, 1),
        alone,
        needs=("topk", "budget"),
    )
    drafted = int(base.get("block_size") or 8) - 1
    add(
        "no padding",
        f"a chain whose budget is the drafted length ({drafted}) vs at budget "
        f"{base.get('budget')}, both at the fixed width",
        Arm.of({**chain, "budget": drafted}, 1),
        Arm.of(chain, 1),
        needs=("topk", "budget"),
    )
    nondeterministic = diagnosis.verdicts.get("nondeterministic", 0) > 0
    if nondeterministic or not experiments:
        # Always something to run: the focus itself, repeated (deterministic or not?).
        own = Arm.of(base, int(focus.get("concurrency") or 1))
        question = f"the focus repeated {REPEATS} times: deterministic or not"
        experiments.append(Experiment("repeats", question, (own,)))
    prompts = _prompts(rows, focus)
    followup_spec = _spec(spec, focus, experiments, prompts) if experiments else None
    return FollowUp(dict(focus), prompts, tuple(experiments), tuple(skipped), followup_spec)


def _prompts(rows: list[Mapping[str, Any]], focus: Mapping[str, Any]) -> tuple[str, ...]:
    point = str(focus.get("point_id"))
    failing = sorted(
        str(r["prompt_id"])
        for r in rows
        if r.get("verdict") in VIOLATIONS and str(r.get("point_id")) == point
    )
    failing = list(dict.fromkeys(failing))
    return tuple((failing or [str(focus["prompt_id"])])[:MAX_PROMPTS])


def _spec(
    spec: Spec, focus: Mapping[str, Any], experiments: list[Experiment], prompts: tuple[str, ...]
) -> Spec:
    """A spec whose points are the arms (include rules), on the focus's host and prompts."""
    temperature = temperature_of(focus)
    arms = list(dict.fromkeys(arm for e in experiments for arm in e.arms))
    first = arms[0]
    grid: dict[str, Any] = {k: [v] for k, v in first.params.items()}
    grid["temperature"] = [temperature]
    # What the focus's requests asked for besides (top-p, top-k, the scalar request features:
    # a penalty's fault shows only where it is sent); the structured ones come with the workload.
    for key in REQUEST_KEYS:
        if key != "temperature" and not is_missing(focus.get(key)):
            grid[key] = [_plain(key, focus[key])]
    grid["include"] = [
        {**arm.params, "temperature": temperature, "concurrency": arm.concurrency} for arm in arms
    ]
    # The prompts as loaded (datasets already expanded), with the earlier turns a later one's
    # history is answered from.
    workload = spec.workload.model_dump(mode="json", exclude={"prompts_file", "datasets"})
    wanted = set(prompts) | {
        e for p in spec.workload.prompts if p.id in prompts for e in p.answers_from
    }
    workload.update(
        prompts=[p.model_dump(mode="json") for p in spec.workload.prompts if p.id in wanted],
        repeats=REPEATS,
        concurrency=[first.concurrency],
    )
    hosts = [h.model_dump(mode="json") for h in spec.hosts if h.name == focus.get("host")]
    data = spec.model_dump(mode="json")
    data.update(
        name=f"{spec.name}-followup",
        hosts=hosts or data["hosts"][:1],
        grid=grid,
        workload=workload,
        shard=False,
        baseline=True,
    )
    return Spec.model_validate(data)
