"""`forge optimize`: Phase 2 per-pass report and node reduction."""

from __future__ import annotations

import argparse
from typing import Any

from forge.frontend.checkpoint import add_loading_flags, loading_options
from forge.support import flags


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("optimize", help="Phase 2 per-pass report and node reduction")
    parser.add_argument("names", nargs="*", help="models (default: all six)")
    parser.add_argument("--tiny", action="store_true")
    add_loading_flags(parser)
    parser.add_argument("--seq", type=flags.count, default=128)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--layout", default="auto", choices=["auto", "contiguous", "channels-last"])
    parser.add_argument("--quiet", action="store_true", help="only the summary table")


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.dialects import npu
    from forge.frontend import models
    from forge.frontend.loading import capture_and_import, load_model
    from forge.transforms.npu_optimize import optimize

    names = ns.names or list(models.SPECS)
    summary = []
    for name in names:
        loaded = load_model(name, ns.tiny, ns.seq, **loading_options(ns))
        _, program = capture_and_import(loaded)
        report = optimize(program.module, ns.iterations, ns.alpha, ns.layout)
        program.module.verify()
        fused = sum(1 for op in program.module.walk() if isinstance(op, npu.SDPAOp))
        layers = models.get_spec(name).attention_layers(ns.tiny) if name in models.SPECS else 0
        summary.append((name, report, fused, layers))
        if not ns.quiet:
            print(f"== {name}\n{report.format()}\n", flush=True)
    print(
        f"{'model':<14}{'ops before':>11}{'ops after':>10}{'reduction':>11}{'sdpa':>6}"
        f"{'attn layers':>13}{'optimize ms':>13}"
    )
    for name, report, fused, layers in summary:
        print(
            f"{name:<14}{report.ops_before:>11}{report.ops_after:>10}"
            f"{report.reduction * 100:>10.1f}%{fused:>6}{layers:>13}{report.seconds * 1e3:>13.1f}"
        )
    mean = sum(r.reduction for _, r, _, _ in summary) / len(summary)
    print(f"{'average':<14}{'':>21}{mean * 100:>10.1f}%")
    unfused = [name for name, _, fused, layers in summary if fused != layers]
    return 1 if unfused else 0
