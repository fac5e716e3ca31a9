"""`forge`: the ML engineer's entry point (compile, import, bench arrive with later phases)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from forge.diagnostics import ForgeError, report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forge", description="Forge graph compiler")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="check that NNFactory and the toolchain work on this machine")
    return parser


def cmd_doctor() -> int:
    from forge.nnfactory import smoke_test

    result = smoke_test()
    print(result.summary())
    return 0 if result.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "doctor":
            return cmd_doctor()
    except ForgeError as e:
        return report(e, "forge")
    return 1


if __name__ == "__main__":
    sys.exit(main())
