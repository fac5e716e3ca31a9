"""`forge import`: capture a model and print its npu IR."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from forge.frontend.checkpoint import add_loading_flags, loading_options
from forge.support import flags
from forge.support.files import atomic_write


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("import", help="capture a model and print its npu IR")
    parser.add_argument(
        "model", help="a built-in model name, checkpoint directory or path/to/file.py:factory"
    )
    parser.add_argument(
        "--seq", type=flags.count, default=128, help="sequence length (default 128)"
    )
    parser.add_argument("--tiny", action="store_true", help="the tiny variant of a built-in model")
    add_loading_flags(parser)
    parser.add_argument(
        "--program",
        choices=("forward", "prefill", "decode"),
        default="forward",
        help="forward: one pass over --seq tokens (default); prefill/decode: the static "
        "KV-cache programs `forge generate` compiles (a causal LM)",
    )
    parser.add_argument(
        "--capacity", type=int, default=128, help="cache positions (prefill/decode)"
    )
    parser.add_argument(
        "--prompt-capacity", type=int, default=32, help="tokens per prefill (prefill/decode)"
    )
    parser.add_argument("-o", "--output", help="write the IR here instead of stdout")


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.frontend.loading import Loaded, capture_and_import, load_model
    from forge.frontend.static_cache import capture_programs

    loaded = load_model(ns.model, ns.tiny, ns.seq, **loading_options(ns))
    if ns.program != "forward":
        programs = capture_programs(loaded.model, ns.capacity, ns.prompt_capacity)
        kwargs = programs.prefill_kwargs if ns.program == "prefill" else programs.decode_kwargs
        loaded = Loaded(f"{loaded.name} {ns.program}", programs.wrapper, (), kwargs)
    captured, program = capture_and_import(loaded)
    text = str(program.module) + "\n"
    if ns.output:
        with atomic_write(ns.output) as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    for note in program.notes:
        print(f"note: {note}", file=sys.stderr)
    print(
        f"{loaded.name}: {program.op_count()} ops, {len(program.weight_names)} weight arguments; "
        f"torch.export {captured.export_seconds:.3f} s, import {program.import_seconds:.3f} s",
        file=sys.stderr,
    )
    return 0
