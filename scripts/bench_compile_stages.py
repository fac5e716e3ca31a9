"""Forge's own compile stages against model size: the growth table of docs/compile-time.md.

For each model: capture once (torch.export, not timed here), then import + forge-pipeline
(Phase 2, then Phases 3-4 at `--precision`) run `--runs` times in this one process on a
fresh import each time. The first run (cold: first use of every pass and pattern in the
process) is printed apart; the table's columns are medians of the runs after it.

Models are built on the meta device (`--device meta`, the default): the stages read only
shapes and dtypes, so no weights are allocated and Llama-3.1-8B fits.

    .venv/bin/python scripts/bench_compile_stages.py [MODEL...] [--runs 5] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import sys
import time
from dataclasses import dataclass

from forge.support.host import cpu_model

DEFAULT_MODELS = ("gpt2", "qwen2-0.5b", "llama-3.2-1b", "llama-3.1-8b")


@dataclass
class Run:
    ops: int
    import_ms: float
    phase2_ms: float
    phase34_ms: float
    cpu_ms: float
    """Process CPU time of the three stages (the wall time minus waiting for a core)."""

    @property
    def total_ms(self) -> float:
        return self.import_ms + self.phase2_ms + self.phase34_ms


def one_run(captured: object, precision: str) -> Run:
    """Import and forge-pipeline, timed the way `forge compile` reports them."""
    from forge.frontend.importer import import_program
    from forge.transforms.forge_pipeline import plan

    cpu = time.process_time()
    program = import_program(captured)  # type: ignore[arg-type]
    cpu = time.process_time() - cpu
    ops = program.op_count()  # imported ops (not timed)
    cpu -= time.process_time()
    start = time.perf_counter()
    report = plan(program.module, precision=precision)
    seconds = time.perf_counter() - start
    cpu += time.process_time()
    phase2 = seconds - report.phase34_seconds
    return Run(
        ops,
        program.import_seconds * 1e3,
        phase2 * 1e3,
        report.phase34_seconds * 1e3,
        cpu * 1e3,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(DEFAULT_MODELS))
    parser.add_argument("--runs", type=int, default=5, help="timed runs after the cold one")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--device", choices=("meta", "cpu"), default="meta")
    parser.add_argument("--precision", default="fp32", help="forge-pipeline's precision")
    parser.add_argument("--profile", action="store_true", help="cProfile one warm run per model")
    ns = parser.parse_args(argv)
    if ns.runs < 1:
        parser.error("--runs must be at least 1")

    from forge.frontend import models
    from forge.frontend.capture import capture

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{cpu_model()}, {os.cpu_count()} CPUs, load average {load}; median of {ns.runs} "
        f"runs after a cold one, {ns.device} device, seq {ns.seq}, precision {ns.precision}"
    )
    header = (
        f"{'model':<14}{'ops':>7}{'import ms':>11}{'phase 2 ms':>12}{'phases 3-4 ms':>15}"
        f"{'total ms':>10}{'us/op':>8}{'cpu ms':>8}{'cold total ms':>15}"
    )
    print(header, flush=True)
    for name in ns.models:
        model = models.build_model(name, device=ns.device)
        args, kwargs = models.example_inputs(model, seq=ns.seq)
        captured = capture(model, args, example_kwargs=kwargs)
        gc.collect()
        cold = one_run(captured, ns.precision)
        runs = [one_run(captured, ns.precision) for _ in range(ns.runs)]
        med = Run(
            cold.ops,
            statistics.median(r.import_ms for r in runs),
            statistics.median(r.phase2_ms for r in runs),
            statistics.median(r.phase34_ms for r in runs),
            statistics.median(r.cpu_ms for r in runs),
        )
        print(
            f"{name:<14}{med.ops:>7}{med.import_ms:>11.1f}{med.phase2_ms:>12.1f}"
            f"{med.phase34_ms:>15.1f}{med.total_ms:>10.1f}{med.total_ms * 1e3 / med.ops:>8.0f}"
            f"{med.cpu_ms:>8.0f}{cold.total_ms:>15.1f}",
            flush=True,
        )
        if ns.profile:
            profiler = cProfile.Profile()
            profiler.runcall(one_run, captured, ns.precision)
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
        del model, captured
        gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main())
