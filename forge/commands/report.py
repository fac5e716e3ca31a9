"""`forge report`: PNG plots: passes, buffers, transitions, bench results."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from forge.support import flags
from forge.support.diagnostics import ForgeError


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("report", help="PNG plots: passes, buffers, transitions, bench results")
    parser.add_argument(
        "--model", action="append", help="a model to plan and plot (repeatable; default gpt2)"
    )
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--seq", type=flags.count, default=128)
    parser.add_argument("--bench", help="results of `forge bench --json FILE` to plot")
    parser.add_argument("--bench-only", action="store_true", help="plot --bench only, no model")
    parser.add_argument("-o", "--output", default="build/report", help="directory for the PNGs")


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.devtools.report import render

    if ns.seq < 1:
        raise ForgeError("--seq must be at least 1")
    bench = Path(ns.bench) if ns.bench else None
    names = [] if ns.bench_only else (ns.model or ["gpt2"])
    if not names and bench is None:
        raise ForgeError("--bench-only needs --bench FILE.json")
    for path in render(names, ns.tiny, ns.seq, bench, Path(ns.output)):
        print(path)
    return 0
