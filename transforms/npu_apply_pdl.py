"""npu-apply-pdl: rewrite `npu` IR with declarative PDL patterns read from a file.

`-p 'npu-apply-pdl{file=PATH}'` parses PATH (a module of `pdl.pattern` ops written
against `npu`, `func`, `arith` and `builtin` ops), checks it, and drives its patterns
greedily to a fixed point with xDSL's PDL interpreter (`xdsl.interpreters.pdl`), highest
`benefit` first, counting rewrites like every other Forge pass (`--pass-statistics`).
The path may be quoted or not: `-p 'npu-apply-pdl{file=transforms/pdl/eval-dropout.pdl.mlir}'`.
`transforms/pdl/` holds Phase-2 rewrites written this way; docs/first-pattern.md says
what PDL cannot express here (use counts, float tolerances, strides, placement).

xDSL's interpreter implements a subset of PDL and fails late (an assertion in the middle
of a rewrite) or silently (a pattern that can never match) on the rest, so the file is
checked up front and every problem is one `file:line:col: error: ...` line:

- ops the interpreter does not run: `pdl.operands`, `pdl.results`, `pdl.types`,
  `pdl.range`, `pdl.apply_native_rewrite`, `pdl.rewrite` without a root or with an
  external rewrite name, native constraints that are negated or return values;
- op names no loaded dialect defines, attributes an op does not have, and a matched
  `pdl.operation` whose number of result types differs from the op's (xDSL compares the
  counts, so such a pattern would never fire);
- a matched `pdl.operation` the root does not reach through its operands (xDSL matches
  upward from the root only).

Native constraints PDL cannot state by itself, registered under these names:

- `forge.lacks_attr(op, name)`: `op` has no attribute or property `name` (PDL only
  matches attributes that are present; `npu.dropout` is eval-mode when `train` is absent).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import pdl
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.interpreters.pdl import PDLRewritePattern
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.irdl import IRDLOperation, OptionalDef, VariadicDef
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import ParseError, VerifyException

from forge.support.diagnostics import ForgeError, location_of, one_line, op_error, parse_error
from forge.transforms.pattern_pass import RewriteLimits, run_patterns

NAME = "npu-apply-pdl"


def _lacks_attr(op: Operation, name: Attribute) -> bool:
    if not isinstance(name, StringAttr):
        return False
    return op.get_attr_or_prop(name.data) is None


NATIVE_CONSTRAINTS: dict[str, Callable[..., bool]] = {"forge.lacks_attr": _lacks_attr}
"""Constraint name -> predicate over the matched objects (ops, values, attributes)."""

UNSUPPORTED: dict[type[Operation], str] = {
    pdl.OperandsOp: "variadic operands",
    pdl.ResultsOp: "variadic results",
    pdl.TypesOp: "type ranges",
    pdl.RangeOp: "ranges",
    pdl.ApplyNativeRewriteOp: "native rewrites",
}
"""PDL ops xDSL's interpreter does not implement, and what they stand for."""


class _LocatingParser(Parser):
    """Gives every parsed op its `file:line:col` (as forge-opt's parser does), so errors
    in the PDL file point into it."""

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        op = super().parse_operation()
        if isinstance(op.location, UnknownLoc):
            where = start.get_location()
            op.location = FileLineColLoc(
                StringAttr(where.file), IntAttr(where.line), IntAttr(where.col)
            )
        return op


def _pdl_context(ctx: Context) -> Context:
    """`ctx` (the IR's dialects) with PDL loaded, to parse the pattern file."""
    pdl_ctx = ctx.clone()
    if pdl_ctx.get_optional_dialect(pdl.PDL.name) is None:
        pdl_ctx.load_dialect(pdl.PDL)
    return pdl_ctx


def parse_pdl_file(path: str, ctx: Context) -> ModuleOp:
    """Parse and verify the PDL module in `path`; one-line ForgeErrors otherwise."""
    if not os.path.isfile(path):
        raise ForgeError(f"no such PDL file (for {NAME})", path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ForgeError(f"cannot read PDL file: {one_line(str(e))}", path) from e
    try:
        module = _LocatingParser(_pdl_context(ctx), text, path).parse_module()
    except ParseError as e:
        raise parse_error(e) from e
    except VerifyException as e:  # an attribute that fails its verifier while parsed
        raise ForgeError(one_line(str(e)), path) from e
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except Exception as e:
            raise op_error(op, one_line(str(e))) from e
    return module


def check_patterns(module: ModuleOp, ctx: Context, path: str) -> list[pdl.PatternOp]:
    """The module's patterns, after checking that xDSL's interpreter can run each as
    written (see the module docstring)."""
    patterns: list[pdl.PatternOp] = []
    for op in module.ops:
        if not isinstance(op, pdl.PatternOp):
            raise op_error(op, "a PDL file holds only 'pdl.pattern' ops")
        patterns.append(op)
    if not patterns:
        raise ForgeError("no 'pdl.pattern' in the PDL file", location_of(module.location) or path)
    for pattern in patterns:
        _check_pattern(pattern, ctx)
    return patterns


def _check_pattern(pattern: pdl.PatternOp, ctx: Context) -> None:
    rewrite = pattern.body.block.last_op
    if not isinstance(rewrite, pdl.RewriteOp):
        raise op_error(pattern, "a pattern ends in 'pdl.rewrite'")
    if rewrite.root is None or rewrite.name_ is not None:
        raise op_error(rewrite, "xDSL's PDL interpreter needs a root op and a rewrite body")
    reached = _reached_from(rewrite.root)
    for op in pattern.walk():
        if type(op) in UNSUPPORTED:
            raise op_error(op, f"{UNSUPPORTED[type(op)]} are not supported by xDSL's interpreter")
        if isinstance(op, pdl.ApplyNativeConstraintOp):
            _check_constraint(op)
        if not isinstance(op, pdl.OperationOp):
            continue
        in_rewrite = op.parent_op() is rewrite
        if in_rewrite and op.opName is None:
            raise op_error(op, "an op created by a rewrite needs a name")
        if not in_rewrite and op not in reached:
            raise op_error(
                op,
                "not reached from the rewrite root through operands "
                "(xDSL matches upward from the root only)",
            )
        if op.opName is not None:
            _check_op(op, ctx, matched=not in_rewrite)


def _reached_from(root: SSAValue) -> set[Operation]:
    """The `pdl.operation`s the matcher visits starting from the rewrite root."""
    reached: set[Operation] = set()
    stack = [root.owner]
    while stack:
        op = stack.pop()
        if not isinstance(op, pdl.OperationOp) or op in reached:
            continue
        reached.add(op)
        for operand in op.operand_values:
            if isinstance(operand, OpResult) and isinstance(operand.op, pdl.ResultOp):
                stack.append(operand.op.parent_.owner)
    return reached


def _check_constraint(op: pdl.ApplyNativeConstraintOp) -> None:
    name = op.constraint_name.data
    if name not in NATIVE_CONSTRAINTS:
        known = ", ".join(sorted(NATIVE_CONSTRAINTS))
        raise op_error(op, f"unknown native constraint '{name}' (known: {known})")
    if op.is_negated.value.data or op.res:
        raise op_error(op, "xDSL's interpreter ignores isNegated and constraint results")


def _check_op(op: pdl.OperationOp, ctx: Context, matched: bool) -> None:
    """The named op exists, has the named attributes and, when matched, as many results
    as the pattern lists types."""
    assert op.opName is not None
    name = op.opName.data
    op_type = ctx.get_optional_op(name)
    if op_type is None:
        raise op_error(op, f"unknown operation '{name}' (no loaded dialect defines it)")
    if not issubclass(op_type, IRDLOperation):
        return
    definition = op_type.get_irdl_definition()
    known = set(definition.properties) | set(definition.attributes)
    for attr in op.attributeValueNames:
        if attr.data not in known:
            raise op_error(op, f"'{name}' has no attribute or property '{attr.data}'")
    results = [d for _, d in definition.results]
    if not matched or any(isinstance(d, VariadicDef | OptionalDef) for d in results):
        return
    if len(op.type_values) != len(results):
        raise op_error(
            op,
            f"never matches: '{name}' has {len(results)} result(s), the pattern lists "
            f"{len(op.type_values)} type(s)",
        )


def _pattern_class(pattern: pdl.PatternOp, index: int) -> type[PDLRewritePattern]:
    """A subclass named after the pattern's symbol: pattern statistics and traces key
    patterns by class name, and every PDL pattern would otherwise be one row."""
    name = pattern.sym_name.data if pattern.sym_name is not None else f"pdl_pattern_{index}"
    attributes = {
        "__doc__": f"The PDL pattern @{name}.",
        "defined_at": location_of(pattern.location),
    }
    return type(name, (PDLRewritePattern,), attributes)


def load_patterns(path: str, ctx: Context) -> list[PDLRewritePattern]:
    """The rewrite patterns of the PDL file `path`, highest benefit first."""
    module = parse_pdl_file(path, ctx)
    patterns = check_patterns(module, ctx, path)
    ranked = sorted(enumerate(patterns), key=lambda item: -item[1].benefit.value.data)
    loaded: list[PDLRewritePattern] = []
    for index, pattern in ranked:
        rewrite = pattern.body.block.last_op
        assert isinstance(rewrite, pdl.RewriteOp)  # check_patterns made sure
        cls = _pattern_class(pattern, index)
        loaded.append(cls(rewrite, ctx, native_constraints=NATIVE_CONSTRAINTS))
    return loaded


@dataclass(frozen=True)
class NpuApplyPDLPass(ModulePass):
    """Apply the PDL patterns in `file` greedily, to a fixed point."""

    name = NAME

    file: str | None = None
    """The `.mlir` file of `pdl.pattern` ops (forge-opt: or `--load-pdl FILE`)."""
    max_iterations: int = -1
    """As every pattern pass's (`NpuPatternPass.max_iterations`)."""
    max_rewrites: int = -1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.file is None:
            raise ForgeError(f"{NAME} needs a PDL file: -p '{NAME}{{file=PATH}}'")
        patterns = load_patterns(self.file, ctx)
        limits = RewriteLimits(self.max_iterations, self.max_rewrites)
        run_patterns(self.name, patterns, op, limits=limits)


def bind_pdl_file(passes: Sequence[ModulePass], path: str) -> tuple[ModulePass, ...]:
    """For a driver's `--load-pdl FILE`: every `npu-apply-pdl` in `passes` without a
    `file` reads `path` (`--load-pdl F -p npu-apply-pdl` = `-p npu-apply-pdl{file=F}`)."""
    applies = [p for p in passes if isinstance(p, NpuApplyPDLPass)]
    if not applies:
        raise ForgeError(f"--load-pdl '{path}' needs '{NAME}' in the pass pipeline")
    for p in applies:
        if p.file is not None and p.file != path:
            raise ForgeError(f"--load-pdl '{path}' conflicts with {NAME}{{file={p.file}}}")
    return tuple(replace(p, file=path) if isinstance(p, NpuApplyPDLPass) else p for p in passes)
