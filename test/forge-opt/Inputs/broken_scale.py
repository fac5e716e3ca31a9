"""A deliberately broken pattern for --check-numerics tests: it rewrites x*2 into x+2."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import FloatAttr
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from forge.dialects import npu
from forge.transforms.pattern_pass import NpuPatternPass


class MulByTwoIsAddTwo(RewritePattern):
    """Wrong on purpose: x*2 and x+2 agree only at x = 2."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.MulOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.scalar, FloatAttr) or op.scalar.value.data != 2.0:
            return
        add = npu.AddOp.create(
            operands=[op.lhs], result_types=[op.result.type], properties={"scalar": op.scalar}
        )
        rewriter.replace(op, [add])


@dataclass(frozen=True)
class BrokenScalePass(NpuPatternPass):
    name = "test-broken-scale"

    def patterns(self) -> Sequence[RewritePattern]:
        return (MulByTwoIsAddTwo(),)
