"""npu-place-devices: set each op's `device` from the op-capability table.

An op goes to the NPU when `forge.capabilities` says NNFactory can run it (opcode,
element types, ranks, static shapes, op-specific checks), and to the CPU otherwise.
Data movement (views, split, cat, copies, eval dropout) is free on either side, so it
stays on the device of the value it moves when that value comes from the CPU, and a
constant that only CPU ops read is a CPU constant, rather than adding NPU round trips.
`placement_report()` says why each CPU op is there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from forge.capabilities import NEUTRAL_OPS, capability_key, npu_rejects
from forge.dialects import npu
from forge.transforms.pattern_pass import run_on_functions


@dataclass
class Placement:
    npu_ops: int
    cpu_ops: int
    cpu_reasons: Counter[str]
    """`"<op key>: <reason>"` -> count, for every op placed on the CPU."""


def _producer_device(op: Operation) -> str | None:
    """The device of the op that defines `op`'s first operand (None for arguments)."""
    if not op.operands:
        return None
    owner = op.operands[0].owner
    if isinstance(owner, npu.NpuOp) and owner.device is not None:
        return owner.device.data
    return None


def _only_cpu_users(op: Operation) -> bool:
    """Whether every reader of `op` is an op the NPU cannot run."""
    users = [use.operation for result in op.results for use in result.uses]
    return bool(users) and all(npu_rejects(user) is not None for user in users)


def place(function: func.FuncOp) -> Placement:
    """Set `device` on every npu op of `function`, in op order."""
    reasons: Counter[str] = Counter()
    counts = Counter[str]()
    for op in function.body.block.ops:
        if not isinstance(op, npu.NpuOp):
            continue
        why = npu_rejects(op)
        device = "npu" if why is None else "cpu"
        if device == "npu" and isinstance(op, NEUTRAL_OPS) and _producer_device(op) == "cpu":
            device, why = "cpu", "data movement stays with its CPU producer"
        if device == "npu" and isinstance(op, npu.ConstantOp) and _only_cpu_users(op):
            device, why = "cpu", "a constant only CPU ops read"
        op.attributes["device"] = StringAttr(device)
        counts[device] += 1
        if why is not None:
            reasons[f"{capability_key(op)}: {why}"] += 1
    return Placement(counts["npu"], counts["cpu"], reasons)


def placement_report(placement: Placement) -> str:
    lines = [f"npu ops: {placement.npu_ops}, cpu ops: {placement.cpu_ops}"]
    lines += [f"  cpu x{n}: {why}" for why, n in placement.cpu_reasons.most_common()]
    return "\n".join(lines)


@dataclass(frozen=True)
class NpuPlaceDevicesPass(ModulePass):
    name = "npu-place-devices"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        def placed_ops(function: func.FuncOp) -> int:
            placement = place(function)
            return placement.npu_ops + placement.cpu_ops

        run_on_functions(self.name, op, placed_ops)
