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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from forge.cost import CostModel, Features, analyze, cei, entry
from forge.transforms.npu_optimize import PHASE2_PASSES, phase2_passes

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
    mixed: Mapping[str, str] | None = None,
) -> Row:
    """The default pipeline without `removed`, in place on `module`; under precision
    mixed, `mixed` (`forge.autotune.mixed_assignment`) is written as per-op attributes,
    so the score and the executor see the measured assignment."""
    from forge.executor import head_gflops_for
    from forge.transforms.npu_assign_vregs import assign_vregs
    from forge.transforms.npu_linear_scan import alias_classes, allocate
    from forge.transforms.npu_liveness import annotate_liveness
    from forge.transforms.npu_optimize import optimize
    from forge.transforms.npu_place_devices import place
    from forge.transforms.npu_schedule_affinity import body_ops, count_transitions, schedule

    start = time.perf_counter()
    optimize(module, skip=[removed] if removed in PHASE2_PASSES else [])
    function = entry(module)
    if removed != "npu-place-devices":
        place(function, head_gflops_for(precision))
    if removed != "npu-schedule-affinity":
        transitions = schedule(function).transitions_after
    else:
        transitions = count_transitions(body_ops(function.body.block))
    assign_vregs(function)
    liveness = annotate_liveness(function)
    if removed != "npu-linear-scan":
        buffers = allocate(function).buffers
    else:
        buffers = len(alias_classes(liveness))
    seconds = time.perf_counter() - start
    if precision == "mixed" and mixed is not None:
        from forge.autotune import apply_assignment

        apply_assignment(module, mixed)
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
    mixed: Mapping[str, str] | None = None,
) -> AblationReport:
    """The full pipeline and each of `passes` removed, each on a copy of `module`.

    `measure(planned_module)` -> (mean latency ms, executor build seconds) times a
    variant; then `eager_ms` gives speedup and CEI (compile time: `import_seconds`, the
    variant's Phases 2-4 and the executor build)."""
    from forge.diagnostics import ForgeError

    unknown = [p for p in passes if p not in ABLATIONS]
    if unknown:
        raise ForgeError(f"cannot ablate {', '.join(unknown)} (ablatable: {', '.join(ABLATIONS)})")
    model = model or CostModel.current()
    imported = analyze(module, num_inputs)
    if precision == "mixed" and mixed is not None:
        imported = imported.assigned(mixed)
    unfused = imported.at(precision)
    phase2_passes(1.0, "auto")  # import the passes now, not inside the first row's time
    rows = []
    for removed in (None, *passes):
        variant = module.clone()
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


# ---------------------------------------------------------------------------- CLI


@dataclass
class Program:
    """A captured and imported model, with what running it needs."""

    name: str
    module: ModuleOp
    num_inputs: int
    weights: dict[str, Any]
    loaded: Any
    """forge.cli.Loaded: the model, its example args and kwargs."""
    seconds: float
    """torch.export and import."""


def load_program(reference: str, tiny: bool, seq: int, real_weights: bool) -> Program:
    """Capture and import a model as every other command does (`forge.cli.load_model`).

    Not on the meta device even when no weights are needed: there the transformers code
    adds device moves (`aten.to.device`) that the graph `forge compile` builds has not."""
    from forge.cli import load_model
    from forge.diagnostics import ForgeError

    loaded = load_model(reference, tiny, seq)
    if real_weights and any(p.is_meta for p in loaded.model.parameters()):
        raise ForgeError(f"{reference}: built on the meta device (too large here); no latency")
    return program_of(loaded)


def program_of(loaded: Any) -> Program:
    """Capture and import a `forge.cli.Loaded` model."""
    from forge.capture import capture
    from forge.importer import import_program

    captured = capture(loaded.model, loaded.args, example_kwargs=loaded.kwargs)
    program = import_program(captured)
    return Program(
        loaded.name,
        program.module,
        len(program.input_names),
        dict(program.weights),
        loaded,
        captured.export_seconds + program.import_seconds,
    )


def _measurer(
    program: Program, precision: str, runs: int
) -> Callable[[ModuleOp], tuple[float, float]]:
    from forge.executor import CompiledNPUExecutor
    from forge.numerics import ordered_inputs

    loaded = program.loaded

    def measure(module: ModuleOp) -> tuple[float, float]:
        executor = CompiledNPUExecutor(
            entry(module), program.weights, program.num_inputs, precision
        )
        inputs = ordered_inputs(loaded.model, loaded.args, loaded.kwargs, executor.input_names)
        return mean_ms(lambda: executor(*inputs), runs), executor.build_seconds

    return measure


def _eager_ms(loaded: Any, runs: int) -> float:
    import torch

    with torch.no_grad():
        return mean_ms(lambda: loaded.model(*loaded.args, **loaded.kwargs), runs)


def main(ns: Any) -> int:
    """`forge ablate MODEL... [--tiny] [--seq N] [--precision P] [--passes a,b] [--latency]`."""
    from forge.diagnostics import ForgeError

    if ns.runs < 1:
        raise ForgeError("--runs must be at least 1")
    passes = tuple(p for p in ns.passes.split(",") if p) if ns.passes else ABLATIONS
    model = CostModel.current(ns.cost_model)
    print(f"cost model: {model.describe()}")
    for reference in ns.models:
        program = load_program(reference, ns.tiny, ns.seq, ns.latency)
        mixed = None
        if ns.precision == "mixed":
            from forge.autotune import program_assignment

            mixed, note = program_assignment(program)
            print(note)
        measure = eager = None
        if ns.latency:
            eager = _eager_ms(program.loaded, ns.runs)
            measure = _measurer(program, ns.precision, ns.runs)
        report = ablate(
            program.name,
            program.module,
            program.num_inputs,
            passes,
            ns.precision,
            model,
            measure,
            eager,
            program.seconds,
            mixed,
        )
        print(report.format(), flush=True)
    return 0
