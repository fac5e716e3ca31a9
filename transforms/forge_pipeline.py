"""forge-pipeline: the whole default pipeline, Phase 2 through Phase 4, defined once.

npu-optimize (the six Phase-2 passes to a fixed point), then npu-assign-precision
(when a precision other than fp32 is asked), npu-bubble-up-row-gather (rows gathered
near the end, such as the one position a prefill returns logits of, gathered where they
are made), npu-update-state-in-place (state such as a
KV cache written in place, not through a copy), npu-fuse-cached-attention (a step's
cache writes and causal attention as one op), npu-attend-before-write (decode
attention reads the cache before its write, the new row selected in),
npu-place-devices, npu-schedule-affinity, npu-assign-vregs, npu-liveness and
npu-linear-scan.

Scheduling runs before vregs, liveness and allocation, not after them as the paper
lists it: positions, live intervals and buffer sharing are properties of one op
order, so they are computed on the final one (npu-schedule-affinity refuses to
reorder IR that already carries them).

This list is the only definition of the default pipeline: `forge-opt -p
forge-pipeline`, `plan()` (and through it `forge compile`, `forge plan`, `forge
ablate`, `forge autotune`) all run it. `skip` removes passes by name, Phase-2 ones
included, which is how `forge ablate` builds its variants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec

from forge.dialects.context import make_context
from forge.support.collector import collector_paused
from forge.transforms.npu_assign_precision import NpuAssignPrecisionPass, PrecisionReport
from forge.transforms.npu_assign_vregs import NpuAssignVregsPass
from forge.transforms.npu_attend_before_write import NpuAttendBeforeWritePass
from forge.transforms.npu_bubble_up_row_gather import NpuBubbleUpRowGatherPass
from forge.transforms.npu_fuse_cached_attention import NpuFuseCachedAttentionPass
from forge.transforms.npu_linear_scan import AllocationReport, NpuLinearScanPass
from forge.transforms.npu_liveness import Liveness, NpuLivenessPass
from forge.transforms.npu_optimize import PHASE2_PASSES, NpuOptimizePass, OptimizeReport
from forge.transforms.npu_place_devices import NpuPlaceDevicesPass, Placement
from forge.transforms.npu_schedule_affinity import NpuScheduleAffinityPass, ScheduleReport
from forge.transforms.npu_update_state_in_place import NpuUpdateStateInPlacePass
from forge.transforms.pattern_pass import (
    PassRecord,
    PassReport,
    collect_reports,
    collect_statistics,
    float_options,
)

PHASE34_PASSES = (
    "npu-bubble-up-row-gather",
    "npu-update-state-in-place",
    "npu-fuse-cached-attention",
    "npu-attend-before-write",
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
    profile: str | None = None
    """npu-place-devices: a host profile (JSON); fp32 linears go where it measured
    them cheaper (unset: every op the NPU can run stays there)."""
    skip: tuple[str, ...] = ()
    """Passes to leave out, by name (Phase-2 passes or Phase 3-4 passes)."""
    precision: str = "fp32"
    """npu-assign-precision: fp32 | fp16 | int8 | mixed (fp32: the pass does not run)."""
    fp16_weights: tuple[str, ...] | None = None
    """npu-assign-precision, mixed: the weights kept fp16 (unset: its fallback rule)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", float(self.alpha))
        skip = (self.skip,) if isinstance(self.skip, str) else tuple(self.skip)
        object.__setattr__(self, "skip", skip)
        known = (*PHASE2_PASSES, *PHASE34_PASSES)
        unknown = [name for name in skip if name not in known]
        if unknown:
            raise ValueError(
                f"cannot skip {', '.join(unknown)} (passes of forge-pipeline: {', '.join(known)})"
            )
        self.passes()  # validate the options now

    @classmethod
    def from_spec(cls, spec: ArgSpec) -> Self:
        return super().from_spec(float_options(spec, "alpha"))

    def passes(self) -> list[ModulePass]:
        """The pipeline, in order, without the skipped passes."""
        phase2_skip = tuple(name for name in self.skip if name in PHASE2_PASSES)
        precision: list[ModulePass] = []
        if self.precision != "fp32":
            precision = [NpuAssignPrecisionPass(self.precision, self.fp16_weights)]
        passes: list[ModulePass] = [
            NpuOptimizePass(
                iterations=self.iterations, alpha=self.alpha, layout=self.layout, skip=phase2_skip
            ),
            *precision,
            NpuBubbleUpRowGatherPass(),
            NpuUpdateStateInPlacePass(),
            NpuFuseCachedAttentionPass(),
            NpuAttendBeforeWritePass(profile=self.profile),
            NpuPlaceDevicesPass(profile=self.profile),
            NpuScheduleAffinityPass(),
            NpuAssignVregsPass(),
            NpuLivenessPass(),
            NpuLinearScanPass(),
        ]
        return [p for p in passes if p.name not in self.skip]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for p in self.passes():
            p.apply(ctx, op)


def phase2_of(pipeline: ForgePipelinePass) -> list[ModulePass]:
    """One Phase-2 round of `pipeline` (what its npu-optimize iterates), for drivers
    that schedule the Phase-2 passes themselves (the autotuner shares work across
    configurations)."""
    optimize = next(p for p in pipeline.passes() if isinstance(p, NpuOptimizePass))
    return optimize.passes()


@dataclass
class PlanReport:
    """What each pass of forge-pipeline reported for one function; a skipped pass's
    report is None."""

    optimize: OptimizeReport
    placement: Placement | None
    schedule: ScheduleReport | None
    liveness: Liveness | None
    allocation: AllocationReport | None
    phase34_seconds: float
    records: list[PassRecord]
    """Every pass run, in order (as `--pass-statistics` prints them)."""
    precision: PrecisionReport | None = None
    """npu-assign-precision's decision; None when it did not run (fp32)."""

    @classmethod
    def from_runs(cls, records: list[PassRecord], reports: list[PassReport]) -> PlanReport:
        found: dict[str, Any] = {}
        for entry in reports:
            found.setdefault(entry.name, entry.report)
        after_phase2 = (NpuAssignPrecisionPass.name, *PHASE34_PASSES)
        seconds = sum(r.seconds for r in records if r.name in after_phase2)
        return cls(
            found["npu-optimize"],
            found.get("npu-place-devices"),
            found.get("npu-schedule-affinity"),
            found.get("npu-liveness"),
            found.get("npu-linear-scan"),
            seconds,
            records,
            found.get(NpuAssignPrecisionPass.name),
        )


def plan(module: ModuleOp, **options: Any) -> PlanReport:
    """Run forge-pipeline (its options as keywords) in place on `module` and return
    every pass's report."""
    pipeline = ForgePipelinePass(**options)
    with (
        collect_statistics(pattern_hits=False) as records,
        collect_reports() as reports,
        collector_paused(),
    ):
        pipeline.apply(make_context(), module)
    return PlanReport.from_runs(records, reports)
