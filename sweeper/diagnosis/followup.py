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
- `without <feature>`: for each request feature the focus sent, the focus at batch 1 without
  it vs with it: each workload-level one (a logit bias, stop strings, a response format, a
  regex, n, logprobs: one value in the whole run, so no rule can name it) and each scalar one
  that acts (a penalty, min-p: too few violations may leave the rule silent), where the run
  left it or its family open (`penalties` inconclusive, the focus's penalty cleared). The arm
  without it is a spec of its own (the run's workload, or its request config, less that
  feature), and the AR baseline runs under that request too: each arm is judged against AR under
  its own request.
  Ablated even where the prompt's meaning needs it (JSON asked, no response format): the
  question is exactness against AR under the same request, not a useful answer;
- `repeats`: every arm runs each prompt REPEATS times, so a nondeterministic result tells itself
  from a deterministic one; the focus alone, repeated, is planned when the violations include
  nondeterministic ones or nothing else is left open.

An experiment is planned only when the diagnosis left its question open: a factor it turns is
implicated, confounded, modulates, inconclusive, not varied or unknown (not `cleared`, not
`acts only through` another factor: the grid settled those), and the engine has the knob it
turns (a chain needs topk). The follow-up is plain data: a `Spec` per set of workload features
the arms send (the run's own first, then one per ablation), whose grid is those arms as include
rules, at the focus's request config (temperature, top-p, top-k, the request features), with the
same runtime, engine, model, determinism policy and AR baseline as the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sweeper.config import REQUEST_KEYS, SERVER_KEYS, temperature_of
from sweeper.config.features import BY_NAME, STRUCTURED_FEATURES, used
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
    """One side of an experiment: server params (grid keys, in order), its batch, and the
    workload-level features its requests send (name -> record column value, None: removed)."""

    items: tuple[tuple[str, Any], ...]
    concurrency: int
    features: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, params: Mapping[str, Any], concurrency: int, features: Mapping[str, Any]) -> Arm:
        return cls(tuple(params.items()), concurrency, tuple(features.items()))

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.items)

    @property
    def removed(self) -> tuple[str, ...]:
        """The workload features this arm's requests do not send."""
        return tuple(name for name, value in self.features if value is None)

    @property
    def label(self) -> str:
        shown = " ".join(f"{k}={_show(v)}" for k, v in self.items)
        without = "".join(f" without {name}" for name in self.removed)
        return f"{shown} c={self.concurrency}{without}"


@dataclass(frozen=True)
class Experiment:
    """Two arms that differ in one thing (or one arm, repeated), and what that separates;
    `ablates` names the workload feature an ablation removes."""

    name: str
    question: str
    arms: tuple[Arm, ...]
    ablates: str | None = None


@dataclass(frozen=True)
class FollowUp:
    """The planned follow-up: the focus it started from, its experiments and its specs (the
    run's own workload first, then one per ablation; none when nothing is to run)."""

    focus: Mapping[str, Any]
    prompts: tuple[str, ...]
    experiments: tuple[Experiment, ...]
    skipped: tuple[str, ...]
    specs: tuple[Spec, ...]


def plan_lines(followup: FollowUp) -> list[str]:
    """The plan in words, as `sweeper diagnose` prints it: the focus, each experiment and its
    arms, and what was not planned and why."""
    lines = []
    if followup.focus:
        f = followup.focus
        lines.append(
            f"focus: point {f.get('point_id')} on host {f.get('host')}, prompts "
            f"{', '.join(followup.prompts)}"
        )
    for experiment in followup.experiments:
        arms = " vs ".join(arm.label for arm in experiment.arms)
        lines.append(f"experiment {experiment.name}: {experiment.question}: {arms}")
    return lines + [f"not planned: {reason}" for reason in followup.skipped]


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


def _open(diagnosis: Diagnosis, columns: tuple[str, ...]) -> bool:
    statuses = {f.column: f.status for f in diagnosis.findings}
    return any(statuses.get(c) in OPEN for c in columns)


def plan_followup(
    spec: Spec, diagnosis: Diagnosis, requests: Any, point: str | None = None
) -> FollowUp:
    """The follow-up of a run (see the module docstring); `spec` is the run's resolved spec."""
    rows = rows_of(requests)
    focus = _focus(rows, point)
    if focus is None:
        return FollowUp({}, (), (), ("no violations: nothing to follow up",), ())
    # The focus's server params: the keys its engine uses (None: a key it has not).
    keys = [*SERVER_KEYS, *spec.grid.extra_flags()]
    base = {k: _plain(k, focus.get(k)) for k in keys if not is_missing(focus.get(k))}
    # The features the focus sent that act (every workload-level one), as its record holds them.
    sent = {
        f.name: focus[f.name] for f, value in used(focus) if f.kind == "structured" or f.acts(value)
    }
    batch = max(2, *(spec.workload.concurrency or [1]))
    experiments: list[Experiment] = []
    skipped: list[str] = []

    def add(name: str, question: str, a: Arm, b: Arm, needs: tuple[str, ...] = ()) -> None:
        missing = [k for k in needs if k not in base]
        if missing:
            skipped.append(f"{name}: the focus has no {', '.join(missing)} (its engine or mode)")
        elif not _open(diagnosis, QUESTIONS[name]):
            skipped.append(f"{name}: the run already settled it ({question})")
        else:
            experiments.append(Experiment(name, question, (a, b)))

    alone = Arm.of(base, 1, sent)
    add("batching", "batch 1 vs batch N, same prompt", alone, Arm.of(base, batch, sent))
    graphs = ({**base, "cuda_graph": False}, {**base, "cuda_graph": True})
    add(
        "cuda graph",
        "cuda graph off vs on, same budget",
        Arm.of(graphs[0], 1, sent),
        Arm.of(graphs[1], 1, sent),
    )
    chain = {**base, "topk": 1, "cuda_graph": True}
    add(
        "chain",
        "a chain (topk 1) at the same verify width vs the tree",
        Arm.of(chain, 1, sent),
        alone,
        needs=("topk", "budget"),
    )
    drafted = int(base.get("block_size") or 8) - 1
    add(
        "no padding",
        f"a chain whose budget is the drafted length ({drafted}) vs at budget "
        f"{base.get('budget')}, both at the fixed width",
        Arm.of({**chain, "budget": drafted}, 1, sent),
        Arm.of(chain, 1, sent),
        needs=("topk", "budget"),
    )
    for name in sent:
        # Open where the feature or its family is: a penalty cleared (it broke where the others
        # acted) still answers for the penalties stage, off without it.
        family = BY_NAME[name].family
        if _open(diagnosis, (name,) if family is None else (name, family)):
            question = (
                f"the failing prompts without {name} vs with it, each judged against AR under "
                "the same request"
            )
            ablated = Arm.of(base, 1, {**sent, name: None})
            experiments.append(Experiment(f"without {name}", question, (ablated, alone), name))
        else:
            skipped.append(f"without {name}: the run already settled it")
    nondeterministic = diagnosis.verdicts.get("nondeterministic", 0) > 0
    if nondeterministic or not experiments:
        # Always something to run: the focus itself, repeated (deterministic or not?).
        own = Arm.of(base, int(focus.get("concurrency") or 1), sent)
        question = f"the focus repeated {REPEATS} times: deterministic or not"
        experiments.append(Experiment("repeats", question, (own,)))
    prompts = _prompts(rows, focus)
    arms = list(dict.fromkeys(arm for e in experiments for arm in e.arms))
    groups: dict[tuple[str, ...], list[Arm]] = {}
    for arm in sorted(arms, key=lambda a: len(a.removed)):  # the run's own workload first
        groups.setdefault(arm.removed, []).append(arm)
    specs = tuple(_spec(spec, focus, group, prompts) for group in groups.values())
    return FollowUp(dict(focus), prompts, tuple(experiments), tuple(skipped), specs)


def _prompts(rows: list[Mapping[str, Any]], focus: Mapping[str, Any]) -> tuple[str, ...]:
    point = str(focus.get("point_id"))
    failing = sorted(
        str(r["prompt_id"])
        for r in rows
        if r.get("verdict") in VIOLATIONS and str(r.get("point_id")) == point
    )
    failing = list(dict.fromkeys(failing))
    return tuple((failing or [str(focus["prompt_id"])])[:MAX_PROMPTS])


def _spec(spec: Spec, focus: Mapping[str, Any], arms: list[Arm], prompts: tuple[str, ...]) -> Spec:
    """A spec whose points are the arms (include rules, sending the same workload features),
    on the focus's host and prompts; the workload less the features they remove."""
    temperature = temperature_of(focus)
    first = arms[0]
    grid: dict[str, Any] = {k: [v] for k, v in first.params.items()}
    grid["temperature"] = [temperature]
    # What the focus's requests asked for besides (top-p, top-k, the scalar request features:
    # a penalty's fault shows only where it is sent), less what the arms remove; the structured
    # ones come with the workload.
    for key in REQUEST_KEYS:
        if key not in ("temperature", *first.removed) and not is_missing(focus.get(key)):
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
        **dict.fromkeys(k for k in first.removed if k in STRUCTURED_FEATURES),
    )
    hosts = [h.model_dump(mode="json") for h in spec.hosts if h.name == focus.get("host")]
    data = spec.model_dump(mode="json")
    suffix = "followup" + "".join(f"-no-{name}" for name in first.removed)
    data.update(
        name=f"{spec.name[: 63 - len(suffix)]}-{suffix}",
        hosts=hosts or data["hosts"][:1],
        grid=grid,
        workload=workload,
        shard=False,
        baseline=True,
    )
    return Spec.model_validate(data)
