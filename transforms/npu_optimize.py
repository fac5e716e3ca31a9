"""npu-optimize: the six Phase-2 passes, iterated to a fixed point, with a report.

Each round runs dce, cse, constant folding, attention fusion, operator fusion and
layout optimization in that order; rounds stop when one makes no rewrite, or after
`iterations` rounds. The per-pass report (rewrites, ops before/after, milliseconds)
is printed by `forge-opt --pass-statistics` and returned by `optimize()`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Self

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec

from forge.dialects.context import make_context
from forge.transforms.npu_cse import NpuCSEPass
from forge.transforms.npu_dce import NpuDCEPass
from forge.transforms.npu_fold_constants import NpuFoldConstantsPass
from forge.transforms.npu_fuse_attention import NpuFuseAttentionPass
from forge.transforms.npu_fuse_operators import NpuFuseOperatorsPass
from forge.transforms.npu_optimize_layout import NpuOptimizeLayoutPass
from forge.transforms.pattern_pass import (
    PassRecord,
    collect_statistics,
    count_ops,
    float_options,
    publish,
)

PHASE2: tuple[type[ModulePass], ...] = (
    NpuDCEPass,
    NpuCSEPass,
    NpuFoldConstantsPass,
    NpuFuseAttentionPass,
    NpuFuseOperatorsPass,
    NpuOptimizeLayoutPass,
)
"""The six Phase-2 passes, in the order each round runs them."""

PHASE2_PASSES = tuple(p.name for p in PHASE2)


@dataclass
class OptimizeReport:
    rows: list[PassRecord]
    """One aggregated row per pass: rewrites summed over rounds, ops before its first
    run and after its last, milliseconds summed."""
    rounds: int
    ops_before: int
    ops_after: int
    seconds: float
    runs: list[PassRecord] = field(default_factory=list)
    """Every individual pass run, in order."""

    @property
    def reduction(self) -> float:
        return 1.0 - self.ops_after / self.ops_before if self.ops_before else 0.0

    def format(self) -> str:
        """One row per pass run (round, pass, rewrites, ops before/after, ms), then the total."""
        per_round = len(self.rows) or 1
        lines = [
            f"{'round':<6}{'pass':<22}{'rewrites':>9}{'ops before':>12}{'ops after':>11}{'ms':>9}"
        ]
        for i, r in enumerate(self.runs):
            lines.append(
                f"{i // per_round + 1:<6}{r.name:<22}{r.rewrites:>9}{r.ops_before:>12}"
                f"{r.ops_after:>11}{r.seconds * 1e3:>9.2f}"
            )
        lines.append(
            f"{'total':<6}{'npu-optimize':<22}{sum(r.rewrites for r in self.rows):>9}"
            f"{self.ops_before:>12}{self.ops_after:>11}{self.seconds * 1e3:>9.2f}"
            f"   ({self.rounds} rounds, -{self.reduction * 100:.1f}% ops)"
        )
        return "\n".join(lines)


def optimize(
    module: ModuleOp,
    iterations: int = 2,
    alpha: float = 1.0,
    layout: str = "auto",
    skip: Iterable[str] = (),
    ctx: Context | None = None,
) -> OptimizeReport:
    """Run Phase 2 (npu-optimize) in place on `module`; `skip` names passes to leave out."""
    pass_ = NpuOptimizePass(iterations=iterations, alpha=alpha, layout=layout, skip=tuple(skip))
    return pass_.run(ctx or make_context(), module)


@dataclass(frozen=True)
class NpuOptimizePass(ModulePass):
    """Phase 2 to a fixed point: at most `iterations` rounds of the six passes."""

    name = "npu-optimize"

    iterations: int = 2
    """Maximum number of rounds (the paper uses 2)."""
    alpha: float = 1.0
    """Operator-fusion aggressiveness in [0, 1], passed to npu-fuse-operators."""
    layout: str = "auto"
    """auto | contiguous | channels-last, passed to npu-optimize-layout."""
    skip: tuple[str, ...] = ()
    """Phase-2 passes to leave out (ablation)."""

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ValueError(f"iterations must be at least 1, got {self.iterations}")
        object.__setattr__(self, "alpha", float(self.alpha))
        skip = (self.skip,) if isinstance(self.skip, str) else tuple(self.skip)
        object.__setattr__(self, "skip", skip)
        unknown = [name for name in skip if name not in PHASE2_PASSES]
        if unknown:
            raise ValueError(
                f"cannot skip {', '.join(unknown)} (Phase-2 passes: {', '.join(PHASE2_PASSES)})"
            )
        self.passes()  # validates alpha and layout now, not later

    @classmethod
    def from_spec(cls, spec: ArgSpec) -> Self:
        return super().from_spec(float_options(spec, "alpha"))

    def passes(self) -> list[ModulePass]:
        """One round: the Phase-2 passes in order, without the skipped ones."""
        options: dict[type[ModulePass], dict[str, object]] = {
            NpuFuseOperatorsPass: {"alpha": self.alpha},
            NpuOptimizeLayoutPass: {"layout": self.layout},
        }
        return [p(**options.get(p, {})) for p in PHASE2 if p.name not in self.skip]

    def run(self, ctx: Context, module: ModuleOp) -> OptimizeReport:
        """Rounds of `passes()` until one rewrites nothing; the report is also published."""
        passes = self.passes()
        before = count_ops(module)
        start = time.perf_counter()
        rounds = 0
        # The sub-pass records reach any enclosing collect_statistics() scope directly.
        with collect_statistics(pattern_hits=False) as runs:
            for _ in range(self.iterations):
                rounds += 1
                first = len(runs)
                for p in passes:
                    p.apply(ctx, module)
                if not any(r.rewrites for r in runs[first:]):
                    break
        rows: dict[str, PassRecord] = {}
        for run in runs:
            row = rows.setdefault(run.name, PassRecord(run.name, 0, run.ops_before, 0, 0.0))
            row.rewrites += run.rewrites
            row.ops_after = run.ops_after
            row.seconds += run.seconds
        report = OptimizeReport(
            list(rows.values()),
            rounds,
            before,
            count_ops(module),
            time.perf_counter() - start,
            runs,
        )
        publish(self.name, report)
        return report

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.run(ctx, op)
