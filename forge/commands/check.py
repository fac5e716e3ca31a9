"""`forge check`: execute the imported IR and compare with eager."""

from __future__ import annotations

import argparse
from typing import Any

from forge import flags
from forge.frontend.checkpoint import add_loading_flags, loading_options


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("check", help="execute the imported IR and compare with eager")
    parser.add_argument("models", nargs="+")
    parser.add_argument("--tiny", action="store_true")
    add_loading_flags(parser)
    parser.add_argument("--seq", type=flags.count, default=128)
    parser.add_argument("--inputs", type=int, default=3, help="random inputs per model")
    parser.add_argument(
        "--optimize", action="store_true", help="run npu-optimize before executing the IR"
    )


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.devtools.numerics import compare_logits
    from forge.frontend.loading import capture_and_import, load_model
    from forge.runtime.reference import ReferenceExecutor

    failed = 0
    for name in ns.models:
        loaded = load_model(name, ns.tiny, ns.seq, **loading_options(ns))
        _, program = capture_and_import(loaded)
        stage = "imported"
        if ns.optimize:
            from forge.transforms.npu_optimize import optimize

            optimize(program.module)
            program.module.verify()
            stage = "optimized"
        executor = ReferenceExecutor(program.function, program.weights, len(program.input_names))
        worst = compare_logits(loaded, executor, ns.inputs)
        ok = worst.max_abs <= 1e-5 and worst.top1 == 1.0
        failed += not ok
        print(
            f"{name} ({stage}): {'ok' if ok else 'MISMATCH'} over {ns.inputs} random inputs "
            f"(seq {ns.seq}): "
            f"fp32 max-abs logit diff {worst.max_abs:.3e} (limit 1e-05), "
            f"top-1 agreement {worst.top1 * 100:.2f}%",
            flush=True,
        )
    return 1 if failed else 0
