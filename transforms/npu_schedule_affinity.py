"""npu-schedule-affinity: reorder each function body so that same-device ops run back to back.

Every NPU↔CPU switch costs a dispatch and a copy (the paper measures 0.3-0.8 ms each),
so Phase 4 picks, among the topological orders of the body, one with few device
transitions: list scheduling with one ready heap per device, keyed by original
position, that keeps taking ops of the current device and switches only when that
device has nothing ready (the paper's InstructionScheduler).

With two devices, draining the current device is optimal once the first device is
fixed: after k runs it has scheduled a superset of what any other order has after k
runs. So the only choice left is where to start; `rule=best-start` (the default)
schedules from both devices and keeps the order with fewer transitions, which is the
minimum over all valid orders; on ties it prefers fewer moved ops, so a body that is
already minimal stays as it is. `rule=greedy` starts at the device of the first op and
always takes the greedy order, as the paper's scheduler does.

A transition is a pair of adjacent ops (the terminator excluded) whose devices differ;
an op without a `device` attribute (placement has not run) counts as `cpu`. Ops with
side effects (`npu.generic ... side_effects`, training-mode dropout, ops of unknown
effects) keep their relative order; `func.return` stays last. Ties are broken by
original position, so the result is deterministic. The pass detaches and reinserts
only the ops outside a longest run that keeps its relative order, and reports their
number as its rewrites. It refuses to reorder a body that already carries `live`, `dead_after` or
`buffer` attributes, which a new order would silently invalidate: schedule before
npu-liveness and npu-linear-scan.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.traits import IsTerminator

from forge.dialects import npu
from forge.support.diagnostics import ForgeError, op_error
from forge.transforms.pattern_pass import run_on_functions, side_effect_free

DEVICES = ("npu", "cpu")
DEFAULT_DEVICE = "cpu"
"""The device of an op that carries none: what the executor runs it on."""

RULES = ("best-start", "greedy")

PLANNING_ATTRIBUTES = ("live", "dead_after", "buffer")
"""Attributes that encode positions or reuse decided for the current order."""


@dataclass(frozen=True)
class ScheduleReport:
    ops: int
    """Ops scheduled (the terminator excluded)."""
    transitions_before: int
    transitions_after: int
    moved: int
    """Ops detached and reinserted: ops minus a longest run kept in relative order."""
    start: str
    """Device of the first op of the new order."""

    @property
    def reduction(self) -> float:
        before = self.transitions_before
        return 1.0 - self.transitions_after / before if before else 0.0

    def __add__(self, other: ScheduleReport) -> ScheduleReport:
        return ScheduleReport(
            self.ops + other.ops,
            self.transitions_before + other.transitions_before,
            self.transitions_after + other.transitions_after,
            self.moved + other.moved,
            self.start,
        )

    def format(self) -> str:
        return (
            f"{self.ops} ops, transitions {self.transitions_before} -> {self.transitions_after}"
            f" (-{self.reduction * 100:.1f}%), {self.moved} moved"
        )


# ----------------------------------------------------------------------- queries


def device_of(op: Operation) -> str:
    """The op's `device`, or `cpu` when placement has not set one."""
    attr = op.attributes.get("device")
    if isinstance(attr, StringAttr) and attr.data in DEVICES:
        return attr.data
    return DEFAULT_DEVICE


def has_side_effects(op: Operation) -> bool:
    """Side-effecting, or of unknown effects: such ops must not pass each other."""
    return not side_effect_free(op)


def self_and_nested(op: Operation) -> Iterable[Operation]:
    """`op.walk()`, without a generator for an op that has no regions (almost all)."""
    return op.walk() if op.regions else (op,)


def body_ops(block: Block) -> list[Operation]:
    """The ops a schedule may permute: all but a trailing terminator."""
    ops = list(block.ops)
    if ops and ops[-1].has_trait(IsTerminator):
        ops.pop()
    return ops


def count_transitions(ops: Sequence[Operation]) -> int:
    """Adjacent pairs of ops whose devices differ."""
    return sum(a != b for a, b in itertools.pairwise(device_of(op) for op in ops))


def side_effecting_ops(function: func.FuncOp) -> list[Operation]:
    """The side-effecting ops of `function` in block order, to hand to `check_schedule`
    after a reordering."""
    return [op for block in function.body.blocks for op in block.ops if has_side_effects(op)]


def check_schedule(
    function: func.FuncOp, side_effect_order: Sequence[Operation] | None = None
) -> None:
    """Raise a ForgeError if an op reads a value defined later in its block (or by
    itself), if the terminator is not last, or, given the side-effecting ops in their
    required order, if the body runs them in another order."""
    for block in function.body.blocks:
        position = {op: i for i, op in enumerate(block.ops)}
        for i, op in enumerate(block.ops):
            if op.has_trait(IsTerminator) and op is not block.last_op:
                raise op_error(op, "is a terminator but is not the last op of its block")
            for nested in self_and_nested(op):
                for operand in nested.operands:
                    owner = operand.owner
                    j = position.get(owner) if isinstance(owner, Operation) else None
                    if j is not None and j >= i:
                        name = f"%{operand.name_hint}" if operand.name_hint else "a value"
                        raise op_error(
                            op,
                            f"uses {name} defined by '{owner.name}' at position {j}, "
                            f"not before its own position {i}: the schedule breaks a "
                            "dependency",
                        )
    if side_effect_order is None:
        return
    actual = side_effecting_ops(function)
    for expected, found in zip(side_effect_order, actual, strict=False):
        if expected is not found:
            raise op_error(
                found,
                f"runs where side-effecting '{expected.name}' should: the schedule "
                "reorders side effects",
            )
    if len(actual) != len(side_effect_order):
        raise ForgeError(
            f"expected {len(side_effect_order)} side-effecting ops, found {len(actual)}"
        )


# -------------------------------------------------------------------- scheduling


@dataclass
class _Graph:
    """Dependencies of a block's ops by index: uses, a chain through side effects, and
    every other reader of a cache before the `npu.cache_update` that writes it."""

    devices: list[int]
    successors: list[list[int]]
    indegree: list[int]

    @staticmethod
    def build(ops: Sequence[Operation]) -> _Graph:
        index = {op: i for i, op in enumerate(ops)}
        successors: list[list[int]] = [[] for _ in ops]
        indegree = [0] * len(ops)
        last_effect: int | None = None
        for i, op in enumerate(ops):
            preds: set[int] = set()
            for nested in self_and_nested(op):
                for operand in nested.operands:
                    j = index.get(operand.owner)  # type: ignore[arg-type]
                    if j is not None and j != i:
                        preds.add(j)
            if isinstance(op, npu.CacheUpdateOp):  # the cache's other readers see it unwritten
                for use in op.cache.uses:
                    j = index.get(use.operation)
                    if j is not None and j != i:
                        preds.add(j)
            if has_side_effects(op):
                if last_effect is not None:
                    preds.add(last_effect)
                last_effect = i
            for j in preds:
                successors[j].append(i)
            indegree[i] = len(preds)
        devices = [DEVICES.index(device_of(op)) for op in ops]
        return _Graph(devices, successors, indegree)

    def schedule(self, start: int) -> list[int]:
        """Topological order that stays on the current device while it has ready ops,
        beginning on device `start`; ready ops leave in original order."""
        remaining = self.indegree.copy()
        ready: tuple[list[int], ...] = tuple([] for _ in DEVICES)
        for i, degree in enumerate(remaining):
            if degree == 0:
                ready[self.devices[i]].append(i)  # ascending: already a heap
        order: list[int] = []
        current = start
        while len(order) < len(remaining):
            if not ready[current]:
                current = 1 - current
                if not ready[current]:
                    raise ForgeError("the ops of a block depend on each other in a cycle")
            i = heapq.heappop(ready[current])
            order.append(i)
            for j in self.successors[i]:
                remaining[j] -= 1
                if remaining[j] == 0:
                    heapq.heappush(ready[self.devices[j]], j)
        return order

    def transitions(self, order: Sequence[int]) -> int:
        return sum(self.devices[a] != self.devices[b] for a, b in itertools.pairwise(order))


def longest_increasing(order: Sequence[int]) -> set[int]:
    """The elements of one longest strictly increasing subsequence (patience sorting,
    O(N log N)); those ops keep their place, the others move."""
    tails: list[int] = []  # tails[k]: smallest last value of an increasing run of length k+1
    tail_at: list[int] = []  # position in `order` of that value
    parent = [-1] * len(order)
    for pos, value in enumerate(order):
        k = bisect.bisect_left(tails, value)
        if k == len(tails):
            tails.append(value)
            tail_at.append(pos)
        else:
            tails[k] = value
            tail_at[k] = pos
        parent[pos] = tail_at[k - 1] if k else -1
    kept: set[int] = set()
    pos = tail_at[-1] if tail_at else -1
    while pos != -1:
        kept.add(order[pos])
        pos = parent[pos]
    return kept


def _reorder(block: Block, ops: Sequence[Operation], order: Sequence[int], kept: set[int]) -> None:
    """Detach the ops not kept, then put each right after its predecessor in `order`."""
    for i in order:
        if i not in kept:
            block.detach_op(ops[i])
    previous: Operation | None = None
    for i in order:
        op = ops[i]
        if i not in kept:
            if previous is not None:
                block.insert_op_after(op, previous)
            elif block.first_op is not None:
                block.insert_op_before(op, block.first_op)
            else:
                block.add_op(op)
        previous = op


def schedule_block(block: Block, rule: str = "best-start") -> ScheduleReport:
    """Reorder `block` in place by device affinity; see the module docstring."""
    if rule not in RULES:
        raise ForgeError(f"rule must be one of {', '.join(RULES)}, got '{rule}'")
    ops = body_ops(block)
    if not ops:
        return ScheduleReport(0, 0, 0, 0, DEFAULT_DEVICE)
    graph = _Graph.build(ops)
    first = graph.devices[0]
    original = list(range(len(ops)))
    before = graph.transitions(original)
    candidates: list[tuple[int, int, int, list[int]]] = []
    if rule == "best-start":
        candidates.append((before, 0, 0, original))  # no gain, no moves
    for start in [first] if rule == "greedy" else [first, 1 - first]:
        order = graph.schedule(start)
        moved = len(ops) - len(longest_increasing(order))
        candidates.append((graph.transitions(order), moved, 1 + (start != first), order))
    # fewer transitions, then fewer moves, then: the input, the first op's device
    transitions, moved, _, order = min(candidates, key=lambda c: c[:3])
    kept = longest_increasing(order)
    if moved:
        for op in ops:
            stale = [name for name in PLANNING_ATTRIBUTES if name in op.attributes]
            if stale:
                raise op_error(
                    op,
                    f"carries '{stale[0]}', which reordering would invalidate: run "
                    "npu-schedule-affinity before npu-liveness and npu-linear-scan",
                )
        _reorder(block, ops, order, kept)
    return ScheduleReport(len(ops), before, transitions, moved, DEVICES[graph.devices[order[0]]])


def schedule(function: func.FuncOp, rule: str = "best-start") -> ScheduleReport:
    """Reorder the body of `function` by device affinity and check the result."""
    effects = side_effecting_ops(function)
    reports = [schedule_block(block, rule) for block in function.body.blocks]
    check_schedule(function, effects)
    total = ScheduleReport(0, 0, 0, 0, reports[0].start if reports else DEFAULT_DEVICE)
    for r in reports:
        total = total + r
    return total


@dataclass(frozen=True)
class NpuScheduleAffinityPass(ModulePass):
    name = "npu-schedule-affinity"

    rule: str = "best-start"
    """`best-start`: schedule from both devices, keep the order with fewer transitions
    (the minimum over all valid orders); `greedy`: start at the first op's device, as
    the paper's InstructionScheduler."""

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {', '.join(RULES)}, got '{self.rule}'")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_on_functions(self.name, op, lambda f: schedule(f, self.rule), lambda r: r.moved)
