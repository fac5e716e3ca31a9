"""How a scheduled function becomes the executor's plan: its steps, maximal runs of NPU
ops (NNFactory segments) and single CPU ops, and where each intermediate lives in the
arena. The executor and the plan printer (`-t python`) both use these, so the printed
plan has the executed plan's steps and buffers."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from forge.dialects import npu
from forge.support.diagnostics import ForgeError
from forge.target.cpu_kernels import torch_dtype
from forge.transforms.npu_linear_scan import AllocationReport, allocate, byte_size
from forge.transforms.npu_liveness import compute_liveness
from forge.transforms.npu_schedule_affinity import body_ops, device_of

GRANULARITIES = ("segment", "op")
WEIGHT_BINDINGS = ("constants", "parameters")
"""How weights reach NNFactory graphs: baked in as constants when the graph is built
(OpenVINO pre-packs them; the default), or bound as parameters at every call (graphs
of identical layers then share one compile, as `granularity="op"` benefits from)."""


def device_runs(function: func.FuncOp) -> Iterator[tuple[str, list[Operation]]]:
    """The body in schedule order as ("npu", a maximal run of NPU ops) and ("cpu", [op])
    items. Shared with `forge.tools.plan_to_python`, so the printed plan has the
    executed plan's steps."""
    run: list[Operation] = []
    for op in body_ops(function.body.block):
        if device_of(op) == "npu":
            run.append(op)
            continue
        if run:
            yield "npu", run
            run = []
        yield "cpu", [op]
    if run:
        yield "npu", run


def npu_groups(run: Sequence[Operation], granularity: str) -> list[list[Operation]]:
    """The NNFactory segments a run of NPU ops becomes: the whole run, or one per op."""
    return [list(run)] if granularity == "segment" else [[op] for op in run]


# ------------------------------------------------------------------------- arena


@dataclass(frozen=True)
class ArenaPlace:
    """Where an intermediate lives: `nbytes` at byte `offset` of the arena, in the
    linear-scan `buffer` it shares with the values that reuse it."""

    buffer: int
    offset: int
    nbytes: int
    type: TensorType

    def view(self, arena: torch.Tensor) -> torch.Tensor:
        """The value's tensor in `arena` (a flat uint8 tensor)."""
        dtype = torch_dtype(self.type.get_element_type())
        shape = list(self.type.get_shape())
        return arena[self.offset : self.offset + self.nbytes].view(dtype).view(shape)


@dataclass(frozen=True)
class ArenaLayout:
    """The arena of a planned function: its size and the place of every value in it."""

    planned_bytes: int
    places: dict[SSAValue, ArenaPlace]


def arena_layout(
    function: func.FuncOp, allocation: AllocationReport | None = None
) -> ArenaLayout | None:
    """Every intermediate that owns storage at the offset of the buffer npu-linear-scan
    chose (`allocation`, or allocated again, which writes `buffer` attributes), so that
    values sharing a buffer share memory. Function results keep their own storage (the
    caller keeps them across calls), and views keep aliasing their root; values of
    dynamic size lie outside the arena. None when there is nothing to allocate by:
    no `allocation` and no `buffer` attribute (npu-linear-scan has not run)."""
    if allocation is None:
        if not any(isinstance(op, npu.NpuOp) and op.buffer for op in function.walk()):
            return None
        allocation = allocate(function)
    liveness = compute_liveness(function)
    returned = {liveness.alias_root.get(v, v) for v in liveness.results}
    places: dict[SSAValue, ArenaPlace] = {}
    for value, vreg in liveness.vreg_of.items():
        if vreg in liveness.alias_root or vreg in returned:
            continue
        number = allocation.buffer_of.get(vreg)
        nbytes = byte_size(value.type)
        if number is None or nbytes is None:
            continue
        offset = allocation.layout[number].offset
        if offset is None or not isinstance(value.type, TensorType):
            continue
        places[value] = ArenaPlace(number, offset, nbytes, value.type)
    return ArenaLayout(allocation.planned_bytes, places)


def available_memory() -> int | None:
    """Bytes the kernel reports as available (MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def peak_bytes(
    function: func.FuncOp, planned_bytes: int | None, resident_from: int | None = None
) -> int:
    """What running `function` needs at least: its arguments (those from `resident_from`
    on, weights already in memory, excepted), its results, and the intermediates (the
    planned arena, or every value when unplanned)."""
    block = function.body.block
    values = list(block.args[:resident_from])
    terminator = block.last_op
    if terminator is not None:
        values += list(terminator.operands)
    if planned_bytes is None:
        values += [r for op in block.ops for r in op.results]
    sizes = [byte_size(v.type) or 0 for v in values]
    return sum(sizes) + (planned_bytes or 0)


def check_memory(
    function: func.FuncOp, planned_bytes: int | None, resident_from: int | None = None
) -> None:
    """A one-line error, before anything is built, when the function cannot fit."""
    available = available_memory()
    needed = peak_bytes(function, planned_bytes, resident_from)
    if available is None or needed <= available:
        return
    gib = 1 << 30
    raise ForgeError(
        f"@{function.sym_name.data} needs at least {needed / gib:.3g} GiB (arguments, "
        f"results and intermediates) but {available / gib:.3g} GiB are available"
    )
