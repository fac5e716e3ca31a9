"""npu-place-devices: set each op's `device` from the op-capability table.

An op goes to the NPU when `forge.target.capabilities` says NNFactory can run it (opcode,
element types, ranks, static shapes, op-specific checks), and to the CPU otherwise.
Data movement (views, split, cat, copies, eval dropout) is free on either side, so it
stays on the device of the value it moves when that value comes from the CPU, and a
constant that only CPU ops read is a CPU constant, rather than adding NPU round trips.
With a host profile (`profile=PATH`, written by `forge.runtime.host_profile`; off by
default), a weighted fp32 linear whose weight is a function argument goes to the CPU
when this machine measured it faster there, transitions included
(`forge.transforms.host_profile`): CPU time + hops x transition time < NNFactory time,
each estimated from the nearest measured shape bucket. An LM head (only `func.return`
reads it) adds one transition, a linear inside the program two, so measured speed
decides both, with no rule about which CPU or library is present. The executor packs
such a CPU linear's weight once (`target.cpu_kernels.PackedLinear`), as the profile
measured it. `Placement.measured` keeps every such decision with its times.
`placement_report()` says why each CPU op is there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.ir import BlockArgument, Operation
from xdsl.passes import ModulePass

from forge.dialects import npu
from forge.dialects.shapes import numel
from forge.target.capabilities import NEUTRAL_OPS, capability_key, npu_rejects
from forge.transforms.host_profile import HostProfile, check_profile_option, load_profile
from forge.transforms.pattern_pass import run_on_functions


@dataclass
class Placement:
    npu_ops: int
    cpu_ops: int
    cpu_reasons: Counter[str]
    """`"<op key>: <reason>"` -> count, for every op placed on the CPU."""
    measured: Counter[str] = field(default_factory=Counter)
    """Linears the host profile decided (either way): the measured reason -> count."""


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


def linear_sizes(op: Operation) -> tuple[int, int, int] | None:
    """(rows, in, out) of `op` when the host profile may move it: a weighted fp32
    linear with static shapes whose weight is a function argument (the executor packs
    it once on the CPU, as the profile measured)."""
    if not isinstance(op, npu.WEIGHTED_LINEAR_OPS):
        return None
    if op.precision is not None and op.precision.data != "fp32":
        return None
    if not isinstance(op.weight, BlockArgument):
        return None
    x, y = op.input.type, op.results[0].type
    if not isinstance(x, TensorType) or not isinstance(y, TensorType):
        return None
    if str(y.get_element_type()) != "f32" or not x.get_shape() or not y.get_shape():
        return None
    rows = numel(x.get_shape()[:-1])
    sizes = (rows, x.get_shape()[-1], y.get_shape()[-1])
    if rows is None or any(d < 1 for d in sizes):
        return None
    return sizes


def hops(op: npu.LinearOp | npu.AddmmOp | npu.FusedLinearOp) -> int:
    """Device transitions that running `op` on the CPU adds: one if an NPU op produces
    its input, one if some op other than `func.return` that the NPU can run reads it."""
    source = op.input.owner
    device = source.attributes.get("device") if isinstance(source, npu.NpuOp) else None
    before = isinstance(device, StringAttr) and device.data == "npu"
    users = [use.operation for result in op.results for use in result.uses]
    after = any(not isinstance(u, func.ReturnOp) and npu_rejects(u) is None for u in users)
    return int(before) + int(after)


def is_head(op: Operation) -> bool:
    """An LM head: a linear only `func.return` reads."""
    users = [use.operation for use in op.results[0].uses]
    return bool(users) and all(isinstance(u, func.ReturnOp) for u in users)


def _label(op: Operation, sizes: tuple[int, int, int], head: bool) -> str:
    """`linear 128x768x50257 (head)`: what the measured reason names."""
    kind = op.name.removeprefix("npu.")
    return f"{kind} {'x'.join(map(str, sizes))}" + (" (head)" if head else "")


def place(function: func.FuncOp, profile: HostProfile | None = None) -> Placement:
    """Set `device` on every npu op of `function`, in op order; with `profile`, fp32
    linears go where this host measured them cheaper."""
    reasons: Counter[str] = Counter()
    measured: Counter[str] = Counter()
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
        movable = device == "npu" and isinstance(op, npu.WEIGHTED_LINEAR_OPS)
        sizes = linear_sizes(op) if movable and profile is not None else None
        if sizes is not None and profile is not None and isinstance(op, npu.WEIGHTED_LINEAR_OPS):
            head = is_head(op)
            estimate = profile.linear_estimate(*sizes, hops=hops(op), head=head)
            measured[estimate.reason(_label(op, sizes, head))] += 1
            if estimate.device == "cpu":
                device, why = "cpu", "measured faster on this host (host profile)"
        op.attributes["device"] = StringAttr(device)
        counts[device] += 1
        if why is not None:
            reasons[f"{capability_key(op)}: {why}"] += 1
    return Placement(counts["npu"], counts["cpu"], reasons, measured)


def placement_report(placement: Placement) -> str:
    lines = [f"npu ops: {placement.npu_ops}, cpu ops: {placement.cpu_ops}"]
    lines += [f"  cpu x{n}: {why}" for why, n in placement.cpu_reasons.most_common()]
    return "\n".join(lines)


@dataclass(frozen=True)
class NpuPlaceDevicesPass(ModulePass):
    name = "npu-place-devices"

    profile: str | None = None
    """A host profile (JSON, `forge.runtime.host_profile`): fp32 linears go where it
    measured them cheaper. Unset: every op the NPU can run stays there."""

    def __post_init__(self) -> None:
        check_profile_option(self.profile)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_on_functions(
            self.name,
            op,
            lambda f: place(f, load_profile(self.profile) if self.profile else None),
            lambda placement: placement.npu_ops + placement.cpu_ops,
        )
