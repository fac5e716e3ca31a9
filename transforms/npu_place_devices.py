"""npu-place-devices: set each op's `device` from the op-capability table.

An op goes to the NPU when `forge.conversion.capabilities` says NNFactory can run it (opcode,
element types, ranks, static shapes, op-specific checks), and to the CPU otherwise.
Data movement (views, split, cat, copies, eval dropout) is free on either side, so it
stays on the device of the value it moves when that value comes from the CPU, and a
constant that only CPU ops read is a CPU constant, rather than adding NPU round trips.
A model head can also go to the CPU (`cpu-head-gflops=G`; off by default): a weighted
fp32 linear whose result only the function returns (an LM head), that does at least G
GFLOP, with its weight a function argument. The executor packs such a weight once for
MKL's packed GEMM (`conversion.cpu_kernels.PackedLinear`), which ran GPT-2's LM head
about 15% faster than OpenVINO's GEMM on the reference machine (docs/executor.md); at
the end of the program this costs one NPU->CPU transition and no return trip. Inside
the program the same move would cost two transitions per linear and a thread-pool
hand-over each time (measured 1.4-1.5x slower), so only heads move. The option depends
on the target, so the pass leaves it off; `compile_model` sets it to `CPU_HEAD_GFLOPS`
at fp32 where MKL is present (`forge.runtime.executor.head_gflops_for`).
`placement_report()` says why each CPU op is there.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Self

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.ir import BlockArgument, Operation
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec

from forge.conversion.capabilities import NEUTRAL_OPS, capability_key, npu_rejects
from forge.dialects import npu
from forge.dialects.shapes import numel
from forge.transforms.pattern_pass import float_options, run_on_functions

CPU_HEAD_GFLOPS = 1.0
"""The `cpu-head-gflops` the executor plans with at fp32: smaller heads stay on the NPU,
where the transition to the CPU would cost more than the faster GEMM saves."""


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


def head_gflops(op: Operation) -> float | None:
    """GFLOP of `op` when it is a head the CPU may take: a weighted fp32 linear whose
    weight is a function argument and whose result only `func.return` reads."""
    if not isinstance(op, npu.WEIGHTED_LINEAR_OPS):
        return None
    if op.precision is not None and op.precision.data != "fp32":
        return None
    if not isinstance(op.weight, BlockArgument):
        return None
    users = [use.operation for use in op.results[0].uses]
    if not users or not all(isinstance(user, func.ReturnOp) for user in users):
        return None
    x, y = op.input.type, op.results[0].type
    if not isinstance(x, TensorType) or not isinstance(y, TensorType):
        return None
    flops = numel([2, *x.get_shape(), *y.get_shape()[-1:]])  # 2 * rows * in * out
    if str(y.get_element_type()) != "f32" or flops is None:
        return None
    return flops / 1e9


def place(function: func.FuncOp, cpu_head_gflops: float = 0.0) -> Placement:
    """Set `device` on every npu op of `function`, in op order; heads of at least
    `cpu_head_gflops` GFLOP go to the CPU (0: none)."""
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
        gflops = head_gflops(op) if device == "npu" and cpu_head_gflops > 0 else None
        if gflops is not None and gflops >= cpu_head_gflops:
            device, why = "cpu", f"a head of >= {cpu_head_gflops:g} GFLOP (packed CPU GEMM)"
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

    cpu_head_gflops: float = 0.0
    """Heads of at least this many GFLOP run on the CPU's packed GEMM (0: none; the
    executor uses 1.0 at fp32)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cpu_head_gflops", float(self.cpu_head_gflops))
        if not 0 <= self.cpu_head_gflops < math.inf:
            raise ValueError(
                f"cpu-head-gflops must be a finite number >= 0, got {self.cpu_head_gflops:g}"
            )

    @classmethod
    def from_spec(cls, spec: ArgSpec) -> Self:
        return super().from_spec(float_options(spec, "cpu_head_gflops"))

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_on_functions(
            self.name,
            op,
            lambda f: place(f, self.cpu_head_gflops),
            lambda placement: placement.npu_ops + placement.cpu_ops,
        )
