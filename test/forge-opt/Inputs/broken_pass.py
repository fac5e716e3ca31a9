"""Deliberately broken passes for crash-reproducer tests: one half-rewrites the IR and
raises (a crash), one refuses an op (a located pass failure)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from forge.dialects import npu
from forge.support.diagnostics import op_error


@dataclass(frozen=True)
class CrashingPass(ModulePass):
    """Marks the first npu op it finds, then fails like a pass with a bug."""

    name = "test-crash"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for inner in op.walk():
            if isinstance(inner, npu.NpuOp):
                inner.attributes["touched"] = StringAttr("by test-crash")
                raise RuntimeError(f"broken on purpose at {inner.name}")


@dataclass(frozen=True)
class FailingPass(ModulePass):
    """Refuses the first npu.exp with a located error, as a pass diagnoses bad input."""

    name = "test-fail"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for inner in op.walk():
            if isinstance(inner, npu.ExpOp):
                raise op_error(inner, "test-fail refuses this op")
