"""`forge check`: run what `forge compile` builds, and the imported IR, against eager."""

from __future__ import annotations

import argparse
from typing import Any

from forge.frontend.checkpoint import add_loading_flags, loading_options
from forge.support import flags


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "check", help="run the compiled executable and the imported IR against eager"
    )
    parser.add_argument("models", nargs="+")
    parser.add_argument("--tiny", action="store_true")
    add_loading_flags(parser)
    parser.add_argument("--seq", type=flags.count, default=128)
    parser.add_argument("--inputs", type=int, default=3, help="random inputs per model")
    parser.add_argument(
        "--optimize",
        action="store_true",
        help="run npu-optimize before executing the IR with the reference executor",
    )


def run(ns: argparse.Namespace) -> int:
    """Two comparisons per model, each with eager on the same random inputs and judged
    by the one rule (`forge.runtime.agreement`): `compiled`, the executable `forge compile`
    builds (NNFactory segments and CPU steps, fp32, compiled afresh: the check is of the
    compiler, not of a cache entry), and `reference`, the imported IR run by the
    reference executor. Either failing fails the check."""
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.devtools.numerics import samples
    from forge.frontend.loading import capture_and_import, load_model
    from forge.runtime.agreement import judge_samples
    from forge.runtime.compile import compile_model
    from forge.runtime.reference import ReferenceExecutor

    failed = 0
    for name in ns.models:
        loaded = load_model(name, ns.tiny, ns.seq, **loading_options(ns))
        compiled, _ = compile_model(loaded.model, loaded.args, loaded.kwargs, cache=False)
        _, program = capture_and_import(loaded)
        stage = "imported"
        if ns.optimize:
            from forge.transforms.npu_optimize import optimize

            optimize(program.module)
            program.module.verify()
            stage = "optimized"
        reference = ReferenceExecutor(program.function, program.weights, len(program.input_names))
        for label, executor in (("compiled", compiled), (f"reference, {stage}", reference)):
            seen = samples(
                loaded.model,
                executor,
                loaded.args,
                loaded.kwargs,
                executor.input_names,
                ns.inputs,
            )
            agree, verdict = judge_samples(loaded.model, seen, loaded.kwargs, "fp32")
            failed += not verdict.ok
            print(
                f"{name} ({label}): {verdict.word} over {ns.inputs} random inputs "
                f"(seq {ns.seq}): {verdict.rule}, top-1 agreement {agree.top1 * 100:.2f}%",
                flush=True,
            )
    return 1 if failed else 0
