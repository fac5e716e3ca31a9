"""`forge ablate`: the pipeline with each pass removed in turn."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from forge.dialects.precisions import PROGRAM_PRECISIONS
from forge.frontend.checkpoint import add_loading_flags, loading_options
from forge.support import flags

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from forge.frontend.loading import Program


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("ablate", help="the pipeline with each pass removed in turn")
    parser.add_argument("models", nargs="+")
    parser.add_argument("--tiny", action="store_true")
    add_loading_flags(parser)
    parser.add_argument("--seq", type=flags.count, default=128)
    parser.add_argument("--precision", default="fp16", choices=PROGRAM_PRECISIONS)
    parser.add_argument("--passes", help="comma-separated passes to remove (default: all)")
    parser.add_argument("--latency", action="store_true", help="also run each variant")
    parser.add_argument("--runs", type=int, default=3, help="timed runs with --latency")
    parser.add_argument("--cost-model", help="weights JSON (default: calibrated, else unit)")


def run(ns: argparse.Namespace) -> int:
    """`forge ablate MODEL... [--tiny] [--seq N] [--precision P] [--passes a,b] [--latency]`."""
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.frontend.loading import load_program
    from forge.runtime.precision import program_fp16_weights
    from forge.support.diagnostics import ForgeError
    from forge.tuning.ablate import ABLATIONS, ablate
    from forge.tuning.cost import CostModel

    if ns.runs < 1:
        raise ForgeError("--runs must be at least 1")
    passes = tuple(p for p in ns.passes.split(",") if p) if ns.passes else ABLATIONS
    model = CostModel.current(ns.cost_model)
    print(f"cost model: {model.describe()}")
    for reference in ns.models:
        program = load_program(reference, ns.tiny, ns.seq, ns.latency, **loading_options(ns))
        mixed = None
        if ns.precision == "mixed":
            mixed, note = program_fp16_weights(program)
            print(note)
        measure = eager = None
        if ns.latency:
            eager = _eager_ms(program.loaded, ns.runs)
            measure = _measurer(program, ns.precision, ns.runs)
        report = ablate(
            program.name,
            program.module,
            program.num_inputs,
            passes,
            ns.precision,
            model,
            measure,
            eager,
            program.seconds,
            mixed,
        )
        print(report.format(), flush=True)
    return 0


def _measurer(
    program: Program, precision: str, runs: int
) -> Callable[[ModuleOp], tuple[float, float]]:
    from forge.dialects.context import entry_function
    from forge.frontend.loading import ordered_inputs
    from forge.runtime.executor import CompiledNPUExecutor
    from forge.tuning.ablate import mean_ms

    loaded = program.loaded

    def measure(module: ModuleOp) -> tuple[float, float]:
        executor = CompiledNPUExecutor(  # at the precision the pipeline recorded
            entry_function(module), program.weights, program.num_inputs
        )
        inputs = ordered_inputs(loaded.model, loaded.args, loaded.kwargs, executor.input_names)
        return mean_ms(lambda: executor(*inputs), runs), executor.build_seconds

    return measure


def _eager_ms(loaded: Any, runs: int) -> float:
    import torch

    from forge.tuning.ablate import mean_ms

    with torch.no_grad():
        return mean_ms(lambda: loaded.model(*loaded.args, **loaded.kwargs), runs)
