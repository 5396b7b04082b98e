"""Tests of `sweeper.bisect`. Not named `bisect`: the fake servers run as scripts from
tests/sweeper, whose directory is then first on sys.path, and a `bisect` package there would
shadow the standard library's (which `random`, and so uvicorn, imports)."""
