"""A deliberately broken pass for --verify-each tests: it leaves IR that does not verify."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from forge.dialects import npu


@dataclass(frozen=True)
class BreakDevicePass(ModulePass):
    """Sets an invalid device on every npu op."""

    name = "test-break-device"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for inner in op.walk():
            if isinstance(inner, npu.NpuOp):
                inner.attributes["device"] = StringAttr("gpu")
