"""`forge calibrate`: fit the cost model's weights to latencies measured on this machine.

A point is (model, configuration): a built-in model (tiny variant) at one sequence
length, planned with one autotune configuration (alpha, layout, precision, iterations)
and run by `CompiledNPUExecutor` at that precision (mixed with the measured per-layer
assignment, `forge.runtime.precision.program_fp16_weights`). Each point gets the five cost-model
features of its planned graph and its measured latency.

The machine is noisy, so latency is measured in interleaved rounds: every round runs
every point of a model variant (in a fresh random order) `runs` times and keeps the
median; a point's latency is its fastest round, so a burst of load hits a few samples
of many points instead of all samples of a few, and is then discarded. A variant
(built, then timed) is one campaign case: `--ray` spreads the variants over a
cluster's nodes, one variant per node at a time.

The weights are fitted by non-negative least squares on relative error (every row
divided by its latency, so a 1 ms point weighs as much as a 100 ms one): ranks are
what autotune uses, and over latencies spanning orders of magnitude an absolute fit
would only learn the largest points. The candidate fits (absolute or relative error,
with or without a constant term) are compared by cross-validation on the training
points only; the held-out points are used once, to report Spearman's rank correlation
of score against latency for the uncalibrated (unit) and the fitted weights.

Held-out points are whole configurations: a seeded random `holdout` fraction of the
distinct configurations, with every point that uses one of them, so the reported
correlation is on configurations the fit has never seen.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forge.dialects.cloning import clone_module
from forge.dialects.context import entry_function, make_context
from forge.frontend import models
from forge.frontend.loading import Loaded, load_program, ordered_inputs, program_of
from forge.frontend.models import SPECS
from forge.runtime.executor import CompiledNPUExecutor
from forge.runtime.precision import program_fp16_weights
from forge.support.campaign import Campaign
from forge.support.diagnostics import ForgeError, one_line
from forge.transforms.forge_pipeline import plan
from forge.transforms.npu_assign_precision import NpuAssignPrecisionPass
from forge.tuning.autotune import TUNED_PRECISIONS, Config, grid
from forge.tuning.cost import FEATURES, CostModel, Features, analyze

MODELS = ("gpt2", "granite-350m", "qwen2-0.5b", "llama-3.2-1b", "lfm2-2.6b", "llama-3.1-8b")
SEQS = (128,)
DEPTHS = (1, 2, 4)
"""Layer multipliers of the tiny variants: the tiny models are all about one size, so
deeper copies of them spread the points over the range where the features differ."""
FULL_MODEL = "gpt2"
"""`--full` adds this model at full size (at the largest sequence length)."""
FULL_POINTS = 6
"""Configurations of the full-size model: each executor holds its weights."""

Progress = Callable[[str], None]


# ------------------------------------------------------------------ statistics


def rank(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Ranks from 1, ties sharing the average of the ranks they span."""
    x = np.asarray(values, dtype=float)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation (Pearson's on average ranks); nan when either side
    is constant or there are fewer than two points (no ranking to compare)."""
    if len(a) != len(b):
        raise ForgeError(f"spearman needs equal lengths, got {len(a)} and {len(b)}")
    if len(a) < 2:
        return math.nan
    ra, rb = rank(a), rank(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    norm = math.sqrt(float(ra @ ra) * float(rb @ rb))
    return float(ra @ rb) / norm if norm > 0 else math.nan


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min ||a x - b|| subject to x >= 0 (Lawson-Hanson active set; numpy only, so no
    scipy dependency)."""
    m, n = a.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 10 * np.finfo(float).eps * max(m, n) * max(1.0, float(np.abs(a).sum(axis=0).max()))
    for _ in range(3 * n + 10):
        gradient = a.T @ (b - a @ x)
        if passive.all() or not (gradient[~passive] > tol).any():
            break
        passive[int(np.argmax(np.where(passive, -np.inf, gradient)))] = True
        while True:
            s = np.zeros(n)
            s[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (s[passive] > tol).all():
                x = s
                break
            blocked = passive & (s <= tol)
            step = float(np.min(x[blocked] / (x[blocked] - s[blocked])))
            x = x + step * (s - x)
            passive &= x > tol
            x[~passive] = 0.0
    return x


@dataclass(frozen=True)
class Fit:
    """One way to fit the weights."""

    relative: bool
    """Minimize relative error (rows divided by latency) instead of absolute error."""
    intercept: bool
    """Fit a non-negative constant term too (dropped from the saved model: a constant
    shifts every score alike and changes no rank)."""

    @property
    def name(self) -> str:
        error = "relative" if self.relative else "absolute"
        return f"NNLS on {error} error" + (" with a constant term" if self.intercept else "")


FITS = (Fit(True, False), Fit(True, True), Fit(False, False), Fit(False, True))


def fit_weights(x: np.ndarray, y: np.ndarray, how: Fit = FITS[0]) -> np.ndarray:
    """Non-negative weights w (one per column of `x`) with x @ w ~ y."""
    if len(y) == 0:
        raise ForgeError("cannot fit the cost model on no points")
    design = np.hstack([x, np.ones((len(y), 1))]) if how.intercept else x
    target = y.astype(float)
    if how.relative:
        design, target = design / target[:, None], np.ones_like(target)
    scale = np.linalg.norm(design, axis=0)
    scale[scale == 0] = 1.0
    w = nnls(design / scale, target) / scale
    return w[: x.shape[1]]


def choose_fit(x: np.ndarray, y: np.ndarray, groups: Sequence[Any], folds: int = 4) -> Fit:
    """The candidate fit with the best mean Spearman over `folds` group-wise folds of
    the training points (ties go to the earlier, simpler candidate)."""
    keys = sorted(set(groups), key=str)
    if len(keys) < 2:
        return FITS[0]
    random.Random(0).shuffle(keys)
    fold_of = {k: i % folds for i, k in enumerate(keys)}
    fold = np.array([fold_of[g] for g in groups])
    best, best_rho = FITS[0], -math.inf
    for how in FITS:
        rhos = []
        for f in range(folds):
            train, test = fold != f, fold == f
            if test.sum() < 2 or train.sum() < 2:
                continue
            rho = spearman(x[test] @ fit_weights(x[train], y[train], how), y[test])
            rhos.append(0.0 if math.isnan(rho) else rho)
        score = float(np.mean(rhos)) if rhos else -math.inf
        if score > best_rho + 1e-9:
            best, best_rho = how, score
    return best


# ---------------------------------------------------------------------- points


@dataclass
class Point:
    model: str
    """The model and its sequence length, e.g. `gpt2@64`."""
    config: Config
    features: Features
    samples: list[float] = field(default_factory=list)
    """Per round: the median latency of `runs` calls, in ms."""
    run: Callable[[], Any] | None = None

    @property
    def latency_ms(self) -> float:
        """The fastest round: other jobs' load only ever adds time, and here it spreads
        a point's round medians by ~50% (the minimum ranked held-out points better than
        the median on the same measurements: 0.85 against 0.76)."""
        return min(self.samples) if self.samples else math.nan


@dataclass
class Variant:
    name: str
    reference: str
    tiny: bool
    seq: int
    points: int
    """Distinct points (graph x precision) to build for it."""
    depth: int = 1
    """Multiplier of the tiny variant's layer count."""


def variants(
    models: Sequence[str],
    seqs: Sequence[int],
    points: int,
    full: bool,
    depths: Sequence[int] = DEPTHS,
) -> list[Variant]:
    """Every tiny model at every depth and sequence length, `points` spread evenly."""
    unknown = [m for m in models if m not in SPECS]
    if unknown:
        raise ForgeError(f"calibrate uses built-in models; unknown: {', '.join(unknown)}")
    if any(d < 1 for d in depths) or any(s < 1 for s in seqs):
        raise ForgeError("depths and sequence lengths must be at least 1")
    tiny = [(m, d, s) for m in models for d in depths for s in seqs]
    if not tiny:
        raise ForgeError("calibrate needs at least one model, depth and sequence length")
    each, extra = divmod(points, len(tiny))
    out = [
        Variant(f"{m}{f'x{d}' if d > 1 else ''}@{s}", m, True, s, each + (i < extra), d)
        for i, (m, d, s) in enumerate(tiny)
    ]
    if full:
        seq = max(seqs)
        out.append(Variant(f"{FULL_MODEL}(full)@{seq}", FULL_MODEL, False, seq, FULL_POINTS))
    return [v for v in out if v.points > 0]


def load_variant(variant: Variant) -> Any:
    """The variant captured and imported, as a `forge.frontend.loading.Program`: a built-in model,
    tiny or full, with `depth` times the tiny variant's layers."""
    import torch
    import transformers

    if variant.depth == 1:
        return load_program(variant.reference, variant.tiny, variant.seq, real_weights=True)

    spec = models.get_spec(variant.reference)
    config = spec.config(tiny=True)
    layers = int(config.num_hidden_layers) * variant.depth
    types = getattr(config, "layer_types", None)
    if types:
        config.layer_types = [types[i % len(types)] for i in range(layers)]
    config.num_hidden_layers = layers
    torch.manual_seed(0)
    model = getattr(transformers, spec.model_class)(config).eval()
    args, kwargs = models.example_inputs(model, seq=variant.seq)
    return program_of(Loaded(variant.name, model, args, kwargs))


def build_points(variant: Variant, rng: random.Random, progress: Progress) -> list[Point]:
    """Plan `variant` under randomly drawn configurations and build an executor for each
    distinct (graph, precision) until it has `variant.points` of them."""

    start = time.perf_counter()
    program = load_variant(variant)
    fp16_weights, _ = program_fp16_weights(program)
    loaded = program.loaded
    structures = list(dict.fromkeys(c.structure for c in grid(full=True)))
    rng.shuffle(structures)
    seen: set[tuple[str, str]] = set()
    points: list[Point] = []
    plans = 0
    for alpha, layout, iterations in structures[: variant.points]:
        if len(points) >= variant.points:
            break
        module = clone_module(program.module)
        allocation = plan(module, iterations=iterations, alpha=alpha, layout=layout).allocation
        plans += 1
        text = str(module)
        for precision in rng.sample(TUNED_PRECISIONS, len(TUNED_PRECISIONS)):
            if len(points) >= variant.points or (text, precision) in seen:
                continue
            seen.add((text, precision))
            config = Config(alpha, layout, precision, iterations)
            graph = clone_module(module)
            # One planned graph serves every precision: the precision changes no op.
            kept = fp16_weights if precision == "mixed" else None
            NpuAssignPrecisionPass(precision, kept).apply(make_context(), graph)
            function = entry_function(graph)
            executor = CompiledNPUExecutor(
                function, program.weights, program.num_inputs, allocation=allocation
            )
            inputs = ordered_inputs(loaded.model, loaded.args, loaded.kwargs, executor.input_names)
            executor(*inputs)  # warm-up: first-call allocations
            features = analyze(function, program.num_inputs).at(precision)
            points.append(Point(variant.name, config, features, run=_caller(executor, inputs)))
    progress(
        f"  {variant.name}: {len(points)} points from {plans} planned graphs "
        f"({time.perf_counter() - start:.1f} s)"
    )
    return points


def _caller(executor: Any, inputs: Sequence[Any]) -> Callable[[], Any]:
    return lambda: executor(*inputs)


def measure(
    points: Sequence[Point], rounds: int, runs: int, rng: random.Random, progress: Progress
) -> None:
    """Interleaved rounds: each runs every point `runs` times, in a fresh random order,
    and appends the median (ms) to its samples."""
    order = list(points)
    for r in range(1, rounds + 1):
        start = time.perf_counter()
        rng.shuffle(order)
        for p in order:
            assert p.run is not None
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                p.run()
                times.append((time.perf_counter() - t) * 1e3)
            p.samples.append(statistics.median(times))
        progress(f"  round {r}/{rounds}: {time.perf_counter() - start:.1f} s")


# ---------------------------------------------------------------------- report


@dataclass
class CalibrationReport:
    points: list[Point]
    held_out: list[bool]
    fit: Fit
    model: CostModel
    """The fitted weights."""
    before: float
    """Held-out Spearman of the unit weights."""
    after: float
    """Held-out Spearman of the fitted weights."""
    within_before: float
    within_after: float
    """Mean over models of the held-out Spearman within one model (configurations only)."""
    build_seconds: float = 0.0
    measure_seconds: float = 0.0

    def format(self) -> str:
        test = sum(self.held_out)
        configs = {p.config for p, h in zip(self.points, self.held_out, strict=True) if h}
        w = ", ".join(f"{n}={v:.4g}" for n, v in zip(FEATURES, self.model.weights, strict=True))
        return "\n".join(
            [
                f"points: {len(self.points)} ({len(self.points) - test} fit, {test} held out: "
                f"{len(configs)} configurations never seen by the fit)",
                f"fit: {self.fit.name} (chosen by cross-validation on the fit points)",
                f"weights: {w} (score in ms)",
                f"held-out Spearman, all points:      uncalibrated {_fmt(self.before)}"
                f"  calibrated {_fmt(self.after)}",
                f"held-out Spearman, within a model:  uncalibrated {_fmt(self.within_before)}"
                f"  calibrated {_fmt(self.within_after)} (mean over models)",
            ]
        )


def _fmt(rho: float) -> str:
    return "  n/a" if math.isnan(rho) else f"{rho:+.3f}"


def split(points: Sequence[Point], holdout: float, seed: int) -> list[bool]:
    """Hold out a seeded random `holdout` fraction of the distinct configurations."""
    if not 0.0 < holdout < 1.0:
        raise ForgeError(f"--holdout must lie in (0, 1), got {holdout}")
    configs = sorted({p.config for p in points}, key=lambda c: c.format())
    random.Random(seed).shuffle(configs)
    count = min(len(configs) - 1, max(1, round(holdout * len(configs))))
    held = set(configs[:count])
    return [p.config in held for p in points]


def within(points: Sequence[Point], predicted: np.ndarray, mask: Sequence[bool]) -> float:
    """Mean held-out Spearman within each model (over those with a ranking to compare)."""
    by_model: dict[str, list[int]] = {}
    for i, (p, m) in enumerate(zip(points, mask, strict=True)):
        if m:
            by_model.setdefault(p.model, []).append(i)
    y = np.array([p.latency_ms for p in points])
    rhos = [spearman(predicted[i], y[i]) for i in by_model.values() if len(i) >= 3]
    rhos = [r for r in rhos if not math.isnan(r)]
    return float(np.mean(rhos)) if rhos else math.nan


def fit_points(points: Sequence[Point], held_out: Sequence[bool], source: str) -> CalibrationReport:
    """Fit on the points not held out; Spearman before and after on the held-out ones."""
    x = np.array([p.features.vector() for p in points])
    y = np.array([p.latency_ms for p in points])
    train = np.array([not h for h in held_out])
    test = ~train
    if train.sum() < 2 or test.sum() < 2:
        raise ForgeError(
            f"calibration needs at least 2 fit and 2 held-out points, got {int(train.sum())} "
            f"and {int(test.sum())} (use more --points)"
        )
    groups = [p.config for p, t in zip(points, train, strict=True) if t]
    how = choose_fit(x[train], y[train], groups)
    weights = fit_weights(x[train], y[train], how)
    if not (weights > 0).any():
        raise ForgeError("the fit found no feature that predicts latency (all weights 0)")
    model = CostModel(*map(float, weights), source=source)
    unit = np.array(CostModel.default().weights)
    mask = list(test)
    return CalibrationReport(
        list(points),
        list(held_out),
        how,
        model,
        spearman(x[test] @ unit, y[test]),
        spearman(x[test] @ weights, y[test]),
        within(points, x @ unit, mask),
        within(points, x @ weights, mask),
    )


@dataclass(frozen=True)
class VariantCase:
    """One campaign case: a variant's points built and measured on one machine (plain
    data, so a Ray worker can run it)."""

    variant: Variant
    seed: int
    rounds: int
    runs: int


@dataclass
class VariantResult:
    name: str
    points: list[Point]
    build_seconds: float = 0.0
    measure_seconds: float = 0.0
    error: str = ""


def calibrate_variant(case: VariantCase) -> VariantResult:
    """Build `case.variant`'s points and time them in interleaved rounds. Its random
    draws depend on the seed and the variant only, so the case list is the same
    however the campaign runs."""
    result = VariantResult(case.variant.name, [])
    rng = random.Random(f"{case.seed}:{case.variant.name}")
    try:
        start = time.perf_counter()
        points = build_points(case.variant, rng, lambda line: None)
        result.build_seconds = time.perf_counter() - start
        measure(points, case.rounds, case.runs, rng, lambda line: None)
        result.measure_seconds = time.perf_counter() - start - result.build_seconds
    except Exception as e:
        result.error = f"{type(e).__name__}: {one_line(str(e))}"
        return result
    for p in points:
        p.run = None  # release the executor (and let the points pickle)
    result.points = points
    return result


def _crashed(case: VariantCase, why: str) -> VariantResult:
    return VariantResult(case.variant.name, [], error=why)


def calibrate(
    models: Sequence[str] = MODELS,
    seqs: Sequence[int] = SEQS,
    points: int = 144,
    full: bool = False,
    depths: Sequence[int] = DEPTHS,
    rounds: int = 5,
    runs: int = 5,
    holdout: float = 0.3,
    seed: int = 0,
    progress: Progress = lambda line: None,
    campaign: Campaign | None = None,
) -> CalibrationReport:
    """Build and measure the points, variant by variant (each variant a campaign case:
    on Ray, one per node at a time), then fit and evaluate (nothing is saved)."""
    if rounds < 1 or runs < 1:
        raise ForgeError("--rounds and --runs must be at least 1")
    campaign = campaign or Campaign()
    chosen = variants(models, seqs, points, full, depths)
    progress(
        f"building and timing {sum(v.points for v in chosen)} points over {len(chosen)} models "
        f"({rounds} rounds x {runs} runs; {campaign.describe(exclusive=True)})"
    )
    cases = [VariantCase(v, seed, rounds, runs) for v in chosen]
    built: list[Point] = []
    build_seconds = measure_seconds = 0.0
    for result in campaign.map(calibrate_variant, cases, _crashed, exclusive=True):
        if result.error:
            progress(f"  {result.name}: skipped: {result.error}")
            continue
        progress(
            f"  {result.name}: {len(result.points)} points (building "
            f"{result.build_seconds:.1f} s, timing {result.measure_seconds:.1f} s)"
        )
        built.extend(result.points)
        build_seconds += result.build_seconds
        measure_seconds += result.measure_seconds
    if len(built) < 4:
        raise ForgeError(f"calibrate measured {len(built)} points; it needs at least 4")
    source = (
        f"calibrated by forge calibrate ({len(built)} points, {rounds}x{runs} runs, seed {seed})"
    )
    report = fit_points(built, split(built, holdout, seed), source)
    report.build_seconds, report.measure_seconds = build_seconds, measure_seconds
    return report
