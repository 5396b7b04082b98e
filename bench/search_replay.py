"""Replay a search on a measured grid: how often does each strategy's best come within 5% of the
grid's best, for a restart budget, over many seeds?

The grid run's points are the oracle: a trial "measures" a config by reading its recorded points
(so every strategy sees the same numbers, and machine load between two live runs cannot decide
the answer). The strategies are the product's own (`sweeper.search.strategies`, Optuna's TPE),
scored by the product's objective (`sweeper.analysis.objective`): a config with a determinism
violation is infeasible and never counts as best.

    python bench/search_replay.py results/search-grid/<run> [--restarts 10] [--seeds 20]

prints, per strategy, the share of seeds within 5% and the median best / grid best.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sweeper.analysis.best import best_of, group_configs  # noqa: E402
from sweeper.analysis.objective import Score, score  # noqa: E402
from sweeper.plan import build_plan  # noqa: E402
from sweeper.results.reader import read_run  # noqa: E402
from sweeper.search.space import Space  # noqa: E402
from sweeper.search.strategies import make_strategy  # noqa: E402
from sweeper.spec import Spec  # noqa: E402
from sweeper.spec.search import SearchSpec  # noqa: E402


def replay(run: Path, strategy: str, seed: int, restarts: int) -> float | None:
    """The best feasible objective a strategy finds within `restarts` (the AR's included)."""
    loaded = read_run(run)
    manifest, points = loaded.manifest, loaded.points
    assert manifest is not None and points is not None
    spec = Spec.model_validate({**manifest.spec, "search": None})
    space = Space.of(build_plan(spec).hosts[0])
    search = SearchSpec(strategy=strategy, seed=seed, startup_trials=4)  # type: ignore[arg-type]
    rows = points.to_dict("records")
    by_label = {g.label.replace(" ", "-"): g.rows for g in group_configs(rows).values()}
    best: float | None = None
    with tempfile.TemporaryDirectory() as tmp:
        chooser = make_strategy(space, search, Path(tmp) / "study.jsonl", "replay")
        for _ in range(restarts - 1):  # the AR baseline took one restart
            step = chooser.ask()
            if step is None:
                break
            label = step.server_config.label.rsplit("-cg", 1)[0]
            found = by_label.get(label)
            result = score(found, search.objective) if found else Score("failed", "no points")
            chooser.tell(step, result)
            if result.state == "ok" and result.value is not None:
                best = result.value if best is None else max(best, result.value)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--restarts", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    points = read_run(args.run).points
    assert points is not None
    found = best_of(points.to_dict("records"), SearchSpec().objective)
    assert found is not None
    grid_best = found[1].value or 0.0
    print(f"grid: best {found[0]} {grid_best:.2f}; budget {args.restarts} restarts")
    for strategy in ("grid", "random", "tpe"):
        ratios = []
        for seed in range(args.seeds):
            best = replay(args.run, strategy, seed, args.restarts)
            ratios.append((best or 0.0) / grid_best)
        within = sum(r >= 0.95 for r in ratios) / len(ratios)
        print(
            f"{strategy:6s}: within 5% in {within:.0%} of {len(ratios)} seeds; "
            f"median best/grid best {statistics.median(ratios):.3f}, worst {min(ratios):.3f}"
        )


if __name__ == "__main__":
    main()
