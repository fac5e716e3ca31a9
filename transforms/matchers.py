"""What the fusion and folding passes share: use checks, constant matchers, view
matchers and dead-op cleanup after a rewrite.

A shared helper module like `pattern_pass.py`, not a pass. A matcher that two
passes need lives here once, so that they agree on what, say, "a scalar 1" or "a
transpose of the last two dims" means.

The pass driver runs without DCE (`CountingApplier`), so a rewrite that consumes a
chain of ops erases what it left dead itself: otherwise the pass's own output would
still show the pieces, and the op counts it reports would not move.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from forge.dialects import npu
from forge.dialects.shapes import DYNAMIC, normalize_dim, shape_of
from forge.transforms.pattern_pass import side_effect_free

# ------------------------------------------------------------------------- uses


def single_use(value: SSAValue) -> bool:
    """Whether `value` has exactly one use: a rewrite may then consume it."""
    return value.has_one_use()


def only_user(value: SSAValue, user: Operation) -> bool:
    """Whether `user` is the single use of `value`: fusing otherwise would keep the
    intermediate alive and compute it twice."""
    return value.get_user_of_unique_use() is user


def static_shapes(*values: SSAValue) -> bool:
    """Whether every one of `values` has a fully static shape."""
    return all(DYNAMIC not in shape_of(v.type) for v in values)


# -------------------------------------------------------------------- constants


def scalar_value(attr: Attribute | None) -> float | None:
    """The number a `scalar` property stands for (an `i1` true, stored as -1, is 1),
    or None when there is none."""
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        return float(bool(value)) if attr.type.width.data == 1 else float(value)
    if isinstance(attr, FloatAttr):
        return attr.value.data
    return None


def constant_of(value: SSAValue) -> npu.ConstantOp | None:
    """The `npu.constant` defining `value`, or None."""
    owner = value.owner
    return owner if isinstance(owner, npu.ConstantOp) else None


def splat_value(value: SSAValue) -> float | None:
    """The single value of a splat `npu.constant` (every element equal, a one-element
    constant included), or None if `value` is not one."""
    constant = constant_of(value)
    if constant is None:
        return None
    values = constant.value.get_values()
    if not values or values.count(values[0]) != len(values):
        return None
    first = values[0]
    if isinstance(first, tuple):  # complex
        return None
    element = constant.value.get_element_type()
    if isinstance(element, IntegerType) and element.width.data == 1:
        return float(bool(first))
    return float(first)


# ------------------------------------------------------------------------ views


def swapped_last_two_dims(value: SSAValue) -> tuple[Operation, SSAValue] | None:
    """If `value` is a transpose (or the equivalent permute) of exactly the last two
    dims of some `x`: (that view op, x). Matmuls and sdpa read such a `b^T` natively."""
    op = value.owner
    rank = len(shape_of(value.type))
    if rank < 2:
        return None
    if isinstance(op, npu.TransposeOp):
        dims = {normalize_dim(op.dim0.value.data, rank), normalize_dim(op.dim1.value.data, rank)}
        if dims == {rank - 2, rank - 1}:
            return op, op.input
    if isinstance(op, npu.PermuteOp):
        dims = [normalize_dim(d, rank) for d in op.dims.get_values()]
        if dims == [*range(rank - 2), rank - 1, rank - 2]:
            return op, op.input
    return None


# ---------------------------------------------------------------------- erasing


def is_unused(op: Operation) -> bool:
    """Still in a block, and no result has a use: safe to erase."""
    return op.parent is not None and not any(result.uses for result in op.results)


def erase_unused(ops: Iterable[Operation], rewriter: PatternRewriter) -> None:
    """Erase, in the given order, the listed ops nobody uses any more. List consumers
    before their producers: a producer is free only once its consumers are gone."""
    for op in ops:
        if is_unused(op):
            rewriter.erase(op)


def erase_dead_producers(values: Iterable[SSAValue], rewriter: PatternRewriter) -> None:
    """Erase the pure npu ops behind `values` that a rewrite left without users, and
    recursively the producers those leave dead. Ops with side effects stay."""
    work = [value.owner for value in values]
    while work:
        op = work.pop()
        if not isinstance(op, npu.NpuOp) or not is_unused(op) or not side_effect_free(op):
            continue
        work.extend(operand.owner for operand in op.operands)
        rewriter.erase(op)


def replace_and_erase_producers(
    op: Operation,
    new_ops: Operation | Sequence[Operation],
    new_values: Sequence[SSAValue | None] | None,
    rewriter: PatternRewriter,
) -> None:
    """`rewriter.replace(op, new_ops, new_values)` (callers have checked the types
    match), then erase the pure producers that fed only `op`."""
    operands = list(op.operands)
    rewriter.replace(op, new_ops, new_values)
    erase_dead_producers(operands, rewriter)
