"""`forge-opt`: the `mlir-opt`/`xdsl-opt` of Forge.

Parses `.mlir` with the builtin, func, arith and npu dialects, runs a `-p` pipeline
of registered passes and prints the result. Every user error ends in one
`file:line:col: error: ...` line on stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import IO, NoReturn

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.arg_spec import ArgSpec, parse_spec
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    PassFailedException,
    VerifyException,
)
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from forge import xdsl_compat
from forge.diagnostics import ForgeError, one_line, op_error, parse_error, report
from forge.dialects.context import verify_functions
from forge.dialects.npu import NPU
from forge.files import AtomicFile
from forge.tools.emit_dot import module_to_dot
from forge.transforms import defined_in, get_all_passes
from forge.transforms.pattern_pass import collect_statistics, format_statistics

TOOL = "forge-opt"
xdsl_compat.apply()


class LocatingParser(Parser):
    """Records each op's source position as its location, as MLIR's parser does."""

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        try:
            op = super().parse_operation()
        except VerifyException as e:
            # An attribute or type that fails its verifier while the op is parsed (such
            # as `i9999999999`): point at the op, as any other parse error does.
            raise ParseError(start, one_line(str(e))) from e
        if isinstance(op.location, UnknownLoc):
            where = start.get_location()
            op.location = FileLineColLoc(
                StringAttr(where.file), IntAttr(where.line), IntAttr(where.col)
            )
        return op


def spec_error(e: ArgSpecParseError) -> str:
    """`Expected argument name here (column 5)` from xDSL's multi-line spec error."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    column = lines[1].rsplit(":", 1)[-1] if len(lines) > 1 else "?"
    return f"{lines[-1]} (column {column})"


def first_invalid_op(module: ModuleOp) -> tuple[Operation, Exception] | None:
    """The first op, in textual order, whose own verifier fails."""
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except Exception as e:
            return op, e
    return None


def verify_module(module: ModuleOp, after: str | None = None) -> None:
    try:
        module.verify()
        verify_functions(module)
    except ForgeError as e:
        suffix = f" (after pass '{after}')" if after else ""
        raise ForgeError(str(e.args[0]) + suffix, e.location) from e
    except Exception as e:
        found = first_invalid_op(module)
        suffix = f" (after pass '{after}')" if after else ""
        if found is None:
            raise ForgeError(one_line(str(e)) + suffix) from e
        op, error = found
        raise op_error(op, one_line(str(error)) + suffix) from e


TARGETS = ("mlir", "python")
"""Output targets that make sense for npu IR (`--emit=dot` draws the graph)."""


def expanded(passes: Sequence[ModulePass]) -> list[ModulePass]:
    """`passes` with every pass that is a fixed sequence of others (forge-pipeline)
    replaced by that sequence; passes that iterate (npu-optimize) stay themselves."""
    flat: list[ModulePass] = []
    for p in passes:
        if p.name == "forge-pipeline":  # by name: its module would import torch here
            flat.extend(expanded(p.passes()))  # type: ignore[attr-defined]
        else:
            flat.append(p)
    return flat


def dump_pipeline(passes: Sequence[ModulePass]) -> str:
    """MLIR's `--dump-pass-pipeline` text, and one comment per iterating pass naming
    the round it repeats."""
    flat = expanded(passes)
    specs = ",".join(str(p.pipeline_pass_spec(include_default=True)) for p in flat)
    lines = [f"Pass Manager with {len(flat)} passes:", f"builtin.module({specs})"]
    for p in flat:
        if p.name == "npu-optimize":
            round_ = ",".join(
                str(q.pipeline_pass_spec(include_default=True))
                for q in p.passes()  # type: ignore[attr-defined]
            )
            rounds = p.iterations  # type: ignore[attr-defined]
            lines.append(f"// {p.name} repeats, up to {rounds} rounds: {round_}")
    return "\n".join(lines)


def plugin_paths(argv: Sequence[str]) -> list[str]:
    """The files named by `--load-pass-plugin` (read before argparse runs: passes must be
    registered before the pipeline is parsed)."""
    paths = []
    for i, arg in enumerate(argv):
        if arg == "--load-pass-plugin" and i + 1 < len(argv):
            paths.append(argv[i + 1])
        elif arg.startswith("--load-pass-plugin="):
            paths.append(arg.split("=", 1)[1])
    return paths


def load_pass_plugin(path: str) -> list[type[ModulePass]]:
    """Import a Python file and return the passes it defines."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"forge_plugin_{abs(hash(path))}", path)
    if spec is None or spec.loader is None or not os.path.isfile(path):
        raise ForgeError(f"cannot load pass plugin '{path}': no such Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise ForgeError(f"{path}: {type(e).__name__}: {one_line(str(e))}") from e
    passes = [
        p for p in defined_in(module, ModulePass) if isinstance(getattr(p, "name", None), str)
    ]
    if not passes:
        raise ForgeError(f"{path} defines no ModulePass with a `name`")
    return passes


class ForgeOptMain(xDSLOptMain):
    version_format = "forge-opt (xdsl {xdsl_version})"

    def __init__(self, args: Sequence[str] | None = None):
        argv = list(sys.argv[1:] if args is None else args)
        self._plugin_passes = [p for path in plugin_paths(argv) for p in load_pass_plugin(path)]
        try:
            super().__init__(description="Forge modular optimizer driver", args=argv)
        except ArgSpecParseError as e:  # a malformed -t spec; a BaseException in xDSL
            raise ForgeError(f"invalid target: {spec_error(e)}") from e

    # ----------------------------------------------------------- registration

    def register_all_dialects(self) -> None:
        from xdsl.dialects.arith import Arith
        from xdsl.dialects.builtin import Builtin
        from xdsl.dialects.func import Func

        for dialect in (Builtin, Func, Arith, NPU):
            self.ctx.load_dialect(dialect)

    def register_all_passes(self) -> None:
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)
        for pass_class in self._plugin_passes:
            self.register_pass(pass_class.name, lambda c=pass_class: c)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        # xDSL's other targets (arm-asm, csl, riscv-asm, wat, ...) make no sense for npu IR
        for name in [n for n in self.available_targets if n not in TARGETS]:
            del self.available_targets[name]

        def python_target() -> type[Target]:
            # torch-heavy: imported only when used, so plain forge-opt starts fast.
            from forge.conversion.plan_to_python import PythonTarget

            return PythonTarget

        self.available_targets["python"] = python_target

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.error = self._usage_error  # type: ignore[method-assign]
        arg_parser.add_argument(
            "--print-ir-after-all",
            action="store_true",
            help="Print the IR to stderr after every pass (MLIR's --mlir-print-ir-after-all)",
        )
        arg_parser.add_argument(
            "--list-passes", action="store_true", help="List the registered passes and exit"
        )
        arg_parser.add_argument(
            "--dump-pass-pipeline",
            action="store_true",
            help="Print the pipeline to stderr, composite passes expanded and every option "
            "with its value (MLIR's --dump-pass-pipeline)",
        )
        arg_parser.add_argument(
            "--load-pass-plugin",
            action="append",
            metavar="FILE.py",
            help="Register the passes (ModulePass subclasses with a `name`) defined in FILE.py",
        )
        arg_parser.add_argument(
            "--verify-each",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="Verify the IR after every pass (default; --no-verify-each verifies only "
            "after parsing and at the end), naming the pass that broke it",
        )
        arg_parser.add_argument(
            "--emit",
            choices=("mlir", "dot", "python"),
            default="mlir",
            help="Output format: the IR (default), a Graphviz graph of each function, or "
            "the executor's plan as a Python program (as -t python)",
        )
        arg_parser.add_argument(
            "--check-numerics",
            action="store_true",
            help="Execute the IR before and after every pass on random inputs; name the "
            "first pass that changes the results",
        )
        arg_parser.add_argument(
            "--pass-statistics",
            action="store_true",
            help="Print, per Forge pass, rewrites, ops before/after and milliseconds (stderr)",
        )

    @staticmethod
    def _usage_error(message: str) -> NoReturn:
        raise ForgeError(one_line(message))

    # ---------------------------------------------------------------- driving

    def setup_pipeline(self) -> None:
        self._timings: list[tuple[str, float]] = []
        self._pass_start = 0.0
        try:
            self.pipeline = PassPipeline.parse_spec(
                self.available_passes, self.args.passes, self._after_pass
            )
        except ArgSpecParseError as e:  # a BaseException in xDSL; its text spans lines
            raise ForgeError(f"invalid pass pipeline '{self.args.passes}': {spec_error(e)}") from e
        except Exception as e:  # unknown pass, bad option: xDSL raises several kinds
            raise ForgeError(
                f"invalid pass pipeline '{self.args.passes}': {one_line(str(e))}"
            ) from e
        if self.args.dump_pass_pipeline:
            print(dump_pipeline(self.pipeline.passes), file=sys.stderr)

    def _after_pass(
        self, previous: ModulePass | None, module: ModuleOp, next_pass: ModulePass | None
    ) -> None:
        now = time.perf_counter()
        if previous is None and self.args.check_numerics:
            # torch-heavy: imported only when used, so plain forge-opt starts fast.
            from forge.devtools.numerics import NumericsChecker

            self._numerics = NumericsChecker()
            self._numerics.baseline(module)
        if previous is not None:
            self._timings.append((previous.name, now - self._pass_start))
            last = next_pass is None
            if not self.args.disable_verify and (self.args.verify_each or last):
                verify_module(module, after=previous.name)
            if self.args.check_numerics:
                self._numerics.check(module, previous.name)
            if self.args.print_ir_after_all:
                print(f"// -----// IR Dump After {previous.name} //----- //", file=sys.stderr)
                Printer(stream=sys.stderr).print_op(module)
                print(file=sys.stderr)
            elif self.args.print_between_passes and next_pass is not None:
                print(f"IR after {previous.name}:")
                Printer(stream=sys.stdout).print_op(module)
                print("\n\n")
        self._pass_start = time.perf_counter()

    def apply_passes(self, prog: ModuleOp) -> None:
        with collect_statistics() as records:
            self.pipeline.apply(self.ctx, prog)
        if self.args.pass_statistics:
            print(format_statistics(records), file=sys.stderr)

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        """Any file is read as MLIR text, whatever its extension, as mlir-opt does."""
        stream, _ = super().get_input_stream()
        return stream, "mlir"

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp:
        data = chunk.read()
        try:
            text = data.decode()
        except UnicodeDecodeError as e:
            raise ForgeError(
                f"not UTF-8 text ({e.reason} at byte {e.start}); forge-opt reads MLIR text",
                self.get_input_name(),
            ) from e
        if start_offset:
            text = "\n" * start_offset + text  # keep line numbers true under --split-input-file
        parser = LocatingParser(self.ctx, text, self.get_input_name())
        try:
            module = parser.parse_module(not self.args.no_implicit_module)
        except RecursionError as e:
            # xDSL's parser recurses per nesting level; Python's stack ends first.
            where = parser._current_token.span.get_location()
            raise ForgeError("nesting too deep to parse", str(where)) from e
        if not self.args.disable_verify:
            verify_module(module)
        return module

    def render(self, module: ModuleOp) -> str:
        if self.args.emit == "dot":
            return module_to_dot(module)
        spec = parse_spec(self.args.target)
        if self.args.emit == "python" or spec.name == "python":
            return self._plan_program(module, spec if spec.name == "python" else None)
        return self.output_resulting_program(module)

    def _plan_program(self, module: ModuleOp, spec: ArgSpec | None) -> str:
        """`-t python{granularity=... precision=...}`: option errors are one line too."""
        # torch-heavy: imported only when used, so plain forge-opt starts fast.
        from forge.conversion.plan_to_python import PythonTarget, plan_to_python

        try:
            target = PythonTarget.from_spec(spec) if spec is not None else PythonTarget()
        except ValueError as e:
            raise ForgeError(f"invalid target '{self.args.target}': {one_line(str(e))}") from e
        return plan_to_python(module, target.precision, target.granularity, target.weights)

    def run(self) -> None:
        if self.args.list_passes:
            for name in sorted(self.available_passes):
                print(name)
            return
        chunks, _ = self.prepare_input()
        target = None if self.args.output_file is None else AtomicFile(self.args.output_file)
        output = sys.stdout if target is None else target.stream
        succeeded = False
        try:
            for i, (chunk, offset) in enumerate(chunks):
                if i > 0:
                    output.write("// -----\n")
                try:
                    module = self.parse_chunk(chunk, "mlir", offset)
                    self.apply_passes(module)
                    output.write(self.render(module))
                except (ForgeError, ParseError, DiagnosticException) as e:
                    if not self._expected_diagnostic(e):
                        raise
                finally:
                    chunk.close()
                output.flush()
            succeeded = True
        finally:
            if target is not None and succeeded:
                target.commit()
            elif target is not None:
                target.discard()  # a failing run leaves an existing -o file as it was
        if self.args.time_passes:
            self.print_timings()

    def _expected_diagnostic(self, e: Exception) -> bool:
        """Under --verify-diagnostics / --parsing-diagnostics, print and continue."""
        as_forge = parse_error(e) if isinstance(e, ParseError) else e
        if isinstance(e, ParseError) and self.args.parsing_diagnostics:
            print(as_forge)
            return True
        if not isinstance(e, ParseError) and self.args.verify_diagnostics:
            print(as_forge if isinstance(e, ForgeError) else f"error: {one_line(str(e))}")
            return True
        return False

    def print_timings(self) -> None:
        total = sum(t for _, t in self._timings)
        print("===-- Pass execution timing report --===", file=sys.stderr)
        print(f"  Total: {total * 1e3:.3f} ms", file=sys.stderr)
        for name, seconds in self._timings:
            print(f"  {seconds * 1e3:10.3f} ms  {name}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        ForgeOptMain(args=argv).run()
    except ForgeError as e:
        return report(e, TOOL)
    except ParseError as e:
        return report(parse_error(e), TOOL)
    except PassFailedException as e:
        return report(ForgeError(f"pass failed: {one_line(str(e))}"), TOOL)
    except DiagnosticException as e:
        return report(ForgeError(one_line(str(e))), TOOL)
    except (OSError, UnicodeDecodeError) as e:
        return report(ForgeError(one_line(str(e))), TOOL)
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if os.environ.get("FORGE_TRACEBACK"):
            raise
        message = (
            f"internal error: {type(e).__name__}: {one_line(str(e))} "
            "(FORGE_TRACEBACK=1 shows the trace)"
        )
        return report(ForgeError(message), TOOL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
