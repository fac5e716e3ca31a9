"""`forge doctor`: build, compile and run a real NNFactory graph here."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    sub.add_parser("doctor", help="build, compile and run a real NNFactory graph here")


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.runtime.doctor import smoke_test

    result = smoke_test()
    print(result.summary())
    return 0 if result.ok else 1
