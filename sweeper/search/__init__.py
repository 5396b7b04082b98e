"""Searching the grid for the best server config under the exactness constraint.

`SearchOrder` hands the runner one server config at a time (the runner's `order` hook), asks the
spec's strategy (`strategies.py`, `tpe.py`) which config comes next from the scores of those
already measured (`sweeper.analysis.objective`), and stops at `search.stop`. `preview` is what
`plan` / `run --dry-run` print about it.
"""

from sweeper.search.driver import SearchOrder, SearchStateError, resumable_search
from sweeper.search.preview import plan_problems, preview

__all__ = ["SearchOrder", "SearchStateError", "plan_problems", "preview", "resumable_search"]
