"""`forge autotune`: the paper's grid search over Phase-2 options, scored by the cost model.

The grid is alpha (fusion aggressiveness) x layout policy x parameter precision x
iterations (npu-optimize rounds). The default sweep is alpha x layout x precision at
iterations = 2 (45 configurations); `full=True` adds iterations 1 and 3 (135). A
configuration is scored by the cost model on the graph npu-optimize produces for it.

Why it is fast: precision changes no op, only the bytes of the parameters, so a sweep
builds one graph per (alpha, layout, iterations), analyses it once (`cost.analyze`) and
prices it at every precision. And those graphs are built together, level by level along
the pass sequence: configurations in the same state share one module, which each next
pass runs on once. A pass that makes no rewrite leaves the module as it was, so
npu-dce, npu-cse, npu-fold-constants and npu-fuse-attention of round 1 run once for the
whole sweep and an alpha whose rewrites do not occur joins the state before it. A pass
is not run at all on a state that is already its fixed point (each drives its patterns
to one), and a module is cloned only where configurations that share it go different
ways.

The score is checked against the executor by `latency_check` (`--latency K`): the top
configurations compiled by `compile_model` and timed in interleaved rounds; the unit of
that work, `measure_config`, takes and returns plain picklable data.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from forge.dialects import npu
from forge.dialects.cloning import clone_module
from forge.dialects.context import entry_function, infer_num_inputs, make_context
from forge.dialects.dtypes import check_precision
from forge.frontend.loading import Loaded, load_model, ordered_inputs
from forge.support.campaign import Campaign
from forge.support.collector import collector_paused
from forge.support.diagnostics import ForgeError, one_line
from forge.transforms.forge_pipeline import ForgePipelinePass, phase2_of
from forge.transforms.npu_fuse_operators import AlphaUsed
from forge.transforms.npu_optimize import PHASE2_PASSES
from forge.transforms.npu_optimize_layout import (
    CHANNELS_LAST,
    PREFERRED_LAYOUT,
    preferred_layouts,
)
from forge.transforms.pattern_pass import (
    NpuPatternPass,
    collect_reports,
    collect_statistics,
    count_ops,
)
from forge.tuning.cost import CostModel, Features, Structure, analyze

ALPHAS = (0.2, 0.4, 0.6, 0.8, 1.0)
LAYOUTS = ("auto", "channels-last", "contiguous")
TUNED_PRECISIONS = ("fp16", "int8", "mixed")
"""The grid's precisions (pi): fp32 is the baseline, not a configuration."""
ITERATIONS = (1, 2, 3)
DEFAULT_ITERATIONS = 2


@dataclass(frozen=True)
class Config:
    alpha: float = 1.0
    layout: str = "auto"
    precision: str = "fp16"
    iterations: int = DEFAULT_ITERATIONS

    @property
    def structure(self) -> tuple[float, str, int]:
        """What the graph depends on (precision does not change it)."""
        return (self.alpha, self.layout, self.iterations)

    def format(self) -> str:
        return (
            f"alpha={self.alpha:g} layout={self.layout} {self.precision} "
            f"iterations={self.iterations}"
        )


DEFAULT = Config()
"""npu-optimize's defaults (alpha, layout, iterations) at the paper's fp16 dispatch."""


def grid(full: bool = False) -> list[Config]:
    """alpha x layout x precision at 2 iterations (45), or at 1, 2 and 3 (135)."""
    iterations = ITERATIONS if full else (DEFAULT_ITERATIONS,)
    return [
        Config(a, lam, p, i)
        for i in iterations
        for a in ALPHAS
        for lam in LAYOUTS
        for p in TUNED_PRECISIONS
    ]


@dataclass(frozen=True)
class Trial:
    config: Config
    features: Features
    score: float


@dataclass
class SearchStats:
    pass_runs: int = 0
    """Passes actually run (a configuration run on its own runs 6 per round)."""
    clones: int = 0
    probes: int = 0
    """Passes probed (`would_rewrite`) before a copy of their state: no copy, no run
    where the probe finds nothing to rewrite."""
    states: int = 0
    """Distinct graphs analysed."""


@dataclass
class AutotuneReport:
    trials: list[Trial]
    """In grid order."""
    default: Trial
    best: Trial
    unfused: Features
    """The imported graph at the best configuration's precision (FGR's numerator)."""
    seconds: float
    """The sweep: building every graph, analysing and scoring (capture/import excluded)."""
    cpu_seconds: float
    """Its process CPU time (wall time minus waiting for a core on a busy machine)."""
    stats: SearchStats
    model: CostModel

    @property
    def gain(self) -> float:
        """Relative score reduction of the best configuration over the default."""
        return 1.0 - self.best.score / self.default.score if self.default.score else 0.0

    @property
    def fgr(self) -> float:
        return self.model.fgr(self.unfused, self.best.features)

    def ranked(self) -> list[Trial]:
        return sorted(self.trials, key=_rank_key(self.trials))

    def format(self, top: int | None = 10) -> str:
        rows = self.ranked()
        if top is not None:
            rows = rows[:top]
        lines = [
            f"{'rank':>4}{'alpha':>6} {'layout':<14}{'prec':<6}{'iter':>4}{'ops':>7}"
            f"{'weights':>9}{'linear':>8}{'depth':>7}{'MiB':>9}{'score':>10}{'vs default':>12}"
        ]
        for i, t in enumerate(rows, 1):
            c, f = t.config, t.features
            change = t.score / self.default.score - 1.0 if self.default.score else 0.0
            lines.append(
                f"{i:>4}{c.alpha:>6g} {c.layout:<14}{c.precision:<6}{c.iterations:>4}"
                f"{f.n_ops:>7}{f.n_weights:>9}{f.n_linear:>8}{f.d_graph:>7}{f.s_params:>9.2f}"
                f"{t.score:>10.2f}{change * 100:>+11.2f}%"
            )
        return "\n".join(lines)


def _rank_key(trials: Sequence[Trial]) -> Callable[[Trial], tuple[float, int, int, int]]:
    """Lowest score first; ties go to fewer rounds (cheaper to compile), then to fewer
    changes from the default (so a gain names only the options that earn it), then to
    grid order."""
    order = {t.config: i for i, t in enumerate(trials)}

    def key(t: Trial) -> tuple[float, int, int, int]:
        c = t.config
        changes = (c.alpha != DEFAULT.alpha) + (c.layout != DEFAULT.layout)
        changes += (c.precision != DEFAULT.precision) + (c.iterations != DEFAULT.iterations)
        return (round(t.score, 9), c.iterations, changes, order[c])

    return key


# ------------------------------------------------------------------ the search


PassKey = tuple[str, str]
"""(pass name, option): alpha for npu-fuse-operators, layout for npu-optimize-layout."""


@dataclass
class _Group:
    """Configurations whose graphs are, at this point of the pass sequence, one state."""

    module: ModuleOp
    configs: list[tuple[float, str, int]]
    clean: frozenset[PassKey] = frozenset()
    """Passes the state is a fixed point of: each drives its patterns to a fixed point,
    so one that ran on this very state (or made no rewrite on it) would make none."""
    rewrote: bool = False
    """Some pass of the current round rewrote something."""


def _is_clean(clean: frozenset[PassKey], key: PassKey) -> bool:
    """`key` would make no rewrite. npu-fuse-operators only adds rewrites as alpha grows, so
    a fixed point of alpha is one of every smaller alpha too."""
    if key in clean:
        return True
    if key[0] != "npu-fuse-operators":
        return False
    alpha = float(key[1])
    return any(n == key[0] and float(o) >= alpha for n, o in clean)


@dataclass
class _Search:
    ctx: Context
    nhwc_possible: bool = True
    """Some op of the imported graph asks for channels-last. Phase-2 passes create no
    such op (convolutions come only from the import), so without one no state has any
    and layout=channels-last is layout=auto throughout."""
    stats: SearchStats = field(default_factory=SearchStats)
    passes: dict[PassKey, ModulePass] = field(default_factory=dict)

    def pass_for(self, step: int, alpha: float, layout: str) -> tuple[PassKey, ModulePass]:
        name = PHASE2_PASSES[step]
        option = f"{alpha:g}" if name == "npu-fuse-operators" else ""
        option = layout if name == "npu-optimize-layout" else option
        key = (name, option)
        if key not in self.passes:
            self.passes[key] = phase2_of(ForgePipelinePass(alpha=alpha, layout=layout))[step]
        return key, self.passes[key]

    def run(self, p: ModulePass, module: ModuleOp) -> tuple[int, float | None]:
        """The rewrites `p` made, and for npu-fuse-operators the lowest alpha that makes
        the same ones (`AlphaUsed`)."""
        self.stats.pass_runs += 1
        with collect_statistics(pattern_hits=False) as records, collect_reports() as reports:
            p.apply(self.ctx, module)
        needed = next((r.report.needed for r in reports if isinstance(r.report, AlphaUsed)), None)
        return sum(r.rewrites for r in records), needed

    def would_rewrite(self, p: ModulePass, module: ModuleOp) -> bool:
        """Probe before copying a state that may not change (`NpuPatternPass.would_rewrite`);
        a pass that cannot be probed is assumed to rewrite."""
        if not isinstance(p, NpuPatternPass):
            return True
        self.stats.probes += 1
        return p.would_rewrite(module)

    def clone(self, module: ModuleOp) -> ModuleOp:
        self.stats.clones += 1
        return clone_module(module)

    def branch(self, group: _Group, step: int) -> list[_Group]:
        """Run this step's pass(es) on the group's state; one child per resulting state.

        Passes the state is clean for are not run. Each other pass gets a module of the
        group's state it may rewrite; one that made no rewrite leaves that module as the
        state itself, which later passes clone from, so a module is cloned only while
        some pass still to run needs the state and none is spare. Rewritten siblings
        that came out identical (e.g. two alpha whose extra rewrites do not occur) merge."""
        by_pass: dict[PassKey, list[tuple[float, str, int]]] = {}
        instances: dict[PassKey, ModulePass] = {}
        same_as_auto = PHASE2_PASSES[step] == "npu-optimize-layout" and not (
            self.nhwc_possible and _wants_nhwc(group.module)
        )
        for config in group.configs:
            layout = "auto" if same_as_auto and config[1] == "channels-last" else config[1]
            key, p = self.pass_for(step, config[0], layout)
            by_pass.setdefault(key, []).append(config)
            instances[key] = p
        # highest alpha first: once one makes no rewrite, every smaller alpha is clean
        order = sorted(by_pass, key=lambda k: -float(k[1]) if k[0] == "npu-fuse-operators" else 0)
        clean, unchanged = group.clean, list[tuple[float, str, int]]()
        pending = []
        for key in order:
            if _is_clean(clean, key):
                unchanged.extend(by_pass[key])
            else:
                pending.append(key)
        pool = [group.module]  # modules in the group's state, free to rewrite
        children: list[_Group] = []
        while pending:
            key = pending.pop(0)
            if _is_clean(clean, key):
                unchanged.extend(by_pass[key])
                continue
            module = pool.pop()
            if not pool and (pending or unchanged):  # the state is still needed after this
                if not self.would_rewrite(instances[key], module):
                    pool.append(module)  # a no-op here: no copy, and no run
                    clean = clean | {key}
                    unchanged.extend(by_pass[key])
                    continue
                pool.append(self.clone(module))
            rewrites, needed = self.run(instances[key], module)
            if not rewrites:
                pool.append(module)
                clean = clean | {key}
                unchanged.extend(by_pass[key])
                continue
            configs = list(by_pass[key])
            if needed is not None:  # smaller alphas that make the very same rewrites
                same = [k for k in pending if _alpha(k) >= needed]
                pending = [k for k in pending if k not in same]
                configs.extend(c for k in same for c in by_pass[k])
            twin = next((c for c in children if _same(c.module, module)), None)
            if twin is not None:
                twin.configs.extend(configs)
                twin.clean = twin.clean | {key}
                continue
            children.append(_Group(module, configs, frozenset({key}), True))
        if unchanged:
            children.insert(0, _Group(pool[0], unchanged, clean, group.rewrote))
        return children

    def explore(
        self, module: ModuleOp, structures: Sequence[tuple[float, str, int]], num_inputs: int
    ) -> dict[tuple[float, str, int], Structure]:
        """The analysed graph of every (alpha, layout, iterations); `module` is consumed."""
        done: dict[tuple[float, str, int], Structure] = {}
        rounds = max(s[2] for s in structures)
        groups = [_Group(module, list(structures))]
        for round_ in range(1, rounds + 1):
            for g in groups:
                g.rewrote = False
            for step in range(len(PHASE2_PASSES)):
                groups = [child for g in groups for child in self.branch(g, step)]
            remaining = []
            for g in groups:
                finished = [c for c in g.configs if c[2] == round_ or not g.rewrote]
                if finished:
                    structure = analyze(g.module, num_inputs)
                    self.stats.states += 1
                    done.update((c, structure) for c in finished)
                g.configs = [c for c in g.configs if c not in finished]
                if g.configs:
                    remaining.append(g)
            groups = remaining
        return done


def _alpha(key: PassKey) -> float:
    """npu-fuse-operators' alpha in `key`; -1 for any other pass."""
    return float(key[1]) if key[0] == "npu-fuse-operators" else -1.0


def _wants_nhwc(module: ModuleOp) -> bool:
    """Some operand asks for channels-last; if none does, layout=channels-last is exactly
    layout=auto on this state (the policies differ only there, and the pass inserts no
    such op)."""
    keys = [k for k, wants in PREFERRED_LAYOUT.items() if CHANNELS_LAST in wants]
    opcodes = {k for k in keys if isinstance(k, str)}
    classes = tuple(k for k in keys if not isinstance(k, str))
    for op in module.walk():
        # only an op that some entry asking for channels-last matches needs a look
        if isinstance(op, npu.GenericOp):
            candidate = op.opcode in opcodes
        else:
            candidate = bool(classes) and isinstance(op, classes)
        if candidate and CHANNELS_LAST in preferred_layouts(op):
            return True
    return False


def _same(a: ModuleOp, b: ModuleOp) -> bool:
    """Identical IR; op counts first, as a cheap filter."""
    return count_ops(a) == count_ops(b) and a.is_structurally_equivalent(b)


def sweep(
    module: ModuleOp,
    configs: Iterable[Config] | None = None,
    full: bool = False,
    model: CostModel | None = None,
    num_inputs: int | None = None,
    consume: bool = False,
    mixed: Sequence[str] | None = None,
) -> AutotuneReport:
    """Score every configuration (default: `grid(full)`) on `module`'s entry function;
    the default configuration is always scored. `module` is left as it was unless
    `consume` (then the sweep rewrites it instead of a copy). `mixed` (the measured
    `fp16-weights` of npu-assign-precision, `forge.runtime.precision.program_fp16_weights`)
    prices precision=mixed as the executor will run it; without it, mixed is priced by
    the pass's fallback rule."""
    model = model or CostModel.current()
    wanted = list(dict.fromkeys(configs if configs is not None else grid(full)))
    if not wanted:
        raise ForgeError("autotune needs at least one configuration")
    for c in wanted:
        _validate(c)
    everything = list(dict.fromkeys([*wanted, DEFAULT]))
    structures = list(dict.fromkeys(c.structure for c in everything))
    # the sweep allocates many small objects and frees none until the end
    with collector_paused():
        start, cpu_start = time.perf_counter(), time.process_time()
        unfused = analyze(module, num_inputs)
        if num_inputs is None:
            num_inputs = infer_num_inputs(entry_function(module))
        search = _Search(make_context(), nhwc_possible=_wants_nhwc(module))
        built = search.explore(module if consume else clone_module(module), structures, num_inputs)
        assigned: dict[tuple[float, str, int], Structure] = {}
        scored = {}
        for c in everything:
            structure = built[c.structure]
            if c.precision == "mixed" and mixed is not None:
                if c.structure not in assigned:
                    assigned[c.structure] = structure.assigned(mixed)
                structure = assigned[c.structure]
            f = structure.at(c.precision)
            scored[c] = Trial(c, f, model.score(f))
        seconds = time.perf_counter() - start
        cpu_seconds = time.process_time() - cpu_start
    trials = [scored[c] for c in wanted]
    best = min(trials, key=_rank_key(trials))
    if best.config.precision == "mixed" and mixed is not None:
        unfused = unfused.assigned(mixed)
    return AutotuneReport(
        trials,
        scored[DEFAULT],
        best,
        unfused.at(best.config.precision),
        seconds,
        cpu_seconds,
        search.stats,
        model,
    )


def _validate(c: Config) -> None:
    if not 0.0 <= c.alpha <= 1.0:
        raise ForgeError(f"alpha must lie in [0, 1], got {c.alpha}")
    if c.layout not in LAYOUTS:
        raise ForgeError(f"layout must be one of {', '.join(LAYOUTS)}, got '{c.layout}'")
    check_precision(c.precision)
    if c.iterations < 1:
        raise ForgeError(f"iterations must be at least 1, got {c.iterations}")


# ------------------------------------------------------------- measured latency


@dataclass(frozen=True)
class ConfigLatency:
    """One configuration compiled through the executor and timed."""

    config: Config
    compile_seconds: float
    """`compile_model`, capture to a ready executor."""
    times: tuple[float, ...]
    """Seconds per timed call, in order (after one untimed warm-up call)."""

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def fastest(self) -> float:
        return min(self.times)


@dataclass
class _Case:
    """A configuration's ready executor and the inputs it runs on."""

    config: Config
    call: Callable[[], object]
    compile_seconds: float

    def time_once(self) -> float:
        start = time.perf_counter()
        self.call()
        return time.perf_counter() - start


def _compile_case(loaded: Loaded, config: Config) -> _Case:
    """`compile_model` at the configuration's precision, with its alpha, layout and
    iterations for forge-pipeline (`compile_model`'s `pipeline`): the executor `forge
    compile` builds."""
    from forge.runtime.compile import compile_model

    _validate(config)
    if any(p.is_meta for p in loaded.model.parameters()):
        raise ForgeError(f"{loaded.name}: built on the meta device (too large here); no latency")
    start = time.perf_counter()
    pipeline = {"alpha": config.alpha, "layout": config.layout, "iterations": config.iterations}
    executor, _ = compile_model(
        loaded.model, loaded.args, loaded.kwargs, precision=config.precision, pipeline=pipeline
    )
    seconds = time.perf_counter() - start
    inputs = ordered_inputs(loaded.model, loaded.args, loaded.kwargs, executor.input_names)
    return _Case(config, lambda: executor(*inputs), seconds)


def measure_config(
    model_name: str, tiny: bool, seq: int, config: Config, runs: int, **loading: bool
) -> ConfigLatency:
    """Load `model_name` (seeded weights, `seq` tokens), compile it at `config` and time
    `runs` calls after one warm-up. Arguments and result are plain picklable data, so
    each configuration can be measured in a process or on a machine of its own.
    `loading` are `load_model`'s flags (allow_pickle, trust_remote_code)."""
    if runs < 1:
        raise ForgeError(f"runs must be at least 1, got {runs}")
    case = _compile_case(load_model(model_name, tiny, seq, **loading), config)
    case.call()
    times = tuple(case.time_once() for _ in range(runs))
    return ConfigLatency(config, case.compile_seconds, times)


@dataclass(frozen=True)
class LatencyCase:
    """One campaign case of `--latency`: a configuration measured on a machine of its
    own (plain data, so a Ray worker can run it)."""

    model_name: str
    tiny: bool
    seq: int
    config: Config
    runs: int
    loading: tuple[tuple[str, bool], ...] = ()


def latency_case(case: LatencyCase) -> ConfigLatency | str:
    """`measure_config` for a case; an error is returned as its one line, not raised."""
    try:
        return measure_config(
            case.model_name, case.tiny, case.seq, case.config, case.runs, **dict(case.loading)
        )
    except Exception as e:
        return f"{case.config.format()}: {type(e).__name__}: {one_line(str(e))}"


def measure_on(campaign: Campaign) -> Callable[..., list[ConfigLatency]]:
    """A `latency_check` measure that sends each configuration to `latency_case` on the
    campaign, one per node at a time (timing must not share a machine)."""

    def measure(
        model_name: str, tiny: bool, seq: int, configs: Sequence[Config], runs: int, **loading: bool
    ) -> list[ConfigLatency]:
        cases = [
            LatencyCase(model_name, tiny, seq, c, runs, tuple(sorted(loading.items())))
            for c in configs
        ]
        results = list(campaign.map(latency_case, cases, lambda c, why: why, exclusive=True))
        errors = [r for r in results if isinstance(r, str)]
        if errors:
            raise ForgeError(f"--latency: {len(errors)} configuration(s) failed; {errors[0]}")
        return [r for r in results if not isinstance(r, str)]

    return measure


def measure_interleaved(
    model_name: str, tiny: bool, seq: int, configs: Sequence[Config], runs: int, **loading: bool
) -> list[ConfigLatency]:
    """`measure_config` for several configurations in this process, interleaved: all are
    compiled first, then each of `runs` rounds times one call of every configuration
    (the starting one rotating), so that drift on a busy machine hits them alike."""
    if runs < 1:
        raise ForgeError(f"runs must be at least 1, got {runs}")
    loaded = load_model(model_name, tiny, seq, **loading)
    cases = [_compile_case(loaded, c) for c in configs]
    for case in cases:
        case.call()
    times: list[list[float]] = [[] for _ in cases]
    for round_ in range(runs):
        for k in range(len(cases)):
            i = (round_ + k) % len(cases)
            times[i].append(cases[i].time_once())
    return [
        ConfigLatency(c.config, c.compile_seconds, tuple(t))
        for c, t in zip(cases, times, strict=True)
    ]


@dataclass(frozen=True)
class LatencyRow:
    predicted: int | None
    """Rank by cost-model score in the sweep (1: the pick); None for a default that was
    not among the swept configurations."""
    measured: int
    """Rank by median measured latency among the measured configurations."""
    trial: Trial
    latency: ConfigLatency


def latency_check(
    report: AutotuneReport,
    model_name: str,
    tiny: bool,
    seq: int,
    top: int,
    runs: int,
    measure: Callable[..., list[ConfigLatency]] = measure_interleaved,
    **loading: bool,
) -> list[LatencyRow]:
    """Measure the `top` best-scored configurations and the default; rows in predicted
    order, each with its measured rank (by median latency). `measure(model_name, tiny,
    seq, configs, runs, **loading)` does the timing: `measure_interleaved` here, or one
    that sends each configuration to `measure_config` elsewhere."""
    if top < 1:
        raise ForgeError(f"--latency needs at least 1 configuration, got {top}")
    ranked = report.ranked()
    chosen = ranked[:top]
    if all(t.config != DEFAULT for t in chosen):
        chosen.append(report.default)
    position = {t.config: i for i, t in enumerate(ranked, 1)}
    latencies = measure(model_name, tiny, seq, [t.config for t in chosen], runs, **loading)
    order = sorted(range(len(chosen)), key=lambda i: latencies[i].median)
    measured = {i: rank for rank, i in enumerate(order, 1)}
    rows = zip(chosen, latencies, strict=True)
    return [
        LatencyRow(position.get(t.config), measured[i], t, lat) for i, (t, lat) in enumerate(rows)
    ]


def format_latency(rows: Sequence[LatencyRow], runs: int) -> str:
    """The predicted-vs-measured table and a one-line verdict on the cost model's pick."""
    lines = [
        f"{'pred':>4}{'meas':>5}  {'configuration':<54}{'score':>10}"
        f"{'median ms':>11}{'fastest ms':>12}{'compile s':>11}"
    ]
    for r in rows:
        name = r.trial.config.format() + (" (default)" if r.trial.config == DEFAULT else "")
        predicted = "-" if r.predicted is None else str(r.predicted)
        lines.append(
            f"{predicted:>4}{r.measured:>5}  {name:<54}{r.trial.score:>10.2f}"
            f"{r.latency.median * 1e3:>11.2f}{r.latency.fastest * 1e3:>12.2f}"
            f"{r.latency.compile_seconds:>11.2f}"
        )
    pick = rows[0]  # the best-scored: rows are in predicted order
    best = min(rows, key=lambda r: r.measured)
    if pick is best:
        verdict = "the cost model's pick is also the fastest measured"
    else:
        gap = pick.latency.median / best.latency.median - 1.0
        verdict = (
            f"the cost model's pick is measured rank {pick.measured} of {len(rows)}: "
            f"{best.trial.config.format()} is {gap * 100:.1f}% faster (median)"
        )
    lines.append(f"{verdict} ({runs} interleaved rounds)")
    return "\n".join(lines)
