"""Run directories written through the run store (`RunStore`, real `PointRecord` and
`RequestRecord` models) whose points ask for request features (a repetition penalty, top-k,
sampling), each point with the verdicts the test says: what the report's feature table and
`diagnose` read, without a server."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.config import point_id
from sweeper.config.labels import server_label
from sweeper.config.request import RequestConfig
from sweeper.proof.verdicts import worst
from sweeper.results.records import PointRecord, RequestRecord, Verdict
from sweeper.results.store import RunStore

AR: dict[str, Any] = {"mode": "ar"}
TREE: dict[str, Any] = {"mode": "speculative", "budget": 8, "topk": 4, "block_size": 4}
CHAIN: dict[str, Any] = {"mode": "speculative", "budget": 4, "topk": 1, "block_size": 4}


@dataclass(frozen=True)
class Point:
    """One point: its server config (`mode` and knobs), what its requests ask for beyond
    temperature (`features`: top_k and the request features, `RequestConfig.make`'s), and
    each prompt's verdict (every repeat);
    prompts it does not name are `exact` (`n/a` on an AR point)."""

    server: Mapping[str, Any]
    temperature: float = 0.0
    features: Mapping[str, Any] = field(default_factory=dict)
    verdicts: Mapping[str, Verdict] = field(default_factory=dict)
    #: The point's verdict (default: its requests' worst) and why it is unproven.
    determinism: Verdict | None = None
    unproven_reason: str = ""


def write_run(
    root: Path, points: Sequence[Point], prompts: Sequence[str], repeats: int = 2
) -> Path:
    """The run's directory, finished, its derived files written; a divergence is at token 3."""
    store = RunStore.create(
        root,
        {"sweep": "features", "sweeper_version": "test", "spec": {}, "runtime_source_hash": ""},
    )
    for point in points:
        mode = str(point.server["mode"])
        knobs = {k: v for k, v in point.server.items() if k != "mode"}
        label = server_label(mode, knobs)
        features = {k: v for k, v in point.features.items() if k != "top_k"}
        top_k = point.features.get("top_k")
        request = RequestConfig.make(point.temperature, 16, 1, top_k=top_k, features=features)
        columns = request.columns()
        pid = point_id("local", label, request.id)
        key = {
            "run_id": store.run_id,
            "host": "local",
            "point_id": pid,
            "attempt": "a1",
            "server_config_id": label,
            "server_label": label,
            "engine": "ddtree_runtime",
            "mode": mode,
            **knobs,
            **columns,
        }
        default: Verdict = "n/a" if mode == "ar" else "exact"
        verdicts = {p: point.verdicts.get(p, default) for p in prompts}
        requests = [
            RequestRecord(
                **key,
                prompt_id=prompt,
                repeat=repeat,
                seed=repeat,
                token_ids=[1, 2, 3, 4, 5],
                output_tokens=5,
                text="w1 w2 w3 w4 w5",
                verdict=verdict,
                divergence_index=None if verdict in ("exact", "n/a") else 3,
            )
            for prompt, verdict in verdicts.items()
            for repeat in range(repeats)
        ]
        determinism = point.determinism or worst(verdicts.values())
        record = PointRecord(
            **key,
            status="ok",
            determinism=determinism,
            unproven_reason=point.unproven_reason,
            n_requests=len(requests),
            started_at="2026-12-06T07:00:00Z",
            finished_at="2026-12-06T07:01:00Z",
        )
        store.append_point(record, requests)
    store.finish(store.points(), "complete", 0, 1.0)
    return store.dir
