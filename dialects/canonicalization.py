"""The `npu` dialect's canonicalization patterns: what `-p canonicalize` does to `npu` IR.

Folds whose result is exactly the input, bit for bit, on every value (MLIR's rule for a
canonicalization): a transpose undone by the same transpose, a transpose of a dim with
itself, a view or reshape to the type it already has, a copy of a dense copy, `x * 1`,
`x + (-0.0)` and `x - 0.0`. (`x + 0.0` is not `x`: `-0.0 + 0.0` is `+0.0`, so MLIR's
arith dialect leaves it too.) `npu-fold-constants` does more (view chains, constant
subgraphs) where Forge's Phase 2 asks for it.

The ops carry `NpuCanonicalization`; the patterns match op names and properties, so this
module sits below `npu.py` (which imports it for the trait) without importing it back.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.traits import HasCanonicalizationPatternsTrait

SCALAR_IDENTITIES = {"npu.mul": "1.0", "npu.add": "-0.0", "npu.sub": "0.0"}
"""Binary op -> the scalar (as its repr) that makes it return its left operand."""


def _forward(op: Operation, value: SSAValue, rewriter: PatternRewriter) -> None:
    """Replace `op` by `value` when it has the op's result type."""
    if value.type == op.results[0].type:
        rewriter.replace_op(op, [], [value])


def _dims(op: Operation) -> set[int] | None:
    """The two dims a `npu.transpose` swaps (None for another op)."""
    if op.name != "npu.transpose":
        return None
    dims = (op.properties.get("dim0"), op.properties.get("dim1"))
    if not all(isinstance(d, IntegerAttr) for d in dims):
        return None
    return {d.value.data for d in dims}  # type: ignore[union-attr]


class TransposeOfTranspose(RewritePattern):
    """transpose(transpose(x, a, b), a, b) (or b, a) is x."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        dims = _dims(op)
        inner = op.operands[0].owner if dims is not None else None
        if isinstance(inner, Operation) and _dims(inner) == dims:
            _forward(op, inner.operands[0], rewriter)


class TransposeOfItself(RewritePattern):
    """transpose(x, a, a) is x."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        dims = _dims(op)
        if dims is not None and len(dims) == 1:
            _forward(op, op.operands[0], rewriter)


class ReshapeToItsOwnType(RewritePattern):
    """A view or reshape whose result type is its input's is its input."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.name in ("npu.view", "npu.reshape"):
            _forward(op, op.operands[0], rewriter)


class CopyOfCopy(RewritePattern):
    """contiguous(contiguous(x)) is contiguous(x): the inner copy is already dense."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.name != "npu.contiguous":
            return
        inner = op.operands[0].owner
        if isinstance(inner, Operation) and inner.name == "npu.contiguous":
            _forward(op, op.operands[0], rewriter)


class ScalarIdentity(RewritePattern):
    """x * 1.0, x + (-0.0) and x - 0.0 are x (the result type equal to x's)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        identity = SCALAR_IDENTITIES.get(op.name)
        scalar = op.properties.get("scalar")
        if identity is None or not isinstance(scalar, FloatAttr):
            return
        if repr(scalar.value.data) == identity:
            _forward(op, op.operands[0], rewriter)


PATTERNS: tuple[RewritePattern, ...] = (
    TransposeOfTranspose(),
    TransposeOfItself(),
    ReshapeToItsOwnType(),
    CopyOfCopy(),
    ScalarIdentity(),
)


@dataclass(frozen=True)
class NpuCanonicalization(HasCanonicalizationPatternsTrait):
    """Hands xDSL's `canonicalize` the dialect's patterns."""

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return PATTERNS
