"""Running pass pipelines from Python, with the same registry and spec syntax as forge-opt."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.passes import PassPipeline

from forge import xdsl_compat
from forge.diagnostics import ForgeError, one_line
from forge.transforms.pattern_pass import PassRecord, collect_statistics

xdsl_compat.apply()

if TYPE_CHECKING:
    from forge.transforms.npu_linear_scan import AllocationReport
    from forge.transforms.npu_optimize import OptimizeReport
    from forge.transforms.npu_place_devices import Placement
    from forge.transforms.npu_schedule_affinity import ScheduleReport


def make_context() -> Context:
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from forge.dialects.npu import NPU

    ctx = Context()
    for dialect in (Builtin, Func, Arith, NPU):
        ctx.load_dialect(dialect)
    return ctx


def parse_module(text: str, name: str = "<string>") -> ModuleOp:
    module = Parser(make_context(), text, name).parse_module()
    module.verify()
    return module


def build_pipeline(spec: str) -> PassPipeline:
    from forge.transforms import get_all_passes

    try:
        return PassPipeline.parse_spec(get_all_passes(), spec)
    except Exception as e:
        raise ForgeError(f"invalid pass pipeline '{spec}': {one_line(str(e))}") from e


def run_pipeline(module: ModuleOp, spec: str, verify: bool = True) -> list[PassRecord]:
    """Apply `spec` (e.g. "npu-dce,npu-fuse-operators{alpha=0.5}") in place; the records of
    every pass that ran, in order."""
    pipeline = build_pipeline(spec)
    with collect_statistics() as records:
        pipeline.apply(make_context(), module)
    if verify:
        module.verify()
    return records


@dataclass
class PlanReport:
    """Every report of the default pipeline (forge-pipeline) for one function."""

    optimize: OptimizeReport
    placement: Placement
    schedule: ScheduleReport
    allocation: AllocationReport
    phase34_seconds: float


def plan(
    module: ModuleOp,
    iterations: int = 2,
    alpha: float = 1.0,
    layout: str = "auto",
    cpu_head_gflops: float = 0.0,
) -> PlanReport:
    """forge-pipeline from Python: Phase 2, placement, scheduling, vregs, liveness and
    linear-scan allocation, in place; returns the reports. `cpu_head_gflops` is
    npu-place-devices' option (0: no head on the CPU)."""
    from forge.reference import entry_function
    from forge.transforms.npu_assign_vregs import assign_vregs
    from forge.transforms.npu_linear_scan import allocate
    from forge.transforms.npu_liveness import annotate_liveness
    from forge.transforms.npu_optimize import optimize
    from forge.transforms.npu_place_devices import place
    from forge.transforms.npu_schedule_affinity import schedule

    optimized = optimize(module, iterations, alpha, layout)
    function = entry_function(module)
    start = time.perf_counter()
    placement = place(function, cpu_head_gflops)
    scheduled = schedule(function)
    assign_vregs(function)
    annotate_liveness(function)
    allocation = allocate(function)
    seconds = time.perf_counter() - start
    return PlanReport(optimized, placement, scheduled, allocation, seconds)
