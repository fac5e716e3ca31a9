"""`forge models`: op counts and capture/import times of the models."""

from __future__ import annotations

import argparse
from typing import Any

from forge.frontend.checkpoint import add_loading_flags, loading_options
from forge.support import flags


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("models", help="op counts and capture/import times of the models")
    parser.add_argument("--tiny", action="store_true")
    add_loading_flags(parser)
    parser.add_argument("--seq", type=flags.count, default=128)
    parser.add_argument("names", nargs="*", help="models to include (default: all six)")


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.frontend import models
    from forge.frontend.loading import capture_and_import, load_model

    names = ns.names or list(models.SPECS)
    print(
        f"{'model':<14}{'device':>7}{'params':>15}{'FX nodes':>10}{'npu ops':>9}"
        f"{'attn layers':>13}{'export s':>10}{'import s':>10}"
    )
    for name in names:
        spec = models.get_spec(name)
        loaded = load_model(name, ns.tiny, ns.seq, **loading_options(ns))
        params = sum(p.numel() for p in loaded.model.parameters())
        captured, program = capture_and_import(loaded)
        device = next(loaded.model.parameters()).device.type
        fx_nodes = sum(1 for n in captured.exported.graph.nodes if n.op == "call_function")
        print(
            f"{name:<14}{device:>7}{params:>15,}{fx_nodes:>10}{program.op_count():>9}"
            f"{spec.attention_layers(ns.tiny):>13}{captured.export_seconds:>10.3f}"
            f"{program.import_seconds:>10.3f}",
            flush=True,
        )
    return 0
