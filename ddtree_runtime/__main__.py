"""``python -m ddtree_runtime {selftest|serve} ...`` and the ``ddtree-runtime`` console script."""

from __future__ import annotations

import os
import sys

USAGE = "usage: ddtree_runtime {selftest,serve,export} [options]"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "selftest":
        from ddtree_runtime import selftest

        return selftest.main(rest)
    if command == "serve":
        # Before torch (and its OpenMP runtime, which reads this once, at load) is imported. A
        # server shares its cores with other processes (the client, a second server, the test
        # suite); OpenMP's default wait spins a thread between parallel regions, and under
        # such contention a spinning team burns its share of the cores waiting on a descheduled
        # peer: on 2 cores beside a 2-thread matmul loop, b4 k1 ran at 2.4-3.1 tok/s spinning
        # and 15.0-15.5 passive. On an idle machine passive costs a third (17.5-17.8 against
        # 26.0-26.4 tok/s; bench/cpu_contention.py, docs/runtime-api.md). A value the user set
        # (OMP_WAIT_POLICY, or GOMP_SPINCOUNT, which libgomp puts first) is kept.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from ddtree_runtime.server import serve  # torch and the server load only for `serve`

        return int(serve.main(rest) or 0)
    if command == "export":
        from ddtree_runtime import export

        return export.main(rest)
    print(f"ddtree_runtime: error: unknown command {command!r}; {USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
