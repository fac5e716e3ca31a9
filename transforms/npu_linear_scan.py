"""npu-linear-scan: map vregs to physical buffers, Poletto & Sarkar linear scan (Phase 4).

Allocation units are alias classes: a value that owns storage (the root) together with
every view of it (see `npu_liveness.is_view`). A class lives from the root's definition
to the last use of any member, so a root is never reused while a view of it can still
be read. Views get their root's buffer (`buffer` on the view op shows the sharing) and
are not counted as vregs in rho_buf. Views of function arguments, like the arguments
themselves (inputs, weights), are caller-owned: they get no buffer and are never written.

Two levels, because whole buffers alone cannot approach the peak-live bytes: at the
peak of a decoder (the logits) every buffer that held the layers' working set sits
idle, and its bytes would be planned on top of the peak.

1. Buffers. Classes are visited by start; an active heap ordered by end expires every
   class whose end < the current start into a free pool, then the class takes a free
   buffer or a new one: O(N log N). Buffers are typed by element type and have a byte
   capacity: a free buffer is reused only if its element type matches and it is large
   enough, the smallest such (best fit); otherwise a new buffer opens (`policy=exact`,
   the default). `policy=grow` instead grows the largest free buffer of the dtype.
2. Arena. Each statically sized buffer gets a byte offset (64-byte aligned) in one
   arena; two buffers may overlap there only if their lifetimes (from their first
   class's start to their last class's end) are disjoint. Greedy by size: largest
   first, into the smallest gap that no overlapping buffer occupies, else on top;
   O(B^2) in the B buffers (B is tens while N is thousands). `planned_bytes` is the
   arena size.

Measured on the six full-size models after Phase 2 (seq 128): rho_buf 0.02-0.11 with
either policy; the arena is 1.000x the peak-live lower bound with `exact`, 1.02-1.38x
with `grow` (the buffer grown to hold the logits already lived through every layer, so
it cannot share bytes with the layers' buffers); the buffers' summed capacities alone
would be 1.06-1.67x. Where no value dominates the peak (the tiny test models) whole
buffers leave about 1.6x: per-value offsets would do better, but then a vreg's storage
is no longer a buffer that a later value reuses as a whole.

Function results live until `func.return`, so their buffers are never freed: a value
defined later never overwrites them. Values of dynamic size get a buffer of their own
that is never reused and lies outside the arena (their bytes count neither in the plan
nor in the bound).
"""

from __future__ import annotations

import bisect
import heapq
import time
from dataclasses import dataclass, field
from typing import Literal, cast, get_args

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Attribute
from xdsl.passes import ModulePass

from forge.dialects import npu
from forge.dialects.shapes import element_type, numel, shape_of
from forge.support.diagnostics import op_error
from forge.transforms.npu_liveness import Liveness, compute_liveness, i64_array
from forge.transforms.pattern_pass import run_on_functions

Policy = Literal["exact", "grow"]
ALIGNMENT = 64
"""Byte alignment of buffer offsets in the arena."""
NO_BUFFER = -1
"""In a per-result `buffer` array: a result that views caller-owned storage."""


def byte_size(value_type: Attribute) -> int | None:
    """Bytes of a dense tensor of `value_type`, or None when its shape is dynamic."""
    count = numel(shape_of(value_type))
    if count is None:
        return None
    bits = getattr(element_type(value_type), "bitwidth", 64)
    return count * max(1, (bits + 7) // 8)  # i1 takes a byte, as torch.bool does


@dataclass
class AliasClass:
    """A root value and its views: one allocation."""

    root: int
    start: int
    end: int
    element: Attribute
    nbytes: int | None
    members: list[int]


@dataclass
class Buffer:
    """A physical buffer: typed, sized for the largest class it holds, at an arena offset."""

    element: Attribute
    capacity: int | None
    """Bytes; None for a value of dynamic size (the buffer is then never shared)."""
    start: int
    end: int
    """Lifetime: first start and last end of the classes it holds."""
    offset: int | None = None
    """Byte offset in the arena; None outside it (dynamic size)."""


@dataclass
class AllocationReport:
    """What allocation achieved for one function: the numbers behind rho_buf and bytes."""

    function: str
    vregs: int
    """All npu op results."""
    allocated_values: int
    """vregs that own storage (roots): the vregs rho_buf counts."""
    alias_values: int
    """Views: they share a root's buffer or caller-owned storage."""
    dynamic_values: int
    """Roots of dynamic size, each in a buffer of its own."""
    buffers: int
    planned_bytes: int
    """Size of the arena that holds every statically sized buffer."""
    lower_bound_bytes: int
    """Peak over positions of the bytes of the live, statically sized classes."""
    buffer_bytes: int
    """Sum of the buffers' capacities: what the plan would take without the arena."""
    buffer_of: dict[int, int] = field(default_factory=dict)
    """vreg -> buffer, views included (views of caller-owned storage absent)."""
    layout: list[Buffer] = field(default_factory=list)
    """Buffer number -> its type, capacity, lifetime and offset."""
    seconds: float = 0.0

    @property
    def rho_buf(self) -> float:
        return self.buffers / self.allocated_values if self.allocated_values else 0.0

    @property
    def ratio(self) -> float:
        return self.planned_bytes / self.lower_bound_bytes if self.lower_bound_bytes else 1.0

    def format(self) -> str:
        return (
            f"@{self.function}: {self.vregs} vregs ({self.allocated_values} allocated, "
            f"{self.alias_values} aliases, {self.dynamic_values} dynamic) -> "
            f"{self.buffers} buffers, rho_buf {self.rho_buf:.3f}; planned "
            f"{self.planned_bytes} B vs lower bound {self.lower_bound_bytes} B "
            f"({self.ratio:.3f}x)"
        )


def _liveness(function: func.FuncOp) -> Liveness:
    """Liveness from the IR's `live` attributes when every value has one, else computed.

    Attributes may lengthen an interval (to pin a value) but not shorten it below the
    value's real uses or move its definition: stale attributes are an error."""
    liveness = compute_liveness(function)
    ops = [op for op in function.body.block.ops if isinstance(op, npu.NpuOp) and op.results]
    if not ops or any(op.live is None for op in ops):
        return liveness
    for op in ops:
        assert op.live is not None
        pairs = op.live.get_values()
        for i, result in enumerate(op.results):
            v = liveness.vreg_of[result]
            s, e = int(pairs[2 * i]), int(pairs[2 * i + 1])
            real_s, real_e = liveness.intervals[v]
            if s != real_s or e < real_e:
                raise op_error(
                    op,
                    f"vreg {v} has live = [{s}, {e}] but is defined at {real_s} and last "
                    f"used at {real_e}; rerun npu-liveness",
                )
            liveness.intervals[v] = (s, e)
    return liveness


def alias_classes(liveness: Liveness) -> list[AliasClass]:
    """One class per root, spanning the intervals of its views; sorted by (start, root)."""
    classes: dict[int, AliasClass] = {}
    for v in sorted(liveness.intervals):
        if v in liveness.alias_root:
            continue
        s, e = liveness.intervals[v]
        t = liveness.values[v].type
        classes[v] = AliasClass(v, s, e, element_type(t), byte_size(t), [v])
    for v, root in sorted(liveness.alias_root.items()):
        if root is None:
            continue
        c = classes[root]
        c.end = max(c.end, liveness.intervals[v][1])
        c.members.append(v)
    return sorted(classes.values(), key=lambda c: (c.start, c.root))


def lower_bound(classes: list[AliasClass], num_ops: int) -> int:
    """Peak bytes live at once: no allocation can plan less."""
    delta = [0] * (num_ops + 1)
    for c in classes:
        if c.nbytes is not None:
            delta[c.start] += c.nbytes
            delta[c.end + 1] -= c.nbytes
    peak = live = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak


def linear_scan(
    classes: list[AliasClass], results: frozenset[int], policy: Policy = "exact"
) -> tuple[dict[int, int], list[Buffer]]:
    """Poletto-Sarkar over `classes` (sorted by start): root -> buffer, and the buffers."""
    buffers: list[Buffer] = []
    buffer_of: dict[int, int] = {}
    active: list[tuple[int, int, int]] = []  # (end, root, buffer)
    free: dict[Attribute, list[tuple[int, int]]] = {}  # dtype -> sorted (capacity, buffer)
    returned = {c.root for c in classes if results.intersection(c.members)}
    for c in classes:
        while active and active[0][0] < c.start:
            _, root, b = heapq.heappop(active)
            assert root not in returned, f"function result vreg {root} would be overwritten"
            capacity = buffers[b].capacity
            if capacity is not None:
                bisect.insort(free.setdefault(buffers[b].element, []), (capacity, b))
        pool = free.get(c.element, [])
        if c.nbytes is None or not pool or (policy == "exact" and pool[-1][0] < c.nbytes):
            b = len(buffers)
            buffers.append(Buffer(c.element, c.nbytes, c.start, c.end))
        else:
            i = bisect.bisect_left(pool, (c.nbytes, -1))
            _, b = pool.pop(min(i, len(pool) - 1))  # best fit, else the largest grows
            buffer = buffers[b]
            buffer.capacity = max(buffer.capacity or 0, c.nbytes)
            buffer.end = c.end  # expired buffers end before c starts
        buffer_of[c.root] = b
        heapq.heappush(active, (c.end, c.root, b))
    return buffer_of, buffers


def pack_arena(buffers: list[Buffer]) -> int:
    """Give each statically sized buffer an offset; two buffers share bytes only if their
    lifetimes are disjoint. Greedy by size into the smallest fitting gap. Arena bytes."""
    placed: list[Buffer] = []
    top = 0
    order = sorted(
        (b for b in buffers if b.capacity is not None),
        key=lambda b: (-(b.capacity or 0), b.start, b.end),
    )
    for buffer in order:
        size = _aligned(buffer.capacity or 0)
        busy = sorted(
            (p.offset or 0, (p.offset or 0) + _aligned(p.capacity or 0))
            for p in placed
            if p.start <= buffer.end and buffer.start <= p.end
        )
        best: tuple[int, int] | None = None  # (gap, offset)
        cursor = 0
        for lo, hi in busy:
            if lo - cursor >= size and (best is None or lo - cursor < best[0]):
                best = (lo - cursor, cursor)
            cursor = max(cursor, hi)
        buffer.offset = best[1] if best is not None else cursor
        placed.append(buffer)
        top = max(top, buffer.offset + size)
    return top


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGNMENT) * ALIGNMENT


def allocate(function: func.FuncOp, policy: Policy = "exact") -> AllocationReport:
    """Assign a physical buffer to every value of `function`; writes `buffer` attributes."""
    start = time.perf_counter()
    liveness = _liveness(function)
    classes = alias_classes(liveness)
    roots, buffers = linear_scan(classes, liveness.results, policy)
    planned = pack_arena(buffers)
    buffer_of = {v: roots[c.root] for c in classes for v in c.members}
    attrs = [IntegerAttr(b, i64) for b in range(len(buffers))]  # built once: xDSL verifies each
    for op in function.body.block.ops:
        if not isinstance(op, npu.NpuOp) or not op.results:
            continue
        numbers = [buffer_of.get(liveness.vreg_of[r], NO_BUFFER) for r in op.results]
        if all(b == NO_BUFFER for b in numbers):
            op.attributes.pop("buffer", None)
        elif len(numbers) == 1:
            op.attributes["buffer"] = attrs[numbers[0]]
        else:
            op.attributes["buffer"] = i64_array(numbers)
    return AllocationReport(
        function=function.sym_name.data,
        vregs=len(liveness.intervals),
        allocated_values=len(classes),
        alias_values=len(liveness.alias_root),
        dynamic_values=sum(1 for c in classes if c.nbytes is None),
        buffers=len(buffers),
        planned_bytes=planned,
        lower_bound_bytes=lower_bound(classes, liveness.num_ops),
        buffer_bytes=sum(b.capacity or 0 for b in buffers),
        buffer_of=buffer_of,
        layout=buffers,
        seconds=time.perf_counter() - start,
    )


@dataclass(frozen=True)
class NpuLinearScanPass(ModulePass):
    """Writes `buffer` attributes; reports the number of physical buffers as rewrites."""

    name = "npu-linear-scan"

    policy: str = "exact"
    """exact | grow: when no free buffer of the dtype is large enough, open a new buffer
    (exact) or grow the largest free one (grow)."""

    def __post_init__(self) -> None:
        if self.policy not in get_args(Policy):
            raise ValueError(f"policy must be 'exact' or 'grow', got '{self.policy}'")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        policy = cast(Policy, self.policy)
        run_on_functions(self.name, op, lambda f: allocate(f, policy), lambda r: r.buffers)
