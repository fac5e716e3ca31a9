"""`forge plan`: Phases 3-4: devices, buffers, transitions."""

from __future__ import annotations

import argparse
from typing import Any

from forge.frontend.checkpoint import add_loading_flags, loading_options
from forge.support import flags


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("plan", help="Phases 3-4: devices, buffers, transitions")
    parser.add_argument("names", nargs="*", help="models (default: all six)")
    parser.add_argument("--tiny", action="store_true")
    add_loading_flags(parser)
    parser.add_argument("--seq", type=flags.count, default=128)


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.frontend import models
    from forge.frontend.loading import capture_and_import, load_model
    from forge.transforms.forge_pipeline import plan

    mib = 1 << 20
    print(
        f"{'model':<14}{'npu/cpu ops':>12}{'vregs':>7}{'owning':>8}{'buffers':>8}{'rho_buf':>8}"
        f"{'planned MiB':>12}{'bound MiB':>10}{'ratio':>7}{'transitions':>13}{'phase3-4 ms':>12}"
    )
    for name in ns.names or list(models.SPECS):
        loaded = load_model(name, ns.tiny, ns.seq, **loading_options(ns))
        _, program = capture_and_import(loaded)
        report = plan(program.module)
        program.module.verify()
        p, s, a = report.placement, report.schedule, report.allocation
        print(
            f"{name:<14}{f'{p.npu_ops}/{p.cpu_ops}':>12}{a.vregs:>7}{a.allocated_values:>8}"
            f"{a.buffers:>8}{a.rho_buf:>8.3f}{a.planned_bytes / mib:>12.2f}"
            f"{a.lower_bound_bytes / mib:>10.2f}{a.ratio:>7.3f}"
            f"{f'{s.transitions_before} -> {s.transitions_after}':>13}"
            f"{report.phase34_seconds * 1e3:>12.1f}",
            flush=True,
        )
    return 0
