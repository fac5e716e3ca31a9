"""`forge report`: the compiler's own figures, and benchmark results, as PNG plots.

For each chosen model the whole pipeline runs once (`forge.transforms.forge_pipeline.plan`, as in
`forge plan`), and its reports become figures: the Phase-2 passes (ops before/after,
rewrites and milliseconds per pass run), buffers (vregs, owning values, physical
buffers; planned bytes against the peak-live lower bound) and NPU<->CPU transitions
before/after scheduling. `--bench FILE.json` (written by `forge bench --json`) adds
compile times and latencies per backend; any backend may be missing.

    forge report --model gpt2 --tiny --bench bench.json -o build/report
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forge.devtools.bench import backend_names
from forge.frontend.capture import capture
from forge.frontend.importer import import_program
from forge.frontend.loading import load_model
from forge.support.diagnostics import ForgeError, one_line
from forge.support.files import atomic_write
from forge.transforms.forge_pipeline import plan

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from forge.transforms.forge_pipeline import PlanReport

MIB = 1 << 20
COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860")
COMPILE_KEYS = ("ready", "first_output")
LATENCY_KEYS = ("mean", "p50", "p99")


@dataclass
class ModelPlan:
    name: str
    report: PlanReport


def plan_models(names: Sequence[str], tiny: bool, seq: int) -> list[ModelPlan]:
    """Capture, import and plan each model once (the same run as `forge plan`)."""

    plans = []
    for name in names:
        loaded = load_model(name, tiny, seq)
        program = import_program(capture(loaded.model, loaded.args, example_kwargs=loaded.kwargs))
        plans.append(ModelPlan(name, plan(program.module)))
    return plans


def _new_figure(width: float, height: float, panels: int) -> tuple[Figure, list[Axes]]:
    """An Agg-backed figure outside pyplot (no global state, no display needed)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ForgeError("forge report needs matplotlib: pip install matplotlib") from e
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(panels, 1, squeeze=False)[:, 0]
    return figure, list(axes)


def _grouped_bars(
    ax: Axes,
    groups: Sequence[str],
    series: dict[str, Sequence[float | None]],
) -> None:
    """One cluster of bars per group, one bar per series, each labelled with its value;
    a None value leaves a gap."""
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        shown = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        if not shown:
            continue
        bars = ax.bar(
            [x for x, _ in shown],
            [v for _, v in shown],
            width,
            label=label,
            color=COLORS[i % len(COLORS)],
        )
        ax.bar_label(bars, labels=[_short(v) for _, v in shown], fontsize=7, padding=1)
    ax.set_xticks(range(len(groups)), groups)
    ax.margins(y=0.15)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if len(series) > 1:
        ax.legend(fontsize=8)


def _short(value: float) -> str:
    """A bar label: three significant digits, never an exponent for the usual ranges."""
    if value >= 100 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as f:
        figure.savefig(f, dpi=110, format="png")
    return path


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "model"


def passes_figure(plan: ModelPlan, out: Path) -> Path:
    """Phase 2, one cluster per pass run: ops before/after, rewrites, milliseconds."""
    opt = plan.report.optimize
    per_round = len(opt.rows) or 1
    labels = [
        f"{i // per_round + 1}: {r.name.removeprefix('npu-')}" for i, r in enumerate(opt.runs)
    ]
    figure, (ops, rewrites, ms) = _new_figure(max(8.0, 0.75 * len(labels) + 2), 9.5, 3)
    figure.suptitle(
        f"{plan.name}: Phase 2 (npu-optimize), {opt.rounds} round(s), "
        f"{opt.ops_before} -> {opt.ops_after} ops (-{opt.reduction * 100:.1f}%)"
    )
    _grouped_bars(
        ops,
        labels,
        {
            "ops before": [r.ops_before for r in opt.runs],
            "ops after": [r.ops_after for r in opt.runs],
        },
    )
    ops.set_ylabel("ops")
    _grouped_bars(rewrites, labels, {"rewrites": [r.rewrites for r in opt.runs]})
    rewrites.set_ylabel("rewrites")
    _grouped_bars(ms, labels, {"ms": [r.seconds * 1e3 for r in opt.runs]})
    ms.set_ylabel("milliseconds")
    ms.set_xlabel("round: pass")
    for ax in (ops, rewrites, ms):
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")
    return _save(figure, out / f"passes-{_slug(plan.name)}.png")


def buffers_figure(plans: Sequence[ModelPlan], out: Path) -> Path:
    """Allocation per model: value counts, then planned arena bytes vs the lower bound."""
    names = [p.name for p in plans]
    allocs = [p.report.allocation for p in plans]
    figure, (counts, sizes) = _new_figure(max(7.0, 2.2 * len(plans) + 3), 8.0, 2)
    figure.suptitle("Buffers (Phase 4: liveness + linear-scan allocation)")
    _grouped_bars(
        counts,
        names,
        {
            "vregs": [a.vregs for a in allocs],
            "owning values": [a.allocated_values for a in allocs],
            "physical buffers": [a.buffers for a in allocs],
        },
    )
    counts.set_ylabel("count")
    counts.set_title("vregs vs values that own storage vs physical buffers", fontsize=10)
    _grouped_bars(
        sizes,
        names,
        {
            "planned arena": [a.planned_bytes / MIB for a in allocs],
            "peak-live lower bound": [a.lower_bound_bytes / MIB for a in allocs],
        },
    )
    sizes.set_ylabel("MiB")
    ratios = ", ".join(f"{p.name} {p.report.allocation.ratio:.3f}" for p in plans)
    sizes.set_title(f"planned bytes vs lower bound (ratio: {ratios})", fontsize=10)
    return _save(figure, out / "buffers.png")


def transitions_figure(plans: Sequence[ModelPlan], out: Path) -> Path:
    """NPU<->CPU transitions in program order before and after npu-schedule-affinity."""
    names = [p.name for p in plans]
    scheds = [p.report.schedule for p in plans]
    figure, (ax,) = _new_figure(max(6.0, 1.8 * len(plans) + 3), 4.5, 1)
    figure.suptitle("NPU<->CPU transitions (npu-schedule-affinity)")
    _grouped_bars(
        ax,
        names,
        {
            "before scheduling": [s.transitions_before for s in scheds],
            "after scheduling": [s.transitions_after for s in scheds],
        },
    )
    ax.set_ylabel("transitions")
    return _save(figure, out / "transitions.png")


def _numbers(section: Any, keys: Sequence[str], where: str) -> dict[str, dict[str, float]]:
    """Validate `{backend: {key: number}}`; unknown keys are ignored, null means missing."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ForgeError(f"{where} must be an object of backends")
    table: dict[str, dict[str, float]] = {}
    for backend, values in section.items():
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ForgeError(f"{where}.{backend} must be an object, got {values!r}")
        row = {}
        for key in keys:
            value = values.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ForgeError(f"{where}.{backend}.{key} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ForgeError(f"{where}.{backend}.{key} must be finite and >= 0, got {value}")
            row[key] = float(value)
        if row:
            table[backend] = row
    return table


@dataclass
class Bench:
    title: str
    compile_seconds: dict[str, dict[str, float]]
    latency_ms: dict[str, dict[str, float]]
    skipped: dict[str, str]
    """Backend -> why it did not run (optional in the file)."""


def load_bench(path: Path) -> Bench:
    """Read and check a `forge bench --json` file; any problem is one ForgeError."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ForgeError(f"cannot read bench results {path}: {one_line(str(e))}") from e
    if not isinstance(data, dict):
        raise ForgeError(f"{path}: bench results must be a JSON object")
    try:
        compile_seconds = _numbers(data.get("compile_seconds"), COMPILE_KEYS, "compile_seconds")
        latency_ms = _numbers(data.get("latency_ms"), LATENCY_KEYS, "latency_ms")
    except ForgeError as e:
        raise ForgeError(f"{path}: {e.args[0]}") from e
    if not compile_seconds and not latency_ms:
        raise ForgeError(f"{path}: no compile_seconds or latency_ms figures to plot")
    facts = [str(data.get("model", "?")) + (" (tiny)" if data.get("tiny") is True else "")]
    for key, unit in (("seq", "seq"), ("threads", "threads"), ("runs", "runs")):
        if key in data:
            facts.append(f"{data[key]} {unit}" if key != "seq" else f"seq {data[key]}")
    skipped = data.get("skipped")
    skipped = (
        {str(k): one_line(str(v)) for k, v in skipped.items()} if isinstance(skipped, dict) else {}
    )
    return Bench(", ".join(facts), compile_seconds, latency_ms, skipped)


def _backends(table: dict[str, dict[str, float]]) -> list[str]:
    """The backends in `table`: registered ones in `forge bench`'s order, then the
    others (from a file written with other backends registered), sorted."""
    registered = backend_names()
    known = [b for b in registered if b in table]
    return known + sorted(set(table) - set(registered))


def bench_figure(bench: Bench, out: Path) -> Path:
    """Compile time and latency per backend, in `forge bench`'s order."""
    panels = [t for t in (bench.compile_seconds, bench.latency_ms) if t]
    figure, axes = _new_figure(9.0, 4.2 * len(panels), len(panels))
    figure.suptitle(f"Benchmark: {bench.title}")
    ax_iter = iter(axes)
    for table, keys, unit, title in (
        (bench.compile_seconds, COMPILE_KEYS, "seconds", "compile time"),
        (bench.latency_ms, LATENCY_KEYS, "milliseconds", "latency per forward pass"),
    ):
        if not table:
            continue
        ax = next(ax_iter)
        backends = _backends(table)
        _grouped_bars(
            ax,
            backends,
            {key: [table[b].get(key) for b in backends] for key in keys},
        )
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=10)
    if bench.skipped:
        notes = "; ".join(f"{name}: {why}"[:80] for name, why in sorted(bench.skipped.items()))
        figure.supxlabel(f"not run: {notes}", fontsize=8)
    return _save(figure, out / "bench.png")


def render(
    names: Sequence[str], tiny: bool, seq: int, bench_path: Path | None, out: Path
) -> list[Path]:
    """Every figure for `names` (and the bench file, checked first so a bad file fails
    fast); the PNG paths written."""
    bench = load_bench(bench_path) if bench_path is not None else None
    written = []
    if names:
        plans = plan_models(names, tiny, seq)
        written += [passes_figure(p, out) for p in plans]
        written += [buffers_figure(plans, out), transitions_figure(plans, out)]
    if bench is not None:
        written.append(bench_figure(bench, out))
    return written
