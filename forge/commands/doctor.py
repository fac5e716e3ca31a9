"""`forge doctor`: build, compile and run a real NNFactory graph here; show the host profile."""

from __future__ import annotations

import argparse
from typing import Any

from forge.support.diagnostics import ForgeError


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("doctor", help="build, compile and run a real NNFactory graph here")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="load this host's profile (measure it when absent or stale) and print its decisions",
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="with --profile: measure again even if cached"
    )


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.runtime.doctor import profile_summary, smoke_test

    if ns.rebuild and not ns.profile:
        raise ForgeError("--rebuild goes with --profile")
    result = smoke_test()
    print(result.summary())
    print(profile_summary(measure=ns.profile, rebuild=ns.rebuild))
    return 0 if result.ok else 1
