"""npu-fuse-cached-attention: a static-cache step's cache writes and its attention over
the written caches become one `npu.cached_attention`, which writes and attends at once.

A captured prefill or decode step writes each layer's new keys and values into the
cache and attends over the written cache under the step's causal mask:

    %k2 = npu.cache_update %key_cache[%pos] = %k {dim = 2 : i64} : ...
    %v2 = npu.cache_update %value_cache[%pos] = %v {dim = 2 : i64} : ...
    %a  = npu.sdpa %q, %k2, %v2, %mask : ...
    func.return ..., %k2, %v2         // npu.writes = [..., "key_cache", "value_cache"]

where `%mask` is 0.0 at cache row c for query row p when c <= %pos[0] + p and the
float minimum elsewhere (transformers' causal mask over a static cache, as captured:
`where(le(arange(C), %pos[0] + arange(P)), 0.0, min)`; with sdpa attention, the
boolean `le(...)` itself), with a sliding window of W
and-ed with `gt(arange(C), %pos[0] + arange(P) - W)` (Mistral, Qwen2, Gemma 2...: the
rewrite gives the op `window = W`, the paged node's `sliding_window`). The rewrite

    %s = npu.run_start %pos {capacity = C : i64} : tensor<Pxi64> -> tensor<1xi64>
    %a = npu.cached_attention %q, %k, %v into %key_cache, %value_cache at %s {scale = ...}
    func.return ..., %key_cache, %value_cache

says the same where `%pos` is a run of consecutive positions, which `npu.run_start`
checks at run time (the mask already assumes it: it is built from `%pos[0]`). One op a
layer is what OpenVINO's PagedAttentionExtension runs: the rows written into the
caller's cache and the attention in one node (conversion/cached_attention.py), in place
of the one-hot selection, the head transposes and the CPU's cache write of
npu-attend-before-write's form.

Preconditions (any one failing leaves the layer alone): both updates write dim 2 of a
[1, heads, C, head_dim] f32 cache at the mask's positions, C is a multiple of `block`
(the positions a cache block holds: OpenVINO's CPU plugin pages f32 caches by 32), the
attention reads exactly those two updates under that mask, not causal otherwise, with a
query of batch 1, and the updates' results go nowhere but to the attention and the
write-back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, TensorType, f64, i64
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from forge.dialects import npu
from forge.dialects.shapes import (
    DYNAMIC,
    element_type,
    is_bool,
    is_float,
    normalize_dim,
    shape_of,
)
from forge.target.capabilities import PAGED_BLOCK
from forge.transforms.matchers import (
    constant_of,
    erase_dead_producers,
    scalar_value,
    splat_value,
)
from forge.transforms.pattern_pass import NpuPatternPass

MASKED = -1e30
"""A mask value at or below this hides its cache row (transformers uses the float minimum)."""


def _ints_of(value: SSAValue) -> list[int] | None:
    """The values of an integer `npu.constant`, or None."""
    constant = constant_of(value)
    if constant is None:
        return None
    values = constant.value.get_values()
    return [int(v) for v in values] if all(isinstance(v, int) for v in values) else None


def _strip_unsqueezes(value: SSAValue) -> SSAValue:
    while isinstance(value.owner, npu.UnsqueezeOp):
        value = value.owner.input
    return value


def _first_position(value: SSAValue) -> SSAValue | None:
    """`positions` when `value` is `positions[0]` (`aten.select.int(positions, 0, 0)`,
    possibly made contiguous)."""
    if isinstance(value.owner, npu.ContiguousOp):
        value = value.owner.input
    select = value.owner
    if not isinstance(select, npu.GenericOp) or select.opcode != "aten.select.int":
        return None
    args = [a.value.data if isinstance(a, IntegerAttr) else None for a in select.args.data[1:]]
    if len(select.inputs) != 1 or args != [0, 0]:
        return None
    return select.inputs[0]


def _run_of(rows: SSAValue) -> SSAValue | None:
    """`positions` when `rows` is `arange(P) + positions[0]`."""
    add = rows.owner
    if not isinstance(add, npu.AddOp) or add.rhs is None:
        return None
    for offsets, first in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
        values = _ints_of(offsets)
        if values is None or values != list(range(len(values))):
            continue
        positions = _first_position(first)
        if positions is not None and shape_of(positions.type) == (len(values),):
            return positions
    return None


def _against_columns(
    compare: Operation, kind: type[npu.CompareOp], capacity: int
) -> SSAValue | None:
    """The right side when `compare` is a `kind` comparison of the cache's columns,
    `arange(capacity)` shaped [1, 1, 1, capacity], with a tensor."""
    if not isinstance(compare, kind) or compare.rhs is None:
        return None
    if _ints_of(compare.lhs) != list(range(capacity)):
        return None
    if shape_of(compare.lhs.type) != (1, 1, 1, capacity):
        return None
    return compare.rhs


def _causal_rows(compare: Operation, capacity: int, rows: int) -> SSAValue | None:
    """The [1, 1, rows, 1] query positions when `compare` is `le(arange(capacity), them)`
    (cache row c seen by query row p when c <= p's position)."""
    positions = _against_columns(compare, npu.LeOp, capacity)
    if positions is None or shape_of(positions.type) != (1, 1, rows, 1):
        return None
    return positions


def _window(value: SSAValue, capacity: int, query_rows: SSAValue) -> int | None:
    """W when `value` is `gt(arange(capacity), query_rows - W)` (cache row c seen when
    c > p's position - W: transformers' sliding window of W), possibly and-ed with a
    splat true first, as transformers' mask functions leave it."""
    owner = value.owner
    if isinstance(owner, npu.AndOp) and owner.rhs is not None:
        if splat_value(owner.lhs) == 1.0:
            owner = owner.rhs.owner
        elif splat_value(owner.rhs) == 1.0:
            owner = owner.lhs.owner
    bound = _against_columns(owner, npu.GtOp, capacity)
    if bound is None:
        return None
    start = bound.owner
    if not isinstance(start, npu.SubOp) or start.rhs is not None or start.lhs is not query_rows:
        return None
    if not isinstance(start.scalar, IntegerAttr) or start.scalar.value.data < 1:
        return None
    return start.scalar.value.data


@dataclass(frozen=True)
class StepMask:
    """What a step's mask over a static cache says: the run it is built from, and the
    sliding window (0: none)."""

    positions: SSAValue
    window: int = 0


def _seen(mask: SSAValue, capacity: int, rows: int) -> Operation | None:
    """What makes cache row c seen by query row p in a step's mask shaped [1, 1, rows,
    capacity]: the mask itself when boolean (sdpa attends where it is true, as
    transformers' sdpa masks are), else `seen` of `where(seen, 0.0, hidden)`."""
    if shape_of(mask.type) != (1, 1, rows, capacity):
        return None
    if is_bool(element_type(mask.type)):
        return mask.owner if isinstance(mask.owner, Operation) else None
    where = mask.owner
    if not isinstance(where, npu.WhereOp) or where.on_false is not None:
        return None
    hidden = scalar_value(where.scalar)
    if splat_value(where.on_true) != 0.0 or hidden is None or hidden > MASKED:
        return None
    return where.cond.owner if isinstance(where.cond.owner, Operation) else None


def step_mask(mask: SSAValue, capacity: int, rows: int) -> StepMask | None:
    """The step's run and window when `mask` is the causal mask of a step at the run
    starting at `positions[0]` over a cache of `capacity` rows (`_seen`): cache row c
    seen by query row p where c <= positions[0] + p (and, with a window W,
    c > positions[0] + p - W)."""
    seen = _seen(mask, capacity, rows)
    if seen is None:
        return None
    query_rows = _causal_rows(seen, capacity, rows)
    if query_rows is not None:
        positions = _run_of(_strip_unsqueezes(query_rows))
        return StepMask(positions) if positions is not None else None
    if not isinstance(seen, npu.AndOp) or seen.rhs is None:
        return None
    for causal, windowed in ((seen.lhs, seen.rhs), (seen.rhs, seen.lhs)):
        query_rows = _causal_rows(causal.owner, capacity, rows)
        if query_rows is None:
            continue
        window = _window(windowed, capacity, query_rows)
        positions = _run_of(_strip_unsqueezes(query_rows))
        if window is not None and positions is not None:
            return StepMask(positions, window)
    return None


def _written_back(update: npu.CacheUpdateOp, attention: npu.SDPAOp) -> bool:
    """Whether the update's result goes to `attention` once and otherwise only to the
    function's write-back."""
    users = [use.operation for use in update.result.uses]
    return users.count(attention) == 1 and all(
        user is attention or isinstance(user, func.ReturnOp) for user in users
    )


def _run_start(
    positions: SSAValue, capacity: int, block: Block, rewriter: PatternRewriter
) -> SSAValue:
    """The step's `npu.run_start` of `positions`, made once, where they are defined."""
    for use in positions.uses:
        op = use.operation
        if isinstance(op, npu.RunStartOp) and op.capacity.value.data == capacity:
            return op.result
    start = npu.RunStartOp.build(
        operands=[positions],
        result_types=[TensorType(element_type(positions.type), [1])],
        properties={"capacity": IntegerAttr(capacity, i64)},
    )
    if isinstance(positions.owner, Operation):
        point = InsertPoint.after(positions.owner)
    else:
        point = InsertPoint.at_start(block)
    rewriter.insert(start, point)
    return start.result


@dataclass
class FuseCachedAttention(RewritePattern):
    """Two cache updates and the causal attention over them -> `npu.cached_attention`."""

    block: int = PAGED_BLOCK

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.SDPAOp, rewriter: PatternRewriter) -> None:
        if op.mask is None or op.is_causal is not None:
            return
        keys, values = op.key.owner, op.value.owner
        if not isinstance(keys, npu.CacheUpdateOp) or not isinstance(values, npu.CacheUpdateOp):
            return
        if keys is values or keys.positions is not values.positions:
            return
        caches = (keys.cache, values.cache)
        if not all(isinstance(c, BlockArgument) and c.has_one_use() for c in caches):
            return
        cache = shape_of(keys.cache.type)
        query = shape_of(op.query.type)
        if len(cache) != 4 or DYNAMIC in cache or len(query) != 4 or query[0] != 1:
            return
        if shape_of(values.cache.type) != cache or cache[2] % self.block:
            return
        if any(normalize_dim(u.dim.value.data, 4) != 2 for u in (keys, values)):
            return
        if not all(_written_back(u, op) for u in (keys, values)):
            return
        floats = [element_type(v.type) for v in (op.query, *caches)]
        if not all(is_float(t) and str(t) == "f32" for t in floats):
            return
        step = step_mask(op.mask, cache[2], query[2])
        if step is None or step.positions is not keys.positions:
            return
        scale = op.scale.value.data if op.scale is not None else 1.0 / math.sqrt(query[-1])
        block = op.parent_block()
        assert block is not None
        start = _run_start(step.positions, cache[2], block, rewriter)
        properties: dict[str, Attribute] = {"scale": FloatAttr(scale, f64)}
        if step.window:
            properties["window"] = IntegerAttr(step.window, i64)
        fused = npu.CachedAttentionOp.build(
            operands=[op.query, keys.update, values.update, keys.cache, values.cache, start],
            result_types=[op.result.type],
            properties=properties,
        )
        mask = op.mask
        rewriter.replace(op, fused)
        for update in (keys, values):
            rewriter.replace_all_uses_with(update.result, update.cache)
            rewriter.erase(update)
        erase_dead_producers([mask], rewriter)


@dataclass(frozen=True)
class NpuFuseCachedAttentionPass(NpuPatternPass):
    name = "npu-fuse-cached-attention"

    block: int = PAGED_BLOCK
    """Positions per cache block: the cache's capacity must be a multiple."""

    def __post_init__(self) -> None:
        if self.block < 1:
            raise ValueError(f"block must be at least 1, got {self.block}")

    def patterns(self) -> Sequence[RewritePattern]:
        return (FuseCachedAttention(self.block),)
