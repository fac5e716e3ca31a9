"""`forge`: the ML engineer's entry point.

  forge import MODEL [--seq N] [--tiny] [-o FILE]   capture + import, print the npu IR
  forge models [--tiny] [--seq N]                   op counts and capture/import times
  forge check MODEL... [--tiny] [--optimize]        imported (optimized) IR vs eager PyTorch
  forge optimize [MODEL...] [--tiny]                Phase 2 report, node reduction, fusion
  forge plan [MODEL...] [--tiny]                    Phases 3-4: placement, buffers, transitions
  forge compile [MODEL] [--precision P] [--runs K]  compile to NNFactory, run, time vs eager
  forge generate MODEL [--prompt T] [--check]       static-cache prefill + decode, streamed tokens
  forge bench [MODEL] [--backends B,...]            vs eager, inductor, OpenVINO, ONNX Runtime
  forge ablate MODEL...                             the pipeline with each pass removed
  forge autotune MODEL...                           cost-model search over alpha/layout/precision
  forge calibrate                                   fit the cost model to measured latency
  forge report [--bench FILE]                       PNG plots of passes, buffers, bench
  forge fuzz-ir / fuzz-models [--cases N]           differential and IR fuzzing
  forge coverage [--types T,...] [--json FILE]      every transformers decoder type vs eager
  forge doctor [--profile]                          NNFactory smoke test; the host profile
  forge cache ls|clear [--older-than AGE]           the compile cache's entries

MODEL is one of the built-in names (`forge models` lists them), a local Hugging Face
checkpoint directory (safetensors; `--allow-pickle`, `--trust-remote-code` to loosen), or
`path/to/file.py:factory`, where `factory()` returns `(model, example_args)` or
`(model, example_args, example_kwargs)`, or a transformers causal LM.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from forge.commands import (
    ablate,
    autotune,
    bench,
    cache,
    calibrate,
    check,
    compile,
    coverage,
    doctor,
    fuzz_ir,
    fuzz_models,
    generate,
    import_,
    models,
    optimize,
    plan,
    report,
)
from forge.support.diagnostics import ForgeError, one_line
from forge.support.diagnostics import report as report_error

TOOL = "forge"

COMMANDS: dict[str, ModuleType] = {
    "import": import_,
    "models": models,
    "check": check,
    "optimize": optimize,
    "plan": plan,
    "compile": compile,
    "generate": generate,
    "bench": bench,
    "ablate": ablate,
    "autotune": autotune,
    "calibrate": calibrate,
    "report": report,
    "fuzz-ir": fuzz_ir,
    "fuzz-models": fuzz_models,
    "coverage": coverage,
    "doctor": doctor,
    "cache": cache,
}
"""Command name -> its module under `forge.commands` (each has `add_parser` and `run`).
A new command is one module there and one line here."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ForgeError(one_line(message))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="forge", description="Forge graph compiler")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        ns = build_parser().parse_args(argv)
        _quiet_transformers()
        return COMMANDS[ns.command].run(ns)
    except ForgeError as e:
        return report_error(e, TOOL)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`forge ... | head`): not an error, as with forge-opt.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:
        if os.environ.get("FORGE_TRACEBACK"):
            raise
        return report_error(
            ForgeError(
                f"internal error: {type(e).__name__}: {one_line(str(e))} "
                "(FORGE_TRACEBACK=1 shows the trace)"
            ),
            TOOL,
        )


def _quiet_transformers() -> None:
    # Only when transformers is installed; importing it is what the commands do anyway.
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except ImportError:
        pass


if __name__ == "__main__":
    sys.exit(main())
