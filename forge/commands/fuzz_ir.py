"""`forge fuzz-ir`: mutated .mlir through forge-opt: no tracebacks."""

from __future__ import annotations

import argparse
from typing import Any

from forge.support import flags
from forge.support.campaign import Campaign, add_ray_arguments


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("fuzz-ir", help="mutated .mlir through forge-opt: no tracebacks")
    parser.add_argument("--cases", type=flags.size, default=200)
    parser.add_argument("--seed", type=flags.seed, default=0)
    parser.add_argument(
        "--mutate",
        choices=("ir", "pipeline"),
        default="ir",
        help="what to mutate: the repository's .mlir files (default) or pass pipeline strings",
    )
    parser.add_argument("--pipeline", default="forge-pipeline", help="the pipeline IR mutants run")
    parser.add_argument("--workdir", default="build/fuzz-ir", help="mutants and failures go here")
    parser.add_argument(
        "--save-regressions",
        action="store_true",
        help="also copy shrunk failures as lit tests to test/forge-opt/regressions",
    )
    parser.add_argument("--no-shrink", action="store_true", help="keep failures as found")
    parser.add_argument(
        "--timeout", type=flags.seconds, default=20, help="seconds per case (a hang)"
    )
    parser.add_argument(
        "--memory-mb",
        type=flags.size,
        help="memory a case may allocate, in MB (default 2048; 0: no cap); past it the "
        "case is an 'out of memory' finding",
    )
    add_ray_arguments(parser)


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from pathlib import Path

    from forge.tools.fuzz_ir import MEMORY_MB, REGRESSIONS, fuzz, fuzz_pipelines

    memory_mb = MEMORY_MB if ns.memory_mb is None else ns.memory_mb

    # On Ray a case that outlives its own alarm (a hang in native code) is cancelled.
    campaign = Campaign.from_args(ns, timeout=ns.timeout + 30)
    if ns.mutate == "pipeline":
        result = fuzz_pipelines(
            ns.cases, ns.seed, Path(ns.workdir), ns.timeout, campaign, memory_mb
        )
        print(result.summary())
        for outcome, where in result.failures:
            print(f"  {outcome}: {where}")
        return 1 if result.bad else 0
    root = Path(__file__).resolve().parents[2]  # the repository
    save_dir = root / REGRESSIONS if ns.save_regressions else None
    result = fuzz(
        root,
        ns.cases,
        ns.seed,
        ns.pipeline,
        Path(ns.workdir),
        ns.timeout,
        shrink=not ns.no_shrink,
        save_dir=save_dir,
        campaign=campaign,
        memory_mb=memory_mb,
    )
    print(result.summary())
    for outcome, where in result.failures:
        print(f"  {outcome}: {where}")
    for path in result.regressions:
        print(f"  shrunk: {path}")
    return 1 if result.bad else 0
