"""npu-dce: remove what cannot affect the function's results.

Eval-mode dropout is the identity, asserts the type system already proves are
no-ops, and ops whose results are unused and that have no side effects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from forge.dialects import npu
from forge.transforms.pattern_pass import NpuPatternPass, side_effect_free


class EraseUnusedPureOp(RewritePattern):
    """An op without side effects whose results nobody uses."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, npu.NpuOp) or not op.results:
            return
        if any(result.uses for result in op.results):
            return
        if not side_effect_free(op):
            return
        rewriter.erase(op)


class ForwardEvalDropout(RewritePattern):
    """`npu.dropout` without `train` (or with p = 0) is the identity."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.DropoutOp, rewriter: PatternRewriter) -> None:
        if op.train is not None and op.p.value.data != 0.0:
            return
        rewriter.replace(op, [], [op.input])


class EraseProvenAssert(RewritePattern):
    """`aten._assert_tensor_metadata` whose dtype check the IR's types already prove."""

    ASSERT: ClassVar[str] = "aten._assert_tensor_metadata.default"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.GenericOp, rewriter: PatternRewriter) -> None:
        if op.opcode != self.ASSERT or len(op.inputs) != 1 or op.outputs:
            return
        checked = op.inputs[0].type
        expected = op.kwargs.data.get("dtype") if op.kwargs is not None else None
        if not isinstance(checked, TensorType):
            return
        if expected is not None and expected != checked.get_element_type():
            return  # would fail at run time: keep it
        device = op.kwargs.data.get("device") if op.kwargs is not None else None
        if device is not None and getattr(device, "data", "cpu") != "cpu":
            return
        rewriter.erase(op)


@dataclass(frozen=True)
class NpuDCEPass(NpuPatternPass):
    name = "npu-dce"
    WALK_REVERSE: ClassVar[bool] = True

    def patterns(self) -> Sequence[RewritePattern]:
        return (EraseProvenAssert(), ForwardEvalDropout(), EraseUnusedPureOp())
