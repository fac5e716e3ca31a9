"""`forge fuzz-models`: random PyTorch modules vs eager, compiled."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("fuzz-models", help="random PyTorch modules vs eager, compiled")
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--save-dir",
        default=None,
        help="where shrunk failures go as JSON specs (default test/python/regressions/models)",
    )
    parser.add_argument("--no-shrink", action="store_true", help="report failures unshrunk")


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from pathlib import Path

    from forge.devtools.fuzz_models import REGRESSIONS, fuzz_models

    root = Path(__file__).resolve().parents[2]  # the repository
    save_dir = Path(ns.save_dir) if ns.save_dir else root / REGRESSIONS
    result = fuzz_models(ns.cases, ns.seed, save_dir=save_dir, shrink_failures=not ns.no_shrink)
    print(result.summary())
    for failure in result.failures:
        print(f"  {failure.format()}")
    return 1 if result.failures else 0
