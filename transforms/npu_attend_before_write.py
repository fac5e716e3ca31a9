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

Preconditions (any one failing leaves the update alone): one position (a decode step;
several rows would need distinct positions, which the IR cannot show), a float cache,
static shapes, and a reader besides the write-back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, TensorType
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Attribute, Operation, SSAValue, Use
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from forge.dialects import npu
from forge.dialects.shapes import DYNAMIC, element_type, is_float, normalize_dim, shape_of
from forge.transforms.pattern_pass import NpuPatternPass


def _static(*values: SSAValue) -> bool:
    return all(DYNAMIC not in shape_of(v.type) for v in values)


def _is_write_back(use: Use) -> bool:
    return isinstance(use.operation, ReturnOp)


Selectors = dict[tuple[SSAValue, int, Attribute, int], tuple[SSAValue, SSAValue]]


class AttendBeforeWrite(RewritePattern):
    """The readers of a one-row cache update read the old cache with the new row
    selected in (see the module docstring). Updates at one position along the same
    dim share one pair of selectors."""

    def __init__(self) -> None:
        self.selectors: Selectors = {}

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.CacheUpdateOp, rewriter: PatternRewriter) -> None:
        if all(_is_write_back(use) for use in op.result.uses):
            return
        if shape_of(op.positions.type) != (1,) or not _static(op.cache, op.update, op.positions):
            return
        element = element_type(op.cache.type)
        if not is_float(element):
            return
        shape = shape_of(op.cache.type)
        dim = normalize_dim(op.dim.value.data, len(shape))
        # Ahead of the write: every reader of a cache must precede its update.
        at, off = self._selectors(op, shape[dim], len(shape) - 1 - dim, rewriter)
        selected = _select_row(op, at, off, rewriter)
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
        if known is not None and npu.runs_before(known[1].owner, update):  # type: ignore[arg-type]
            return known
        shape = [length, *[1] * trailing]
        self.selectors[key] = _row_selectors(update.positions, shape, element, rewriter, update)
        return self.selectors[key]


def _insert(rewriter: PatternRewriter, before: Operation, op: Operation) -> SSAValue:
    rewriter.insert(op, InsertPoint.before(before))
    return op.results[0]


def _row_selectors(
    positions: SSAValue,
    shape: list[int],
    element: Attribute,
    rewriter: PatternRewriter,
    before: Operation,
) -> tuple[SSAValue, SSAValue]:
    """`shape` ([rows, 1, ...]) floats: 1.0 at row `positions[0]` and 0.0 elsewhere,
    and the opposite.

    In float arithmetic, exact on small integers, so that all but the position's cast
    can run inside the graph (NNFactory has no integer compare):
    at = relu(1 - |rows - pos|), off = 1 - at."""
    column = TensorType(element, shape)
    rows = _insert(
        rewriter,
        before,
        npu.ConstantOp(
            DenseIntOrFPElementsAttr.from_list(column, [float(r) for r in range(shape[0])])  # type: ignore[arg-type]
        ),
    )
    position = _insert(
        rewriter, before, npu.CastOp(operands=[positions], result_types=[TensorType(element, [1])])
    )
    distance = _insert(
        rewriter, before, npu.SubOp(operands=[rows, position], result_types=[column])
    )
    distance = _insert(rewriter, before, npu.AbsOp(distance))
    at = _insert(rewriter, before, npu.ReluOp(_one_minus(distance, rewriter, before)))
    return at, _one_minus(at, rewriter, before)


def _one_minus(x: SSAValue, rewriter: PatternRewriter, before: Operation) -> SSAValue:
    negated = _insert(rewriter, before, npu.NegOp(x))
    one = FloatAttr(1.0, element_type(x.type))
    return _insert(
        rewriter,
        before,
        npu.AddOp(operands=[negated, []], result_types=[x.type], properties={"scalar": one}),
    )


def _select_row(
    update: npu.CacheUpdateOp, at: SSAValue, off: SSAValue, rewriter: PatternRewriter
) -> SSAValue:
    """cache * off + row * at, ahead of `update`: the cache as `update` leaves it."""
    cache_type = update.cache.type
    kept = npu.MulOp(operands=[update.cache, off], result_types=[cache_type])
    placed = npu.MulOp(operands=[update.update, at], result_types=[cache_type])
    kept_value = _insert(rewriter, update, kept)
    placed_value = _insert(rewriter, update, placed)
    total = npu.AddOp(operands=[kept_value, placed_value], result_types=[cache_type])
    return _insert(rewriter, update, total)


@dataclass(frozen=True)
class NpuAttendBeforeWritePass(NpuPatternPass):
    name = "npu-attend-before-write"

    def patterns(self) -> Sequence[RewritePattern]:
        return (AttendBeforeWrite(),)
