"""forge-pipeline: the whole default pipeline, Phase 2 through Phase 4.

npu-optimize (the six Phase-2 passes to a fixed point), then npu-place-devices,
npu-schedule-affinity, npu-assign-vregs, npu-liveness and npu-linear-scan.

Scheduling runs before vregs, liveness and allocation, not after them as the paper
lists it: positions, live intervals and buffer sharing are properties of one op
order, so they are computed on the final one (npu-schedule-affinity refuses to
reorder IR that already carries them). `forge.pipeline.plan()` runs the same steps
from Python and returns every report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Self

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec

from forge.transforms.npu_assign_vregs import NpuAssignVregsPass
from forge.transforms.npu_linear_scan import NpuLinearScanPass
from forge.transforms.npu_liveness import NpuLivenessPass
from forge.transforms.npu_optimize import NpuOptimizePass
from forge.transforms.npu_place_devices import NpuPlaceDevicesPass
from forge.transforms.npu_schedule_affinity import NpuScheduleAffinityPass
from forge.transforms.pattern_pass import float_options

PHASE34_PASSES = (
    "npu-place-devices",
    "npu-schedule-affinity",
    "npu-assign-vregs",
    "npu-liveness",
    "npu-linear-scan",
)


@dataclass(frozen=True)
class ForgePipelinePass(ModulePass):
    name = "forge-pipeline"

    iterations: int = 2
    """Phase-2 rounds (npu-optimize)."""
    alpha: float = 1.0
    """Operator-fusion aggressiveness in [0, 1]."""
    layout: str = "auto"
    """auto | contiguous | channels-last."""
    cpu_head_gflops: float = 0.0
    """npu-place-devices: heads of at least this many GFLOP run on the CPU (0: none)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", float(self.alpha))
        object.__setattr__(self, "cpu_head_gflops", float(self.cpu_head_gflops))
        self.passes()  # validate the options now

    @classmethod
    def from_spec(cls, spec: ArgSpec) -> Self:
        return super().from_spec(float_options(spec, "alpha", "cpu_head_gflops"))

    def passes(self) -> list[ModulePass]:
        return [
            NpuOptimizePass(iterations=self.iterations, alpha=self.alpha, layout=self.layout),
            NpuPlaceDevicesPass(cpu_head_gflops=self.cpu_head_gflops),
            NpuScheduleAffinityPass(),
            NpuAssignVregsPass(),
            NpuLivenessPass(),
            NpuLinearScanPass(),
        ]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for p in self.passes():
            p.apply(ctx, op)
