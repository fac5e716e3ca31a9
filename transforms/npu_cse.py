"""npu-cse: hash-consing of identical ops.

Two ops are the same value when they have the same name (hence opcode), operands,
properties, attributes and result types. Ops with side effects are never merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from forge.dialects import npu
from forge.transforms.pattern_pass import NpuPatternPass, side_effect_free


def same_op(a: Operation, b: Operation) -> bool:
    """`a` and `b` compute the same value (given both are side-effect free): same name,
    the very same operands, equal properties, attributes and result types."""
    return (
        a.name == b.name
        and len(a.operands) == len(b.operands)
        and all(x is y for x, y in zip(a.operands, b.operands, strict=True))
        and a.properties == b.properties
        and a.attributes == b.attributes
        and [r.type for r in a.results] == [r.type for r in b.results]
    )


class MergeIdenticalOp(RewritePattern):
    """Replace an op by the first identical op seen before it in the same block.

    Ops are bucketed by name and operand identities, which hash as strings and ints;
    attributes (whose hashes are computed in Python, field by field) are compared only
    within a bucket, and most buckets hold one op."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, tuple[int, ...]], list[Operation]] = {}

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, npu.NpuOp) or not op.results or not side_effect_free(op):
            return
        bucket = self.seen.setdefault((op.name, tuple(map(id, op.operands))), [])
        # ops erased since they were seen, or in another block, cannot stand in
        bucket[:] = [other for other in bucket if other.parent is op.parent]
        first = next((other for other in bucket if other is op or same_op(other, op)), None)
        if first is None:
            bucket.append(op)
            return
        if first is op:
            return
        rewriter.replace(op, [], list(first.results))


@dataclass(frozen=True)
class NpuCSEPass(NpuPatternPass):
    name = "npu-cse"

    def patterns(self) -> Sequence[RewritePattern]:
        return (MergeIdenticalOp(),)
