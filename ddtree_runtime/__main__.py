"""``python -m ddtree_runtime {selftest|serve} ...`` and the ``ddtree-runtime`` console script."""

from __future__ import annotations

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
        from ddtree_runtime.server import serve  # torch and the server load only for `serve`

        return int(serve.main(rest) or 0)
    if command == "export":
        from ddtree_runtime import export

        return export.main(rest)
    print(f"ddtree_runtime: error: unknown command {command!r}; {USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
