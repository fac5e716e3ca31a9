"""npu-cse: hash-consing of identical ops.

Two ops are the same value when they have the same name (hence opcode), operands,
properties, attributes and result types. Ops with side effects are never merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from forge.dialects import npu
from forge.transforms.pattern_pass import NpuPatternPass, side_effect_free


def cse_key(op: Operation) -> tuple[Any, ...]:
    return (
        op.name,
        tuple(op.operands),
        tuple(sorted(op.properties.items())),
        tuple(sorted(op.attributes.items())),
        tuple(r.type for r in op.results),
    )


class MergeIdenticalOp(RewritePattern):
    """Replace an op by the first identical op seen before it in the same block."""

    def __init__(self) -> None:
        self.seen: dict[tuple[Any, ...], Operation] = {}

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, npu.NpuOp) or not op.results or not side_effect_free(op):
            return
        key = cse_key(op)
        first = self.seen.setdefault(key, op)
        if first is op:
            return
        if first.parent is None or first.parent is not op.parent:
            self.seen[key] = op  # the earlier one was erased or lives elsewhere
            return
        rewriter.replace(op, [], list(first.results))


@dataclass(frozen=True)
class NpuCSEPass(NpuPatternPass):
    name = "npu-cse"

    def patterns(self) -> Sequence[RewritePattern]:
        return (MergeIdenticalOp(),)
