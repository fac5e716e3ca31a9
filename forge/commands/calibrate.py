"""`forge calibrate`: fit the cost model to latencies measured here."""

from __future__ import annotations

import argparse
import time
from typing import Any

from forge.support import flags
from forge.support.campaign import Campaign, add_ray_arguments
from forge.support.diagnostics import ForgeError


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("calibrate", help="fit the cost model to latencies measured here")
    parser.add_argument("--points", type=int, default=144, help="(model, config) points to time")
    parser.add_argument("--models", help="comma-separated built-in models (default: all six, tiny)")
    parser.add_argument("--seqs", default="128", help="sequence lengths (default 128)")
    parser.add_argument("--depths", default="1,2,4", help="layer multipliers of the tiny models")
    parser.add_argument("--full", action="store_true", help="also full-size gpt2")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--runs", type=int, default=5, help="calls per point per round")
    parser.add_argument("--holdout", type=float, default=0.3, help="held-out configurations")
    parser.add_argument("--seed", type=flags.seed, default=0)
    parser.add_argument(
        "-o", "--output", help="weights JSON (default $FORGE_COST_MODEL or ~/.cache)"
    )
    parser.add_argument("--no-save", action="store_true", help="report only")
    add_ray_arguments(parser, exclusive=True)


def run(ns: argparse.Namespace) -> int:
    """`forge calibrate [--points N] [--models M,...] [--seqs 32,64,128] [--depths 1,4]
    [--full] [--rounds R] [--runs K] [--seed S] [--holdout F] [--output FILE] [--no-save]`."""
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.tuning.calibrate import MODELS, calibrate
    from forge.tuning.cost import default_path

    seqs, depths = _ints(ns.seqs, "--seqs"), _ints(ns.depths, "--depths")
    models = [m for m in ns.models.split(",") if m] if ns.models else list(MODELS)
    if ns.points < 4:
        raise ForgeError("--points must be at least 4")
    start = time.perf_counter()
    report = calibrate(
        models,
        seqs,
        ns.points,
        ns.full,
        depths,
        ns.rounds,
        ns.runs,
        ns.holdout,
        ns.seed,
        progress=lambda line: print(line, flush=True),
        campaign=Campaign.from_args(ns),
    )
    print(report.format())
    print(
        f"time: {time.perf_counter() - start:.1f} s (building {report.build_seconds:.1f} s, "
        f"measuring {report.measure_seconds:.1f} s)"
    )
    if ns.no_save:
        print("not saved (--no-save)")
        return 0
    path = report.model.save(ns.output) if ns.output else report.model.save(default_path())
    print(f"saved {path}" + ("" if ns.output else " (forge autotune and forge ablate use it)"))
    return 0


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s]
    except ValueError as e:
        raise ForgeError(f"{flag} must be comma-separated integers, got '{text}'") from e
