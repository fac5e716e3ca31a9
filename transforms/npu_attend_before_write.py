"""npu-attend-before-write: what reads a decode step's cache write reads the cache before
the write, with the new row selected in, so the write no longer sits between two graphs.

A decode step writes each layer's new key and value row into the cache and attends
over the written cache (through GQA's repeat_kv views in Llama-like models):

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
exact for finite x), so `%k2` equals the written cache bit for bit and every reader
computes exactly what it did (the selectors are float arithmetic on small integers,
exact too). Only the position's cast to float runs on the CPU (NNFactory has no integer
compare or cast), once per position: updates at one position along one dim share the
selectors. Nothing in the graph waits for the writes, which move after it: one graph
per step. The update stays (it is what the step writes back; its other readers now read
`%k2`), and the new readers of the cache are placed before it: npu-schedule-affinity
keeps every reader of a cache ahead of the `npu.cache_update` that writes it.

A prefill chunk writes P rows at once (positions [P]), and the same holds with a
[C, P] selector instead of a column: `%at[c, p]` is 1.0 where position p is row c,

    %at   = relu(1 - |%rows - cast(%pos)|) * %last   // [C, P]
    %off  = 1 - sum(%at, 1)                           // [C, 1]
    %k2   = npu.add (npu.mul %key_cache, %off), (npu.matmul %at, %k_rows)

where `%last[p]` is 0.0 when a later p' writes the same row (`index_copy` keeps the last
write: rows a position repeats are written once, by the last), so each row of `%k2` is
one row of the cache or of the update plus exact zeros, bit for bit the written cache.
With it the prefill is one graph too, instead of one per layer (every graph call costs
OpenVINO's start and its boundary copies: about 0.6 ms each for GPT-2's 14 graphs).
The rows are placed by a MatMul, so the rows must lie along the cache's second-to-last
dim (the [batch, heads, positions, head_dim] layout of HF caches).

The MatMul costs 2 * C * (the update's size) FLOP per update, which grows with the
cache: GPT-2's 100-token prefill took 102.0 ms as one graph against 107.6 ms as 14 with
a cache of 132 positions, but 142.1 against 128.8 ms with 1,024 (AMD EPYC Zen 4, 2
cores). With a host profile (`profile=PATH`, as npu-place-devices) a several-row
update is selected in only when that MatMul's time at the profile's graph GFLOP/s is
at most half of what the profile measured one more graph boundary to cost (a layer
has two updates, keys and values, and its boundary goes when both do); without one,
always.

Preconditions (any one failing leaves the update alone): a float cache, static shapes,
a reader besides the write-back, for several rows the row dim second to last and,
with a profile, the cost above. All values finite (as everywhere in the select: 0.0 *
inf is NaN).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Attribute, Operation, SSAValue, Use
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from forge.dialects import contract, npu
from forge.dialects.shapes import element_type, is_float, normalize_dim, shape_of
from forge.transforms.host_profile import check_profile_option, load_profile
from forge.transforms.matchers import static_shapes
from forge.transforms.pattern_pass import NpuPatternPass


def _is_write_back(use: Use) -> bool:
    return isinstance(use.operation, ReturnOp)


Selectors = dict[tuple[SSAValue, int, Attribute, int], tuple[SSAValue, SSAValue]]


class AttendBeforeWrite(RewritePattern):
    """The readers of a cache update read the old cache with the new rows selected in
    (see the module docstring). Updates at the same positions along the same dim share
    their selectors. `budget_ms`: the most a several-row update's MatMul may cost (None:
    no limit); `gflops`: what that cost is reckoned at."""

    def __init__(self, budget_ms: float | None = None, gflops: float = 1.0) -> None:
        self.selectors: Selectors = {}
        self.budget_ms = budget_ms
        self.gflops = gflops

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.CacheUpdateOp, rewriter: PatternRewriter) -> None:
        if all(_is_write_back(use) for use in op.result.uses):
            return
        if not static_shapes(op.cache, op.update, op.positions):
            return
        element = element_type(op.cache.type)
        if not is_float(element):
            return
        shape = shape_of(op.cache.type)
        dim = normalize_dim(op.dim.value.data, len(shape))
        count = shape_of(op.positions.type)
        if len(count) != 1 or (count[0] > 1 and dim != len(shape) - 2):
            return
        if count[0] > 1 and self.budget_ms is not None:
            flop = 2 * shape[dim] * math.prod(shape_of(op.update.type))
            if flop / self.gflops / 1e6 > self.budget_ms:
                return
        # Ahead of the write: every reader of a cache must precede its update.
        at, off = self._selectors(op, shape[dim], len(shape) - 1 - dim, rewriter)
        selected = _select(op, at, off, rewriter)
        rewriter.replace_uses_with_if(op.result, selected, lambda use: not _is_write_back(use))
        selected.name_hint = None  # the name stays with the update, which is written back

    def _selectors(
        self, update: npu.CacheUpdateOp, length: int, trailing: int, rewriter: PatternRewriter
    ) -> tuple[SSAValue, SSAValue]:
        """The selectors of an earlier update at the same positions, if they come
        before `update`; new ones otherwise."""
        element = element_type(update.cache.type)
        key = (update.positions, length, element, trailing)
        known = self.selectors.get(key)
        if known is not None and contract.runs_before(known[1].owner, update):
            return known
        shape = [length, *[1] * trailing]
        self.selectors[key] = _new_selectors(update.positions, shape, element, rewriter, update)
        return self.selectors[key]


def _insert(rewriter: PatternRewriter, before: Operation, op: Operation) -> SSAValue:
    rewriter.insert(op, InsertPoint.before(before))
    return op.results[0]


def _new_selectors(
    positions: SSAValue,
    shape: list[int],
    element: Attribute,
    rewriter: PatternRewriter,
    before: Operation,
) -> tuple[SSAValue, SSAValue]:
    """(at, off) in float arithmetic, exact on small integers, so that all but the
    positions' cast can run inside the graph (NNFactory has no integer compare).

    One position: `shape` ([rows, 1, ...]) floats, at = relu(1 - |rows - pos|) (1.0 at
    row `positions[0]`, 0.0 elsewhere) and off = 1 - at. P positions: at is [C, P],
    1.0 where position p writes row c (the last p, if several write it), and off [C, 1]
    1.0 at the rows no position writes."""
    count, length = shape_of(positions.type)[0], shape[0]
    rows = _row_numbers(shape, element, rewriter, before)  # [C, 1] for several rows
    position = _cast(positions, element, rewriter, before)
    if count == 1:
        at = _near(rows, position, TensorType(element, shape), rewriter, before)
        return at, _one_minus(at, rewriter, before)
    grid = TensorType(element, [length, count])
    at = _near(rows, position, grid, rewriter, before)
    # A position p' > p writing the same row as p: p's write is overwritten.
    column = _insert(
        rewriter,
        before,
        npu.ViewOp(operands=[position], result_types=[TensorType(element, [count, 1])]),
    )
    pairs = TensorType(element, [count, count])
    same = _near(column, position, pairs, rewriter, before)
    after = DenseIntOrFPElementsAttr.from_list(
        pairs,
        [1.0 if j > i else 0.0 for i in range(count) for j in range(count)],
    )
    later = _insert(rewriter, before, npu.ConstantOp(after))
    overwritten = _insert(rewriter, before, npu.MulOp(operands=[same, later], result_types=[pairs]))
    overwrites = _insert(rewriter, before, _sum(overwritten, [count], keepdim=False))
    last = _insert(rewriter, before, npu.ReluOp(_one_minus(overwrites, rewriter, before)))
    at = _insert(rewriter, before, npu.MulOp(operands=[at, last], result_types=[grid]))
    written = _insert(rewriter, before, _sum(at, [length, 1], keepdim=True))
    return at, _one_minus(written, rewriter, before)


def _row_numbers(
    shape: list[int], element: Attribute, rewriter: PatternRewriter, before: Operation
) -> SSAValue:
    """`shape` ([rows, 1, ...]) floats: each row's number."""
    numbers = [float(r) for r in range(shape[0])]
    attr = DenseIntOrFPElementsAttr.from_list(TensorType(element, shape), numbers)
    return _insert(rewriter, before, npu.ConstantOp(attr))


def _cast(
    positions: SSAValue, element: Attribute, rewriter: PatternRewriter, before: Operation
) -> SSAValue:
    """The positions as floats (the one op of the selectors that runs on the CPU)."""
    result = TensorType(element, shape_of(positions.type))
    return _insert(rewriter, before, npu.CastOp(operands=[positions], result_types=[result]))


def _near(
    a: SSAValue, b: SSAValue, result: TensorType, rewriter: PatternRewriter, before: Operation
) -> SSAValue:
    """relu(1 - |a - b|): 1.0 where the (integer-valued) a and b are equal, else 0.0."""
    distance = _insert(rewriter, before, npu.SubOp(operands=[a, b], result_types=[result]))
    distance = _insert(rewriter, before, npu.AbsOp(distance))
    return _insert(rewriter, before, npu.ReluOp(_one_minus(distance, rewriter, before)))


def _one_minus(x: SSAValue, rewriter: PatternRewriter, before: Operation) -> SSAValue:
    negated = _insert(rewriter, before, npu.NegOp(x))
    one = FloatAttr(1.0, element_type(x.type))
    return _insert(
        rewriter,
        before,
        npu.AddOp(operands=[negated, []], result_types=[x.type], properties={"scalar": one}),
    )


def _sum(x: SSAValue, shape: list[int], keepdim: bool) -> npu.SumOp:
    """`x` summed over its last dim, as `shape`."""
    properties: dict[str, Attribute] = {"dims": DenseArrayBase.from_list(i64, [-1])}
    if keepdim:
        properties["keepdim"] = UnitAttr()
    return npu.SumOp(
        operands=[x],
        result_types=[TensorType(element_type(x.type), shape)],
        properties=properties,
    )


def _select(
    update: npu.CacheUpdateOp, at: SSAValue, off: SSAValue, rewriter: PatternRewriter
) -> SSAValue:
    """cache * off + the new rows where they go (row * at for one, at @ rows for
    several), ahead of `update`: the cache as `update` leaves it."""
    cache_type = update.cache.type
    kept = _insert(
        rewriter, update, npu.MulOp(operands=[update.cache, off], result_types=[cache_type])
    )
    if shape_of(update.positions.type)[0] == 1:
        placed = npu.MulOp(operands=[update.update, at], result_types=[cache_type])
    else:
        placed = npu.MatmulOp(operands=[at, update.update], result_types=[cache_type])
    placed_value = _insert(rewriter, update, placed)
    total = npu.AddOp(operands=[kept, placed_value], result_types=[cache_type])
    return _insert(rewriter, update, total)


@dataclass(frozen=True)
class NpuAttendBeforeWritePass(NpuPatternPass):
    name = "npu-attend-before-write"

    profile: str | None = None
    """A host profile (JSON, `forge.runtime.host_profile`): several-row updates are
    selected in only where it measured that cheaper than a graph boundary."""

    def __post_init__(self) -> None:
        check_profile_option(self.profile)

    def patterns(self) -> Sequence[RewritePattern]:
        if self.profile is None:
            return (AttendBeforeWrite(),)
        host = load_profile(self.profile)
        return (AttendBeforeWrite(host.graph_split_ms() / 2, host.graph_gflops()),)
