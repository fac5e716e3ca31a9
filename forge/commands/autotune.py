"""`forge autotune`: cost-model grid search over Phase-2 options."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from forge.frontend.checkpoint import add_loading_flags, loading_options
from forge.support import flags
from forge.support.campaign import Campaign, add_ray_arguments

if TYPE_CHECKING:
    from forge.tuning.autotune import Trial


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("autotune", help="cost-model grid search over Phase-2 options")
    parser.add_argument("models", nargs="+")
    parser.add_argument("--tiny", action="store_true")
    add_loading_flags(parser)
    parser.add_argument("--seq", type=flags.count, default=128)
    parser.add_argument("--full", action="store_true", help="also iterations 1 and 3 (135)")
    parser.add_argument("--top", type=int, default=10, help="ranked rows to print")
    parser.add_argument("--all", action="store_true", help="print every configuration")
    parser.add_argument("--cost-model", help="weights JSON (default: calibrated, else unit)")
    parser.add_argument(
        "--latency",
        type=int,
        default=0,
        metavar="K",
        help="compile the K best-scored configurations and the default and measure them",
    )
    parser.add_argument(
        "--runs", type=int, default=20, help="--latency: interleaved timing rounds (default 20)"
    )
    add_ray_arguments(parser, exclusive=True)


def run(ns: argparse.Namespace) -> int:
    """`forge autotune MODEL... [--tiny] [--seq N] [--full] [--top K] [--latency K]`."""
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.frontend.loading import load_program
    from forge.runtime.precision import program_fp16_weights
    from forge.support.diagnostics import ForgeError
    from forge.tuning.autotune import (
        DEFAULT_ITERATIONS,
        format_latency,
        latency_check,
        measure_interleaved,
        measure_on,
        sweep,
    )
    from forge.tuning.cost import CostModel

    if ns.latency < 0 or ns.runs < 1:
        raise ForgeError("--latency must be at least 0 and --runs at least 1")
    model = CostModel.current(ns.cost_model)
    print(f"cost model: {model.describe()}")
    for reference in ns.models:
        program = load_program(
            reference, ns.tiny, ns.seq, real_weights=False, **loading_options(ns)
        )
        mixed, note = program_fp16_weights(program)
        print(note)
        report = sweep(
            program.module,
            full=ns.full,
            model=model,
            num_inputs=program.num_inputs,
            consume=True,
            mixed=mixed,
        )
        s = report.stats
        axes = (
            "alpha x layout x precision x iterations"
            if ns.full
            else f"alpha x layout x precision at iterations={DEFAULT_ITERATIONS}"
        )
        print(
            f"== {program.name}: {len(report.trials)} configurations ({axes}) in "
            f"{report.seconds * 1e3:.0f} ms (CPU {report.cpu_seconds * 1e3:.0f} ms): "
            f"{s.pass_runs} pass runs (one at a time: "
            f"{_naive_runs(report.trials)}), {s.clones} clones, {s.states} distinct graphs"
        )
        print(report.format(None if ns.all else ns.top))
        d, b = report.default, report.best
        print(f"default  {d.config.format():<44} score {d.score:.2f}")
        print(
            f"best     {b.config.format():<44} score {b.score:.2f}, "
            f"gain over default {report.gain * 100:.2f}%, FGR {report.fgr:.3f}",
            flush=True,
        )
        if ns.latency:
            campaign = Campaign.from_args(ns)
            how = (
                f"{ns.runs} interleaved rounds"
                if not campaign.distributed
                else f"{ns.runs} runs each on {campaign.describe(exclusive=True)}"
            )
            print(
                f"measured latency: the {ns.latency} best-scored configuration(s) and the "
                f"default, compiled by compile_model, {how}",
                flush=True,
            )
            measure = measure_on(campaign) if campaign.distributed else measure_interleaved
            rows = latency_check(
                report,
                reference,
                ns.tiny,
                ns.seq,
                ns.latency,
                ns.runs,
                measure=measure,
                **loading_options(ns),
            )
            print(format_latency(rows, ns.runs), flush=True)
    return 0


def _naive_runs(trials: Sequence[Trial]) -> int:
    from forge.transforms.npu_optimize import PHASE2_PASSES

    """Pass runs of optimizing each (alpha, layout, iterations) on its own, all rounds run."""
    return len(PHASE2_PASSES) * sum(s[2] for s in {t.config.structure for t in trials})
