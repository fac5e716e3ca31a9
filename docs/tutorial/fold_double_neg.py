"""npu-fold-double-neg: `neg(neg(x))` is `x` (the tutorial's pass)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from forge.dialects import npu
from forge.transforms.pattern_pass import NpuPatternPass


class FoldDoubleNeg(RewritePattern):
    """`neg(neg(x))` -> `x`: negation is its own inverse, exactly, for every dtype."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.NegOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if not isinstance(inner, npu.NegOp):
            return  # guard first: only a neg of a neg
        rewriter.replace(op, [], [inner.input])


@dataclass(frozen=True)
class FoldDoubleNegPass(NpuPatternPass):
    name = "npu-fold-double-neg"

    def patterns(self) -> Sequence[RewritePattern]:
        return (FoldDoubleNeg(),)
