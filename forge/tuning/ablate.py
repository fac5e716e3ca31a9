"""`forge ablate`: the default pipeline with each pass removed in turn.

One row for the full pipeline, then one per removed pass: the six Phase-2 passes
(`npu-optimize` with `skip=`), and the Phase 3-4 passes whose removal changes what the
plan is:

- npu-place-devices: nothing is placed, so every op runs as a CPU kernel (no NNFactory
  graph, no transition).
- npu-schedule-affinity: ops keep their imported order, so transitions are the
  unscheduled count.
- npu-linear-scan: no buffer sharing, one buffer per value that owns storage
  (rho_buf = 1).

npu-assign-vregs and npu-liveness are left in: allocation and the executor compute
what they annotate by themselves, so removing them changes no figure.

Each row gives the cost-model score (at precision precision) and its ratio to the full
pipeline's, ops, physical buffers and NPU↔CPU transitions; with `latency=True` also the
measured mean latency through `CompiledNPUExecutor`, the speedup over eager and CEI.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from forge.dialects.cloning import clone_module
from forge.dialects.context import entry_function
from forge.runtime.host_profile import load_host_profile
from forge.support.diagnostics import ForgeError
from forge.transforms.forge_pipeline import plan
from forge.transforms.npu_linear_scan import alias_classes
from forge.transforms.npu_optimize import PHASE2_PASSES
from forge.transforms.npu_schedule_affinity import body_ops, count_transitions
from forge.tuning.cost import CostModel, Features, analyze, cei

PHASE34_ABLATIONS = ("npu-place-devices", "npu-schedule-affinity", "npu-linear-scan")
ABLATIONS = (*PHASE2_PASSES, *PHASE34_ABLATIONS)


@dataclass
class Row:
    removed: str | None
    """The pass left out; None for the full pipeline."""
    features: Features
    score: float
    ops: int
    buffers: int
    transitions: int
    pipeline_seconds: float
    """Phases 2-4 for this variant."""
    ratio: float = 1.0
    """score / the full pipeline's score."""
    latency_ms: float | None = None
    speedup: float | None = None
    cei: float | None = None

    @property
    def label(self) -> str:
        return f"-{self.removed}" if self.removed else "full pipeline"


@dataclass
class AblationReport:
    name: str
    precision: str
    unfused: Features
    """The imported graph (FGR's numerator)."""
    rows: list[Row]
    model: CostModel
    import_seconds: float = 0.0
    """Capture and import, shared by every row (part of CEI's compile time)."""
    eager_ms: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def full(self) -> Row:
        return self.rows[0]

    def format(self) -> str:
        f = self.full
        imported = self.model.score(self.unfused)
        fgr = self.model.fgr(self.unfused, f.features)
        lines = [
            f"== {self.name} ({self.precision}): imported score {imported:.2f}, "
            f"full pipeline {f.score:.2f}, FGR {fgr:.3f}"
        ]
        timed = self.eager_ms is not None
        header = (
            f"{'removed':<24}{'score':>10}{'vs full':>9}{'ops':>6}{'buffers':>9}"
            f"{'transitions':>13}{'plan ms':>9}"
        )
        if timed:
            header += f"{'latency ms':>12}{'speedup':>9}{'CEI':>8}"
        lines.append(header)
        for r in self.rows:
            line = (
                f"{r.label:<24}{r.score:>10.2f}{r.ratio:>8.3f}x{r.ops:>6}{r.buffers:>9}"
                f"{r.transitions:>13}{r.pipeline_seconds * 1e3:>9.1f}"
            )
            if timed and r.latency_ms is not None:
                line += f"{r.latency_ms:>12.2f}{r.speedup or 0:>8.2f}x{r.cei or 0:>8.3f}"
            lines.append(line)
        if timed:
            lines.append(f"eager: {self.eager_ms:.2f} ms")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def run_variant(
    module: ModuleOp,
    num_inputs: int,
    removed: str | None,
    model: CostModel,
    precision: str,
    mixed: Sequence[str] | None = None,
) -> Row:
    """The default pipeline without `removed`, in place on `module`, at `precision`
    (npu-assign-precision runs in it; under mixed with `mixed`, the measured
    `fp16-weights`, so the score and the executor see the measured assignment)."""
    profile = str(load_host_profile().path)  # measured on first use, before the clock
    start = time.perf_counter()
    report = plan(
        module,
        profile=profile,
        skip=(removed,) if removed else (),
        precision=precision,
        fp16_weights=tuple(mixed) if precision == "mixed" and mixed is not None else None,
    )
    function = entry_function(module)
    if report.schedule is not None:
        transitions = report.schedule.transitions_after
    else:
        transitions = count_transitions(body_ops(function.body.block))
    if report.allocation is not None:
        buffers = report.allocation.buffers
    else:
        assert report.liveness is not None
        buffers = len(alias_classes(report.liveness))
    seconds = time.perf_counter() - start
    features = analyze(function, num_inputs).at(precision)
    return Row(
        removed,
        features,
        model.score(features),
        features.n_ops,
        buffers,
        transitions,
        seconds,
    )


def ablate(
    name: str,
    module: ModuleOp,
    num_inputs: int,
    passes: Sequence[str] = ABLATIONS,
    precision: str = "fp16",
    model: CostModel | None = None,
    measure: Callable[[ModuleOp], tuple[float, float]] | None = None,
    eager_ms: float | None = None,
    import_seconds: float = 0.0,
    mixed: Sequence[str] | None = None,
) -> AblationReport:
    """The full pipeline and each of `passes` removed, each on a copy of `module`.

    `measure(planned_module)` -> (mean latency ms, executor build seconds) times a
    variant; then `eager_ms` gives speedup and CEI (compile time: `import_seconds`, the
    variant's Phases 2-4 and the executor build)."""
    unknown = [p for p in passes if p not in ABLATIONS]
    if unknown:
        raise ForgeError(f"cannot ablate {', '.join(unknown)} (ablatable: {', '.join(ABLATIONS)})")
    model = model or CostModel.current()
    imported = analyze(module, num_inputs)
    if precision == "mixed" and mixed is not None:
        imported = imported.assigned(mixed)
    unfused = imported.at(precision)
    rows = []
    for removed in (None, *passes):
        variant = clone_module(module)
        row = run_variant(variant, num_inputs, removed, model, precision, mixed)
        if measure is not None:
            row.latency_ms, build_seconds = measure(variant)
            if eager_ms is not None:
                row.speedup = eager_ms / row.latency_ms
                compile_seconds = import_seconds + row.pipeline_seconds + build_seconds
                row.cei = cei(row.speedup, compile_seconds)
        rows.append(row)
    for row in rows:
        row.ratio = row.score / rows[0].score if rows[0].score else 1.0
    return AblationReport(name, precision, unfused, rows, model, import_seconds, eager_ms)


def mean_ms(run: Callable[[], Any], runs: int) -> float:
    """Mean wall time of `run()` over `runs` calls, after one warm-up call."""
    run()
    start = time.perf_counter()
    for _ in range(runs):
        run()
    return (time.perf_counter() - start) * 1e3 / runs
