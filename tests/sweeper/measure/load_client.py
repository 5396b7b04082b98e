"""One open-loop point in a process of its own, so a test can put the whole client in a cgroup.

    python tests/sweeper/measure/load_client.py BASE_URL '{"rate": 40, ...}'

Prints "IMPORTED" once its imports are done and a short warm-up point has run, and waits for a
line on stdin (the test limits the CPU in between, so the limit bites on the measurement rather
than on the imports or on starting the workers' forkserver, which a sweep pays once, at its first
point), then runs the point and prints its self-check as one JSON line.
"""

from __future__ import annotations

import dataclasses
import json
import sys

from sweeper.engines.base import RequestSpec
from sweeper.measure.arrivals import ArrivalProfile
from sweeper.measure.pool import OpenLoop, run_load
from sweeper.measure.senders import spec_payload


def main(base_url: str, raw: str) -> None:
    args = json.loads(raw)
    spec = RequestSpec(prompt_id="p", prompt="p", max_tokens=args["max_tokens"], temperature=0.0)
    profile = ArrivalProfile(rate=args["rate"], duration_s=args["duration_s"])
    warmup = ArrivalProfile(rate=args["rate"], duration_s=0.2)
    run_load(base_url, [spec_payload(spec)], OpenLoop(warmup, seed=0), processes=args["processes"])
    print("IMPORTED", flush=True)
    sys.stdin.readline()
    result = run_load(
        base_url,
        [spec_payload(spec)],
        OpenLoop(profile, seed=args["seed"]),
        processes=args["processes"],
        grace_s=args.get("grace_s", 30.0),
    )
    errors = [r["error"] for r in result.records if r.get("error")]
    out = {"check": dataclasses.asdict(result.check), "n": len(result.records), "errors": errors}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
