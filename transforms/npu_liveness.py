"""npu-liveness: the live interval [s, e] of every vreg, by one backward walk (Phase 4).

Positions are 0-based indices among the function block's ops, in their current order
(scheduling may reorder them; rerun this pass afterwards). `s` is the position of the
defining op and `e` that of the last use: a value used by `func.return` lives until
the return, a value never used dies where it is defined (e = s). Every npu op gets
`live` (one `[s, e]` pair per result) and `dead_after` (the sorted vregs whose last
use it is, so that an executor may drop them right after running it). Function
results escape to the caller: they are never dead, so no `dead_after` lists them.

Views share storage with their operand in ATen (view, reshape, transpose, slice,
split, eval-mode dropout, aten.alias, ...), and so does `npu.cache_update` (its
result is the state argument it wrote in place). `live` stays honest, each value's own
definition and last use, because that is what the op order says. The alias structure
goes into `Liveness.alias_root` instead: npu-linear-scan merges each root with its
views, so that the root's storage outlives every use of every view.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import BytesAttr, DenseArrayBase, ModuleOp, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from forge.dialects import npu
from forge.support.diagnostics import op_error
from forge.transforms.npu_assign_vregs import assign_vregs
from forge.transforms.pattern_pass import run_on_functions

VIEW_OPCODES = npu.ATEN_VIEW_OPCODES

SELF_IF_UNCHANGED = frozenset({"aten.to.device", "aten.to.dtype", "aten.to.dtype_layout"})
"""ATen `to` returns its operand itself when nothing changes: then it is a view too."""


def is_view(op: Operation) -> bool:
    """Whether `op`'s results share storage with its first operand (need no storage)."""
    if isinstance(op, npu.ShapeOp | npu.SplitOp | npu.CacheUpdateOp):
        return True  # a cache update's result is its cache, written in place
    if isinstance(op, npu.DropoutOp):
        return op.train is None
    if isinstance(op, npu.CastOp):
        return op.result.type == op.input.type
    if isinstance(op, npu.GenericOp) and op.inputs:
        if op.opcode in VIEW_OPCODES:
            return True
        if op.opcode in SELF_IF_UNCHANGED:
            return len(op.outputs) == 1 and op.outputs[0].type == op.inputs[0].type
    return False


@dataclass
class Liveness:
    """Live intervals of one function's vregs, in its current op order."""

    intervals: dict[int, tuple[int, int]]
    """vreg -> [s, e]: its own definition and last use, aliases not merged."""
    dead_after: dict[int, list[int]]
    """position -> sorted vregs whose last use is the op there (function results never)."""
    vreg_of: dict[SSAValue, int]
    """Every npu op result -> its vreg."""
    values: dict[int, SSAValue] = field(default_factory=dict)
    """vreg -> value (the inverse of `vreg_of`)."""
    alias_root: dict[int, int | None] = field(default_factory=dict)
    """View vreg -> the vreg whose storage it shares (transitively), or None when it views
    storage the caller owns (a function argument: an input or a weight)."""
    results: frozenset[int] = frozenset()
    """vregs used by `func.return`: they live until the return and outlive the function."""
    num_ops: int = 0


def _vregs(function: func.FuncOp) -> dict[SSAValue, int]:
    """The vreg of every npu op result, as the IR numbers them; numbers them if needed."""
    ops = [op for op in function.body.block.ops if isinstance(op, npu.NpuOp) and op.results]
    if any(op.vreg is None for op in ops):
        assign_vregs(function)
    vreg_of: dict[SSAValue, int] = {}
    for op in ops:
        assert op.vreg is not None
        base = op.vreg.value.data
        for i, result in enumerate(op.results):
            vreg_of[result] = base + i
    if len(set(vreg_of.values())) != len(vreg_of):
        raise op_error(function, "two values share a vreg; rerun npu-assign-vregs")
    return vreg_of


def compute_liveness(function: func.FuncOp) -> Liveness:
    """Live interval of every vreg of `function` (assigning vregs first if missing)."""
    vreg_of = _vregs(function)
    ops = list(function.body.block.ops)
    intervals: dict[int, tuple[int, int]] = {}
    dead_after: dict[int, list[int]] = {}
    results: set[int] = set()
    last_use: dict[int, int] = {}
    # Backward walk: the first use met is the last one; a definition closes the interval.
    for pos in range(len(ops) - 1, -1, -1):
        op = ops[pos]
        dying: list[int] = []
        for result in op.results:
            if (v := vreg_of.get(result)) is None:
                continue
            end = last_use.pop(v, None)
            if end is None:  # never used: dies where it is defined
                end = pos
                dying.append(v)
            intervals[v] = (pos, end)
        for operand in op.operands:
            v = vreg_of.get(operand)
            if v is None or v in last_use:
                continue
            last_use[v] = pos
            if isinstance(op, func.ReturnOp):
                results.add(v)
            else:
                dying.append(v)
        if dying:
            dead_after[pos] = sorted(set(dying))
    assert not last_use, "use before definition"
    alias_root: dict[int, int | None] = {}
    for op in ops:
        if not is_view(op):
            continue
        source = vreg_of.get(op.operands[0])
        root = alias_root.get(source, source) if source is not None else None
        for result in op.results:
            alias_root[vreg_of[result]] = root
    return Liveness(
        intervals=intervals,
        dead_after=dead_after,
        vreg_of=vreg_of,
        values={v: value for value, v in vreg_of.items()},
        alias_root=alias_root,
        results=frozenset(results),
        num_ops=len(ops),
    )


def i64_array(values: Sequence[int]) -> DenseArrayBase:
    """`array<i64: ...>`, packed directly: `DenseArrayBase.from_list` normalizes value by
    value, which was half of this pass's time on Llama-3.1-8B."""
    return DenseArrayBase(i64, BytesAttr(struct.pack(f"<{len(values)}q", *values)))


def annotate_liveness(function: func.FuncOp) -> Liveness:
    """Compute liveness and write `live` and `dead_after` on every npu op."""
    liveness = compute_liveness(function)
    dead_arrays: dict[tuple[int, ...], DenseArrayBase] = {}
    for pos, op in enumerate(function.body.block.ops):
        if not isinstance(op, npu.NpuOp):
            continue
        if op.results:
            pairs = [x for r in op.results for x in liveness.intervals[liveness.vreg_of[r]]]
            op.attributes["live"] = i64_array(pairs)
        else:
            op.attributes.pop("live", None)
        dead = tuple(liveness.dead_after.get(pos, ()))
        if dead not in dead_arrays:
            dead_arrays[dead] = i64_array(dead)
        op.attributes["dead_after"] = dead_arrays[dead]
    return liveness


@dataclass(frozen=True)
class NpuLivenessPass(ModulePass):
    """Annotates `live` and `dead_after`; reports the number of vregs as its rewrites."""

    name = "npu-liveness"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_on_functions(self.name, op, annotate_liveness, lambda r: len(r.intervals))
