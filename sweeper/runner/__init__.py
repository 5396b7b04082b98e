"""The runner: the one place that knows the order of a sweep (`Runner`, in `sweep.py`).

Per host (hosts in parallel, one thread each): for each server config, AR baseline first:
stop the previous instance -> start -> readiness + identity -> negotiation (`start.py`) -> for
each request config: measure -> judge -> record (`measuring.py`, `recording.py`). A Slurm host's
configs are shared by its workers, one allocation each (`sweeper.workers`). A point that cannot
be measured (start failure, readiness timeout, identity mismatch, request errors) is recorded as
failed with its reason and log tail, and the sweep goes on. A search (`order` hook) hands out
configs one at a time, each after the last is recorded. Points already complete in the run
directory are skipped (resume). On a stop request (Ctrl-C) the point in flight is discarded,
never recorded half, and the server is stopped.
"""

from sweeper.runner.sweep import Runner

__all__ = ["Runner"]
