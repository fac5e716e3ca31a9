"""npu-assign-vregs: number every op result densely, in op order (Phase 3 NPUIR).

An op's `vreg` attribute is the number of its first result; further results take the
following numbers. Function arguments (inputs and weights) are not virtual registers:
they live in storage the caller owns, which allocation must never reuse.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass

from forge.dialects import npu
from forge.transforms.pattern_pass import run_on_functions


def assign_vregs(function: func.FuncOp) -> int:
    """Number the results of `function`'s ops from 0; returns the number of vregs."""
    count = 0
    for op in function.body.block.ops:
        if not isinstance(op, npu.NpuOp) or not op.results:
            op.attributes.pop("vreg", None)
            continue
        op.attributes["vreg"] = IntegerAttr(count, i64)
        count += len(op.results)
    return count


@dataclass(frozen=True)
class NpuAssignVregsPass(ModulePass):
    name = "npu-assign-vregs"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_on_functions(self.name, op, assign_vregs)
