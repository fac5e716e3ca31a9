"""npu-attend-before-write: decode attention reads the cache before its write, with the
new row selected in, so the write no longer sits between two graphs.

A decode step writes each layer's new key and value row into the cache and attends
over the written cache:

    %k = npu.cache_update %key_cache[%pos] = %k_row {dim = 2 : i64} : ...
    %v = npu.cache_update %value_cache[%pos] = %v_row {dim = 2 : i64} : ...
    %a = npu.sdpa %q, %k, %v, %mask : ...

The write runs on the CPU (NNFactory has no scatter) and the attention needs it, so
every layer is a graph, a CPU step and another graph: 13 NNFactory graphs per GPT-2
token. The written cache is the old one at every row but `%pos`, and the new row there,
which a graph can compute without the write:

    %at  = relu(1 - |%rows - cast(%pos)|)         // [C, 1]: 1.0 at row %pos, else 0.0
    %off = 1 - %at                                 // [C, 1]: the opposite
    %k2  = npu.add (npu.mul %key_cache, %off), (npu.mul %k_row, %at)
    %v2  = npu.add (npu.mul %value_cache, %off), (npu.mul %v_row, %at)
    %a   = npu.sdpa %q, %k2, %v2, %mask

Each row of `%k2` is one of the two terms plus an exact zero (x * 1.0 and x * 0.0 are
exact for finite x), so `%k2` equals the written cache bit for bit and the attention
computes exactly what it did (the selectors are float arithmetic on small integers,
exact too). Only the position's cast to float runs on the CPU (NNFactory has no integer
compare or cast); nothing in the graph waits for the writes, which move after it: one
graph per step. The cache is read before its update (the update stays: it is what
the step writes back), and npu-schedule-affinity keeps every reader of a cache ahead of
the `npu.cache_update` that writes it.

Preconditions (any one failing leaves the attention alone): key and value are
`npu.cache_update` results with finite-float caches, over the same positions, one
position (a decode step), along the key/value sequence dim, with static shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from forge.dialects import npu
from forge.dialects.shapes import DYNAMIC, element_type, is_float, normalize_dim, shape_of
from forge.transforms.pattern_pass import NpuPatternPass


def _static(*values: SSAValue) -> bool:
    return all(DYNAMIC not in shape_of(v.type) for v in values)


def _update_of(value: SSAValue) -> npu.CacheUpdateOp | None:
    op = value.owner
    return op if isinstance(op, npu.CacheUpdateOp) else None


def _one_position_row(update: npu.CacheUpdateOp, key_rank: int) -> bool:
    """The update writes one row along the key/value sequence dim (rank - 2)."""
    dim = normalize_dim(update.dim.value.data, key_rank)
    return dim == key_rank - 2 and shape_of(update.positions.type) == (1,)


class AttendBeforeWrite(RewritePattern):
    """sdpa over two single-row cache updates -> sdpa over the old caches with the
    new rows selected in (see the module docstring). Layers that write at the same
    position share one pair of selectors."""

    def __init__(self) -> None:
        self.selectors: dict[tuple[SSAValue, int, Attribute], tuple[SSAValue, SSAValue]] = {}

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.SDPAOp, rewriter: PatternRewriter) -> None:
        key, value = _update_of(op.key), _update_of(op.value)
        if key is None or value is None or key.positions is not value.positions:
            return
        if not _static(op.key, op.value, key.update, value.update, key.positions):
            return
        rank = len(shape_of(op.key.type))
        if not (_one_position_row(key, rank) and _one_position_row(value, rank)):
            return
        element = element_type(op.key.type)
        if not is_float(element) or element_type(op.value.type) != element:
            return
        length = shape_of(op.key.type)[-2]
        if shape_of(op.value.type)[-2] != length:
            return
        # Ahead of both writes: every reader of a cache must precede its update.
        block = op.parent_block()
        assert block is not None
        first = min(key, value, key=block.get_operation_index)
        at, off = self._selectors(key.positions, length, element, rewriter, first)
        new_key = _select_row(key, at, off, rewriter, first)
        new_value = _select_row(value, at, off, rewriter, first)
        op.operands[1] = new_key
        op.operands[2] = new_value
        rewriter.handle_operation_modification(op)

    def _selectors(
        self,
        positions: SSAValue,
        length: int,
        element: Attribute,
        rewriter: PatternRewriter,
        before: Operation,
    ) -> tuple[SSAValue, SSAValue]:
        """The selectors of an earlier layer at `positions`, if they come before
        `before`; new ones otherwise."""
        key = (positions, length, element)
        known = self.selectors.get(key)
        if known is not None and _precedes(known[1].owner, before):
            return known
        self.selectors[key] = _row_selectors(positions, length, element, rewriter, before)
        return self.selectors[key]


def _precedes(op: Operation | object, before: Operation) -> bool:
    block = before.parent_block()
    if not isinstance(op, Operation) or block is None or op.parent_block() is not block:
        return False
    return block.get_operation_index(op) < block.get_operation_index(before)


def _insert(rewriter: PatternRewriter, before: Operation, op: Operation) -> SSAValue:
    rewriter.insert(op, InsertPoint.before(before))
    return op.results[0]


def _row_selectors(
    positions: SSAValue,
    length: int,
    element: Attribute,
    rewriter: PatternRewriter,
    before: Operation,
) -> tuple[SSAValue, SSAValue]:
    """[length, 1] floats: 1.0 at row `positions[0]` and 0.0 elsewhere, and the opposite.

    In float arithmetic, exact on small integers, so that all but the position's cast
    can run inside the graph (NNFactory has no integer compare):
    at = relu(1 - |rows - pos|), off = 1 - at."""
    column = TensorType(element, [length, 1])
    rows = _insert(
        rewriter,
        before,
        npu.ConstantOp(
            DenseIntOrFPElementsAttr.from_list(column, [float(r) for r in range(length)])  # type: ignore[arg-type]
        ),
    )
    position = _insert(
        rewriter, before, npu.CastOp(operands=[positions], result_types=[TensorType(element, [1])])
    )
    distance = _insert(
        rewriter, before, npu.SubOp(operands=[rows, position], result_types=[column])
    )
    distance = _insert(rewriter, before, npu.AbsOp(distance))
    near = _unary_scalar(npu.NegOp, distance, 1.0, rewriter, before)  # 1 - |rows - pos|
    at = _insert(rewriter, before, npu.ReluOp(near))
    off = _unary_scalar(npu.NegOp, at, 1.0, rewriter, before)  # 1 - at
    return at, off


def _unary_scalar(
    unary: type[npu.UnaryOp],
    x: SSAValue,
    plus: float,
    rewriter: PatternRewriter,
    before: Operation,
) -> SSAValue:
    """unary(x) + plus."""
    y = _insert(rewriter, before, unary(x))
    scalar = FloatAttr(plus, element_type(x.type))
    add = npu.AddOp(operands=[y, []], result_types=[x.type], properties={"scalar": scalar})
    return _insert(rewriter, before, add)


def _select_row(
    update: npu.CacheUpdateOp,
    at: SSAValue,
    off: SSAValue,
    rewriter: PatternRewriter,
    before: Operation,
) -> SSAValue:
    """cache * off + row * at: the cache as `update` leaves it, computed from its inputs."""
    cache_type = update.cache.type
    row_type = TensorType(element_type(cache_type), shape_of(update.cache.type))
    kept = _insert(
        rewriter, before, npu.MulOp(operands=[update.cache, off], result_types=[cache_type])
    )
    placed = _insert(
        rewriter, before, npu.MulOp(operands=[update.update, at], result_types=[row_type])
    )
    return _insert(rewriter, before, npu.AddOp(operands=[kept, placed], result_types=[cache_type]))


@dataclass(frozen=True)
class NpuAttendBeforeWritePass(NpuPatternPass):
    name = "npu-attend-before-write"

    def patterns(self) -> Sequence[RewritePattern]:
        return (AttendBeforeWrite(),)
