"""`forge-opt`: the `mlir-opt`/`xdsl-opt` of Forge.

Parses `.mlir` with the builtin, func, arith and npu dialects, runs a `-p` pipeline
of registered passes and prints the result. Every user error ends in one
`file:line:col: error: ...` line on stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from collections.abc import Sequence
from io import BytesIO
from typing import IO, NoReturn

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseResourceAttr,
    FileLineColLoc,
    IntAttr,
    ModuleOp,
    StringAttr,
    UnknownLoc,
)
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
from xdsl.utils.lexer import Span
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from forge.dialects.context import verify_functions
from forge.dialects.npu import NPU
from forge.support import xdsl_compat
from forge.support.diagnostics import ForgeError, one_line, op_error, parse_error, report
from forge.support.files import AtomicFile
from forge.tools import reproducer
from forge.tools.emit_dot import module_to_dot
from forge.tools.ir_printing import (
    ELIDED,
    ELIDED_MESSAGE,
    ElidingPrinter,
    IRDumper,
    IRPrintOptions,
    pass_names,
    wrap_signatures,
)
from forge.tools.opt_arguments import (
    add_forge_arguments,
    mixed_checkouts,
    normalized_argv,
    package_origins,
    version_text,
)
from forge.tools.pipeline_syntax import (
    FUNCTION,
    MODULE,
    NestedSpec,
    PassRecord,
    format_nested,
    functions_of,
    isolated,
    merge_runs,
    parse_nested_pipeline,
    pass_text,
)
from forge.tools.verify_diagnostics import Diagnostic, parse_annotations, verify
from forge.transforms import defined_in, get_all_passes
from forge.transforms.pattern_pass import (
    NpuPatternPass,
    RewriteLimits,
    collect_statistics,
    format_statistics,
    rewrite_limits,
    trace_patterns,
)
from forge.transforms.rewrite_driver import CREATED_BY

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

    def _parse_builtin_dense_resource_attr(self) -> DenseResourceAttr:
        """`dense_resource<__elided__>` is what --elide-elementsattrs-if-larger printed in
        place of a constant: refuse it rather than read a constant with no data."""
        after_keyword = self._current_token.span
        attr = super()._parse_builtin_dense_resource_attr()
        if attr.resource_handle.data != ELIDED:
            return attr
        start = after_keyword.input.content.rfind("dense_resource", 0, after_keyword.start)
        where = Span(max(start, 0), after_keyword.end, after_keyword.input)
        raise ParseError(where, ELIDED_MESSAGE)


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


def verify_module(module: ModuleOp, after: str | None = None, each: bool = True) -> None:
    """Verify `module`; an error names the pass run last (`after`) and, for an op a
    pattern created, that pattern and its pass. `each=False`: passes ran unverified, so
    the last one is not blamed."""
    suffix = ""
    if after is not None and each:
        suffix = f" (after pass '{after}')"
    elif after is not None:
        suffix = f" (verified only after the last pass, '{after}')"
    try:
        module.verify()
        verify_functions(module)
    except ForgeError as e:
        raise ForgeError(str(e.args[0]) + suffix, e.location) from e
    except Exception as e:
        found = first_invalid_op(module)
        if found is None:
            raise ForgeError(one_line(str(e)) + suffix) from e
        op, error = found
        created = CREATED_BY.get(op)
        if created is not None:
            suffix = f" (created by pattern {created[1]} of pass '{created[0]}')"
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


def traceable_names(passes: Sequence[ModulePass], ctx: Context) -> set[str]:
    """The pass and pattern names `--trace-patterns=NAMES` can mean for `passes`: each
    pass (composites expanded, npu-optimize's round included) and its patterns."""
    names: set[str] = set()
    for p in expanded(passes):
        inner = p.passes() if p.name == "npu-optimize" else []  # type: ignore[attr-defined]
        for q in [p, *inner]:
            names.add(q.name)
            if isinstance(q, NpuPatternPass):
                names.update(type(pattern).__name__ for pattern in q.patterns())
            elif q.name == "npu-apply-pdl" and getattr(q, "file", None):
                from forge.transforms.npu_apply_pdl import load_patterns

                names.update(type(pattern).__name__ for pattern in load_patterns(q.file, ctx))
    return names


def check_trace_names(wanted: frozenset[str], passes: Sequence[ModulePass], ctx: Context) -> None:
    """A `--trace-patterns` name that no pass or pattern of the pipeline has is a typo:
    it would silently trace nothing."""
    unknown = sorted(wanted - traceable_names(passes, ctx))
    if unknown:
        raise ForgeError(
            f"--trace-patterns: {', '.join(map(repr, unknown))} is no pass or pattern of "
            "the pipeline"
        )


def dump_pipeline(passes: Sequence[ModulePass], anchors: Sequence[str] | None = None) -> str:
    """MLIR's `--dump-pass-pipeline` text (function passes nested in `func.func(...)`),
    and one comment per iterating pass naming the round it repeats."""
    anchors = anchors or [MODULE] * len(passes)
    nested = [(q, a) for p, a in zip(passes, anchors, strict=True) for q in expanded([p])]
    flat = [q for q, _ in nested]
    text = format_nested([(pass_text(q), a) for q, a in nested])
    lines = [f"Pass Manager with {len(flat)} passes:", text]
    for p in flat:
        if p.name == "npu-optimize":
            round_ = ",".join(pass_text(q) for q in p.passes())  # type: ignore[attr-defined]
            rounds = p.iterations  # type: ignore[attr-defined]
            lines.append(f"// {p.name} repeats, up to {rounds} rounds: {round_}")
    return "\n".join(lines)


def plugin_paths(argv: Sequence[str]) -> list[str]:
    """The files named by `--load-pass-plugin` (read before argparse runs: passes must be
    registered before the pipeline is parsed)."""
    paths = []
    for i, arg in enumerate(argv):
        if arg in ("--load-pass-plugin", "-load-pass-plugin") and i + 1 < len(argv):
            paths.append(argv[i + 1])
        elif arg.startswith(("--load-pass-plugin=", "-load-pass-plugin=")):
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
    """Replaced per instance by `version_text` (package origins)."""

    def __init__(self, args: Sequence[str] | None = None):
        argv = list(sys.argv[1:] if args is None else args)
        # --run-reproducer FILE: its recorded flags first (plugins load from them)
        self._replaying, argv = reproducer.reproducer_argv(argv)
        # xDSL's --version formats this with the xDSL version: braces in paths escaped.
        self.version_format = version_text().replace("{", "{{").replace("}", "}}")
        self._plugin_paths = plugin_paths(argv)
        self._plugin_passes = [p for path in self._plugin_paths for p in load_pass_plugin(path)]
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
            from forge.tools.plan_to_python import PythonTarget

            return PythonTarget

        self.available_targets["python"] = python_target

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.error = self._usage_error  # type: ignore[method-assign]
        add_forge_arguments(arg_parser)
        self.arg_parser = arg_parser
        parse = arg_parser.parse_args

        def parse_spelled(
            args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
        ) -> argparse.Namespace:
            # mlir-opt's spellings, before argparse reads `-pass-pipeline` as `-p ass-...`
            argv = list(sys.argv[1:] if args is None else args)
            return parse(normalized_argv(argv, arg_parser), namespace)

        arg_parser.parse_args = parse_spelled  # type: ignore[method-assign,assignment]

    def _print_options(self) -> IRPrintOptions:
        """The --print-ir-* flags, pass names checked against the registered passes."""
        a = self.args
        before, after = pass_names(a.print_ir_before), pass_names(a.print_ir_after)
        for flag, names in (("--print-ir-before", before), ("--print-ir-after", after)):
            unknown = sorted(names - set(self.available_passes))
            if unknown:
                raise ForgeError(f"{flag}: unknown pass {', '.join(map(repr, unknown))}")
        return IRPrintOptions(
            before=before,
            after=after,
            before_all=a.print_ir_before_all,
            after_all=a.print_ir_after_all,
            after_change=a.print_ir_after_change,
            after_failure=a.print_ir_after_failure,
            module_scope=a.print_ir_module_scope,
            tree_dir=a.print_ir_tree_dir,
            elide_larger=a.elide_elementsattrs_if_larger,
        )

    @staticmethod
    def _usage_error(message: str) -> NoReturn:
        raise ForgeError(one_line(message))

    # ---------------------------------------------------------------- driving

    def setup_pipeline(self) -> None:
        self._timings: list[tuple[str, float]] = []
        self._pass_start = 0.0
        self._dumps = IRDumper(self._print_options(), generic=self.args.print_op_generic)
        self._input: tuple[str, int] = ("", 0)
        if self._replaying and self.args.input_file is not None:
            raise ForgeError("--run-reproducer replays the reproducer's input: give no input file")
        try:
            specs = parse_nested_pipeline(self.args.passes)
            unknown = [s for s in specs if s.spec.name not in self.available_passes]
            if unknown:
                names = [s.spec.name for s in unknown]
                raise ValueError(f"Unrecognized passes: {names} (column {unknown[0].column})")
            passes = tuple(self._instantiate(s) for s in specs)
        except Exception as e:  # syntax, unknown pass, bad option: xDSL raises several kinds
            raise ForgeError(
                f"invalid pass pipeline '{self.args.passes}': {one_line(str(e))}"
            ) from e
        if self.args.load_pdl is not None:  # outside the try: its error is its own
            # xDSL's PDL interpreter takes ~0.5 s to import: only when asked for.
            from forge.transforms.npu_apply_pdl import bind_pdl_file

            passes = bind_pdl_file(passes, self.args.load_pdl)
        self.pipeline = PassPipeline(passes, self._after_pass)
        self._anchors = tuple(s.anchor for s in specs)
        if self.args.trace_patterns:
            check_trace_names(self.args.trace_patterns, passes, self.ctx)
        if self.args.dump_pass_pipeline:
            print(dump_pipeline(self.pipeline.passes, self._anchors), file=sys.stderr)

    def _instantiate(self, spec: NestedSpec) -> ModulePass:
        """The pass `spec` names, with its options; option errors name its column."""
        try:
            return self.available_passes[spec.spec.name]().from_pass_spec(spec.spec)
        except Exception as e:
            raise ValueError(f"{one_line(str(e))} (column {spec.column})") from e

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
                verify_module(module, previous.name, self.args.verify_each)
            if self.args.check_numerics:
                self._numerics.check(module, previous.name)
                if last:
                    self._numerics.check_executable(module)
            if self.args.print_between_passes and next_pass is not None:
                print(f"IR after {previous.name}:")
                Printer(stream=sys.stdout).print_op(module)
                print("\n\n")
        self._pass_start = time.perf_counter()

    def apply_passes(self, prog: ModuleOp) -> None:
        limits = RewriteLimits(
            -1 if self.args.max_iterations is None else self.args.max_iterations,
            -1 if self.args.max_rewrites is None else self.args.max_rewrites,
        )
        with (
            collect_statistics() as records,
            trace_patterns(self.args.trace_patterns),
            rewrite_limits(limits),
        ):
            self._run_pipeline(prog, records)
        if self.args.pass_statistics:
            print(format_statistics(records), file=sys.stderr)

    def _run_pipeline(self, module: ModuleOp, records: list[PassRecord]) -> None:
        """Run the passes in order, each on the module or, nested under func.func(...),
        on every function in turn (in a module of its own, as a function pass sees only
        its function); `_after_pass` verifies and checks the whole module after each."""
        passes = self.pipeline.passes
        self._after_pass(None, module, passes[0] if passes else None)
        for i, (p, anchor) in enumerate(zip(passes, self._anchors, strict=True)):
            next_pass = passes[i + 1] if i + 1 < len(passes) else None
            if anchor == FUNCTION:
                first = len(records)
                functions = functions_of(module)
                for function in functions:
                    before = self._run_pass(p, function, module)
                    self._dumps.after(p, function, module, before)
                records[first:] = merge_runs(records[first:], len(functions))
                self._checked(p, module, next_pass, None)
                continue
            before = self._run_pass(p, module, module)
            self._checked(p, module, next_pass, before)
            self._dumps.after(p, module, module, before)

    def _run_pass(self, p: ModulePass, op: ModuleOp | func.FuncOp, module: ModuleOp) -> str | None:
        """Apply `p` to `op` (the module or one of its functions); on failure dump the
        IR and write a crash reproducer. Returns the IR text before, if kept."""
        before = self._dumps.before(p, op, module)
        try:
            if isinstance(op, ModuleOp):
                p.apply(self.ctx, op)
            else:
                with isolated(op) as scratch:
                    p.apply(self.ctx, scratch)
        except Exception as e:
            self._dumps.failed(p, op, module, before)
            self._write_reproducer(e, p)
            raise
        return before

    def _checked(
        self, p: ModulePass, module: ModuleOp, next_pass: ModulePass | None, before: str | None
    ) -> None:
        """`_after_pass` (verification, numerics); dumps the IR when it finds `p` broke it."""
        try:
            self._after_pass(p, module, next_pass)
        except Exception:
            self._dumps.failed(p, module, module, before)
            raise

    def _write_reproducer(self, error: Exception, p: ModulePass) -> None:
        """MLIR's crash reproducer: the input and pipeline, named on the error line. By
        default only for crashes and xDSL pass failures: a ForgeError is a diagnosed user
        error (a missing file, a refused input) unless --crash-reproducer asks; and not
        when replaying one."""
        target = self.args.crash_reproducer
        diagnosed = isinstance(error, ForgeError)
        if target == "none" or (target is None and (self._replaying or diagnosed)):
            return
        text, offset = self._input
        a = self.args
        arguments = reproducer.replay_arguments(
            a.passes,
            self._plugin_paths,
            a.verify_each,
            a.disable_verify,
            a.allow_unregistered_dialect,
            a.no_implicit_module,
        )
        failure = f"pass '{p.name}' raised {type(error).__name__}: {one_line(str(error))}"
        repro = reproducer.Reproducer(self.get_input_name(), offset, arguments, text, failure)
        try:
            path = repro.write(target)
        except OSError as e:
            path = f"not written: {one_line(str(e))}"
        setattr(error, reproducer.ATTRIBUTE, path)

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        """Any file is read as MLIR text, whatever its extension, as mlir-opt does."""
        if self._replaying:
            return BytesIO(self._replay.text.encode()), "mlir"
        stream, _ = super().get_input_stream()
        return stream, "mlir"

    def get_input_name(self) -> str:
        """A replayed reproducer's input keeps its original name in diagnostics."""
        if self._replaying:
            return self._replay.source
        return super().get_input_name()

    @property
    def _replay(self) -> reproducer.Reproducer:
        assert self._replaying is not None
        return self._replaying

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp:
        data = chunk.read()
        try:
            text = data.decode()
        except UnicodeDecodeError as e:
            raise ForgeError(
                f"not UTF-8 text ({e.reason} at byte {e.start}); forge-opt reads MLIR text",
                self.get_input_name(),
            ) from e
        if self._replaying:
            start_offset += self._replay.line_offset
        self._input = (text, start_offset)  # for a crash reproducer
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

    def output_resulting_program(self, prog: ModuleOp) -> str:
        """xDSL's MLIR output, or with --elide-elementsattrs-if-larger the same through
        the printer that elides large constants (and long signatures wrapped)."""
        if self.args.elide_elementsattrs_if_larger is None:
            return super().output_resulting_program(prog)
        out = io.StringIO()
        printer = ElidingPrinter(
            stream=out,
            print_generic_format=self.args.print_op_generic,
            print_properties_as_attributes=self.args.print_no_properties,
            print_debuginfo=self.args.print_debuginfo,
            elide_larger=self.args.elide_elementsattrs_if_larger,
        )
        printer.print_op(prog)
        printer.print_metadata(self.ctx.loaded_dialects)
        out.write("\n\n")
        return wrap_signatures(out.getvalue())

    def _plan_program(self, module: ModuleOp, spec: ArgSpec | None) -> str:
        """`-t python{granularity=... precision=...}`: option errors are one line too."""
        # torch-heavy: imported only when used, so plain forge-opt starts fast.
        from forge.tools.plan_to_python import PythonTarget, plan_to_python

        try:
            target = PythonTarget.from_spec(spec) if spec is not None else PythonTarget()
        except ValueError as e:
            raise ForgeError(f"invalid target '{self.args.target}': {one_line(str(e))}") from e
        return plan_to_python(
            module, target.precision, target.granularity, target.weights, profile=target.profile
        )

    def run(self) -> None:
        mixed = mixed_checkouts(package_origins())
        if mixed is not None:
            print(f"{TOOL}: {mixed}", file=sys.stderr)
        if self.args.list_passes:
            for name in sorted(self.available_passes):
                print(name)
            return
        chunks, _ = self.prepare_input()
        target = None if self.args.output_file is None else AtomicFile(self.args.output_file)
        output = sys.stdout if target is None else target.stream
        succeeded = False
        mismatches: list[str] = []
        try:
            for i, (chunk, offset) in enumerate(chunks):
                if i > 0:
                    output.write("// -----\n")
                source = b""
                if self.args.verify_diagnostics:  # the annotations are read from a copy
                    source = chunk.read()
                    chunk.close()
                    chunk = BytesIO(source)
                emitted: list[Diagnostic] = []
                try:
                    module = self.parse_chunk(chunk, "mlir", offset)
                    self.apply_passes(module)
                    output.write(self.render(module))
                except (ForgeError, ParseError, DiagnosticException) as e:
                    if not self._expected_diagnostic(e, emitted):
                        raise
                finally:
                    chunk.close()
                if self.args.verify_diagnostics:
                    name = self.get_input_name()
                    expected = parse_annotations(source.decode(errors="replace"), name, offset + 1)
                    mismatches += verify(expected, emitted, name)
                output.flush()
            if mismatches:
                print("\n".join(mismatches), file=sys.stderr)
                raise ForgeError(
                    f"--verify-diagnostics: {len(mismatches)} mismatch(es) between the "
                    "diagnostics and the expected-* annotations"
                )
            succeeded = True
        finally:
            if target is not None and succeeded:
                target.commit()
            elif target is not None:
                target.discard()  # a failing run leaves an existing -o file as it was
        if self.args.time_passes:
            self.print_timings()

    def _expected_diagnostic(self, e: Exception, emitted: list[Diagnostic]) -> bool:
        """Whether a chunk's error is a result rather than a failure: under
        --verify-diagnostics it joins `emitted`, to be checked against the annotations;
        under --print-diagnostics (any error) or --parsing-diagnostics (parse errors) it
        is printed to stdout."""
        if isinstance(e, ParseError):
            error = parse_error(e)
        elif isinstance(e, ForgeError):
            error = e
        elif isinstance(e, PassFailedException):  # worded as main() reports it
            error = ForgeError(f"pass failed: {one_line(str(e))}")
        else:
            error = ForgeError(one_line(str(e)))
        if self.args.verify_diagnostics:
            message = one_line(str(error.args[0]))
            emitted.append(Diagnostic.at(error.location, "error", message, self.get_input_name()))
            return True
        if self.args.print_diagnostics or (
            isinstance(e, ParseError) and self.args.parsing_diagnostics
        ):
            print(error)
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
        return _report(e, e)
    except ParseError as e:
        return _report(parse_error(e), e)
    except PassFailedException as e:
        return _report(ForgeError(f"pass failed: {one_line(str(e))}"), e)
    except DiagnosticException as e:
        return _report(ForgeError(one_line(str(e))), e)
    except BrokenPipeError:
        # The reader went away (`forge-opt ... | head`): not an error, as with mlir-opt.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (OSError, UnicodeDecodeError) as e:
        return _report(ForgeError(one_line(str(e))), e)
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if os.environ.get("FORGE_TRACEBACK"):
            raise
        message = (
            f"internal error: {type(e).__name__}: {one_line(str(e))} "
            "(FORGE_TRACEBACK=1 shows the trace)"
        )
        return _report(ForgeError(message), e)
    return 0


def _report(error: ForgeError, cause: BaseException) -> int:
    """Print the one-line error, naming the crash reproducer written for `cause`, if any."""
    path = getattr(cause, reproducer.ATTRIBUTE, None)
    if path is not None:
        error = ForgeError(f"{error.args[0]} (reproducer: {path})", error.location)
    return report(error, TOOL)


if __name__ == "__main__":
    sys.exit(main())
