"""npu-update-state-in-place: write a KV-cache step into the cache, not into a copy.

A captured static-cache program updates its cache functionally: torch.export's
functionalization turns `cache.index_copy_(dim, positions, rows)` into

    %new = npu.generic "aten.index_copy.default"(%cache, 2 : i64, %pos, %rows) : ...
    func.return ..., %new   // npu.writes = [..., "cache", ...]

which, run as written, copies the whole cache into a new tensor and copies that back
into the caller's buffer after the call: two copies of the cache per decode step for
one new row. When nothing but this op reads the old `%cache`, the two are the same
buffer at different times, so the rewrite

    %new = npu.cache_update %cache[%pos] = %rows {dim = 2 : i64} : ...

states that the rows are written in place (O(rows)) and the result is the caller's
buffer: the executor skips the write-back, and liveness gives `%new` no buffer of its
own (linear scan never hands the cache to a temporary).

Preconditions (any one failing leaves the op alone): `%cache` is a function argument
that `npu.writes` names, `%new` is exactly what the function writes back into it, the
index_copy is `%cache`'s only use (another reader would see the new rows), and the
shapes are static with 1-D integer positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, IntegerType
from xdsl.ir import BlockArgument
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from forge.dialects import contract, npu
from forge.dialects.shapes import element_type, is_bool, shape_of
from forge.transforms.matchers import single_use, static_shapes
from forge.transforms.pattern_pass import NpuPatternPass

INDEX_COPY = "aten.index_copy.default"


def _written_back_as(function: func.FuncOp, cache: BlockArgument) -> int | None:
    """Index of the result the function writes back into `cache`, if any."""
    for result, arg in contract.write_backs(function):
        if arg == cache.index:
            return result
    return None


class IndexCopyInPlace(RewritePattern):
    """A functional `aten.index_copy` of written-back state becomes `npu.cache_update`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.GenericOp, rewriter: PatternRewriter) -> None:
        if op.opcode != INDEX_COPY or len(op.inputs) != 3 or len(op.outputs) != 1:
            return
        args = op.args.data
        if len(args) != 4 or not isinstance(args[1], IntegerAttr) or op.kwargs is not None:
            return
        cache, positions, update = op.inputs
        if not isinstance(cache, BlockArgument) or not single_use(cache):
            return
        function = op.parent_op()
        if not isinstance(function, func.FuncOp):
            return
        result = _written_back_as(function, cache)
        terminator = function.body.block.last_op
        if result is None or not isinstance(terminator, func.ReturnOp):
            return
        if terminator.operands[result] is not op.outputs[0]:
            return
        index_type = element_type(positions.type)
        if not isinstance(index_type, IntegerType) or is_bool(index_type):
            return
        if len(shape_of(positions.type)) != 1 or not static_shapes(cache, positions, update):
            return
        rewriter.replace(
            op,
            npu.CacheUpdateOp.build(
                operands=[cache, positions, update],
                result_types=[cache.type],
                properties={"dim": args[1]},
            ),
        )


@dataclass(frozen=True)
class NpuUpdateStateInPlacePass(NpuPatternPass):
    name = "npu-update-state-in-place"

    def patterns(self) -> Sequence[RewritePattern]:
        return (IndexCopyInPlace(),)
