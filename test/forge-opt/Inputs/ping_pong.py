"""Deliberately broken patterns for the rewrite-driver tests: a pair that undoes each
other (tanh <-> exp), one that claims a rewrite every sweep, one that builds an op its
verifier refuses, and one that raises."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import TensorType, f32
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from forge.dialects import npu
from forge.transforms.pattern_pass import NpuPatternPass


class TanhToExp(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.TanhOp, rewriter: PatternRewriter) -> None:
        exp = npu.ExpOp.create(operands=[op.input], result_types=[op.result.type])
        rewriter.replace(op, [exp])


class ExpToTanh(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.ExpOp, rewriter: PatternRewriter) -> None:
        tanh = npu.TanhOp.create(operands=[op.input], result_types=[op.result.type])
        rewriter.replace(op, [tanh])


class ExpOfWrongShape(RewritePattern):
    """Builds an exp whose result type differs from its operand's."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.TanhOp, rewriter: PatternRewriter) -> None:
        wrong = TensorType(f32, [1, *op.result.type.get_shape()])
        rewriter.replace(op, [npu.ExpOp.create(operands=[op.input], result_types=[wrong])])


class ClaimsAChange(RewritePattern):
    """Says it rewrote without changing anything: every sweep "changes" the IR, no op is
    queued again, so only the sweep bound (max-iterations) stops the pass."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.TanhOp, rewriter: PatternRewriter) -> None:
        rewriter.has_done_action = True


class RaisesOnTanh(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.TanhOp, rewriter: PatternRewriter) -> None:
        raise ValueError("this pattern has a bug")


@dataclass(frozen=True)
class PingPongPass(NpuPatternPass):
    name = "test-ping-pong"

    def patterns(self) -> Sequence[RewritePattern]:
        return (TanhToExp(), ExpToTanh())


@dataclass(frozen=True)
class WrongShapePass(NpuPatternPass):
    name = "test-wrong-shape"

    def patterns(self) -> Sequence[RewritePattern]:
        return (ExpOfWrongShape(),)


@dataclass(frozen=True)
class EverySweepPass(NpuPatternPass):
    name = "test-every-sweep"

    def patterns(self) -> Sequence[RewritePattern]:
        return (ClaimsAChange(),)


@dataclass(frozen=True)
class RaisingPass(NpuPatternPass):
    name = "test-raising-pattern"

    def patterns(self) -> Sequence[RewritePattern]:
        return (RaisesOnTanh(),)
