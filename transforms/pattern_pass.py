"""What every Forge pass shares: rewrite counting, timing and per-pass statistics.

A pass built from RewritePatterns subclasses `NpuPatternPass` and lists its patterns;
the driver counts how many rewrites it made, times it, and records a `PassRecord`
into every active `collect_statistics()` scope (forge-opt's `--pass-statistics`,
`npu-optimize`'s report, benchmarks). Inside `trace_patterns()` every successful
pattern application is also printed, one line each (forge-opt's `--trace-patterns`).
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar, TextIO, TypeVar

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriterListener,
    RewritePattern,
)
from xdsl.traits import MemoryEffect, NoMemoryEffect, is_side_effect_free
from xdsl.utils.arg_spec import ArgSpec

from forge.transforms.rewrite_driver import (
    CountingApplier,
    DispatchingWalker,
    OpWorklist,
    PatternObserver,
    PatternTrace,
    ProbeRewriter,
    RewriteFound,
    RewriteLimits,
)

DEFAULT_LIMITS = RewriteLimits()
"""Every limit at -1: the defaults."""

__all__ = ["OpWorklist", "PatternTrace", "RewriteLimits"]

R = TypeVar("R")


@dataclass
class PassRecord:
    name: str
    rewrites: int
    ops_before: int
    ops_after: int
    seconds: float
    pattern_hits: dict[str, int] = field(default_factory=dict)
    """Successful applications per pattern class, every pattern listed (a pattern pass
    run inside `collect_statistics()` or `trace_patterns()`; empty otherwise)."""


@dataclass(frozen=True)
class PassReport:
    """What one run of a pass found (an analysis result, a placement, an allocation):
    how a pass hands its report to whoever ran it, whatever the driver."""

    name: str
    report: Any


_COLLECTORS: ContextVar[tuple[list[PassRecord], ...]] = ContextVar("collectors", default=())
_REPORTS: ContextVar[tuple[list[PassReport], ...]] = ContextVar("reports", default=())
_TRACES: ContextVar[tuple[PatternTrace, ...]] = ContextVar("traces", default=())
_LIMITS: ContextVar[RewriteLimits] = ContextVar("limits", default=DEFAULT_LIMITS)
_HITS_WANTED: ContextVar[int] = ContextVar("hits_wanted", default=0)
"""Active `collect_statistics()` scopes that want pattern hits."""


@contextmanager
def _collecting(scopes: ContextVar[tuple[list[R], ...]]) -> Iterator[list[R]]:
    """A list that receives what is recorded into `scopes` inside the block (nests)."""
    items: list[R] = []
    token = scopes.set((*scopes.get(), items))
    try:
        yield items
    finally:
        scopes.reset(token)


@contextmanager
def collect_statistics(pattern_hits: bool = True) -> Iterator[list[PassRecord]]:
    """Collect the records of every pass run inside the `with` block (nests).

    `pattern_hits=False`: rewrites, op counts and times only, unless an enclosing scope
    wants the hits. Counting hits observes every op a pattern is offered, which made a
    third of a pass run's time where the caller reads only the totals (the autotuner,
    `forge compile`'s plan report)."""
    token = _HITS_WANTED.set(_HITS_WANTED.get() + pattern_hits)
    try:
        with _collecting(_COLLECTORS) as records:
            yield records
    finally:
        _HITS_WANTED.reset(token)


def collect_reports() -> AbstractContextManager[list[PassReport]]:
    """Collect the reports every pass run inside the `with` block publishes (nests)."""
    return _collecting(_REPORTS)


@contextmanager
def trace_patterns(
    names: Iterable[str] | None = (), stream: TextIO | None = None
) -> Iterator[None]:
    """Print one line per successful pattern application inside the `with` block (any
    driver, nested pipelines included): pass, pattern class, the op it matched and where,
    the ops it created and erased. `names` keeps only those passes or pattern classes;
    None traces nothing (a driver passes its flag through)."""
    if names is None:
        yield
        return
    token = _TRACES.set((*_TRACES.get(), PatternTrace(frozenset(names), stream)))
    try:
        yield
    finally:
        _TRACES.reset(token)


def publish(name: str, report: Any) -> None:
    for reports in _REPORTS.get():
        reports.append(PassReport(name, report))


def format_statistics(records: Sequence[PassRecord]) -> str:
    """A table of the records, one row per pass run, and a total; then each pattern
    pass's patterns with their hits, summed over the pass's runs."""
    lines = [f"{'pass':<24}{'rewrites':>9}{'ops before':>12}{'ops after':>11}{'ms':>10}"]
    for r in records:
        lines.append(
            f"{r.name:<24}{r.rewrites:>9}{r.ops_before:>12}{r.ops_after:>11}"
            f"{r.seconds * 1e3:>10.2f}"
        )
    if records:
        first, last = records[0], records[-1]
        total = sum(r.seconds for r in records) * 1e3
        rewrites = sum(r.rewrites for r in records)
        lines.append(
            f"{'total':<24}{rewrites:>9}{first.ops_before:>12}{last.ops_after:>11}{total:>10.2f}"
        )
    return "\n".join(lines + pattern_hit_lines(records))


def pattern_hit_lines(records: Sequence[PassRecord]) -> list[str]:
    """`pattern hits` rows, per pass (in first-run order) and pattern (in the pass's
    order), zeros included: a pattern that never fires shows as such."""
    hits: dict[str, dict[str, int]] = {}
    for r in records:
        if not r.pattern_hits:
            continue
        row = hits.setdefault(r.name, {})
        for pattern, count in r.pattern_hits.items():
            row[pattern] = row.get(pattern, 0) + count
    if not hits:
        return []
    lines = [f"{'pass':<24}{'pattern':<40}{'hits':>6}"]
    for pass_name, row in hits.items():
        lines += [f"{pass_name:<24}{pattern:<40}{n:>6}" for pattern, n in row.items()]
    return lines


def record(entry: PassRecord) -> None:
    for records in _COLLECTORS.get():
        records.append(entry)


def count_ops(module: Operation) -> int:
    """Import-level op count: ops inside function bodies, not counting `func.return`.

    Plain loops over the blocks' op lists rather than `walk()` generators or block
    iterators: every pass run counts twice, and the autotuner runs dozens of passes."""
    count = 0
    stack = [module]
    while stack:
        op = stack.pop()
        if isinstance(op, func.FuncOp):
            count += _count_nested(op)
        for region in op.regions:
            for block in region.blocks:
                child = block.first_op
                while child is not None:
                    if child.regions:
                        stack.append(child)
                    child = child.next_op
    return count


_NOT_RETURN: dict[type[Operation], bool] = {}
"""Op class -> not a `func.return` (isinstance on an op class is slow; ABC machinery)."""


def _count_nested(op: Operation) -> int:
    """Ops nested in `op`'s regions at any depth, `func.return` excluded."""
    count = 0
    for region in op.regions:
        for block in region.blocks:
            child = block.first_op
            while child is not None:
                cls = type(child)
                counts = _NOT_RETURN.get(cls)
                if counts is None:
                    counts = _NOT_RETURN[cls] = not issubclass(cls, func.ReturnOp)
                count += counts
                if child.regions:
                    count += _count_nested(child)
                child = child.next_op
    return count


_EFFECT_FREE_CLASSES: dict[type[Operation], bool] = {}
"""Op class -> its effect traits are all plain `NoMemoryEffect` (e.g. `Pure`)."""


def side_effect_free(op: Operation) -> bool:
    """xDSL's `is_side_effect_free(op)`, decided once per op class where the class alone
    decides it (its effect traits say "no effect" whatever the op): DCE, CSE, folding and
    scheduling ask it of every op, several times per pass run."""
    cls = type(op)
    pure = _EFFECT_FREE_CLASSES.get(cls)
    if pure is None:
        traits = op.get_traits_of_type(MemoryEffect)
        pure = bool(traits) and all(
            type(t).get_effects.__func__ is NoMemoryEffect.get_effects.__func__ for t in traits
        )
        _EFFECT_FREE_CLASSES[cls] = pure
    return pure or is_side_effect_free(op)


def functions_of(module: Operation) -> list[func.FuncOp]:
    """The functions nested in `module`, in `walk()` order; only ops with regions are
    descended into (not every op of every body, as `walk()` would)."""
    found: list[func.FuncOp] = []

    def visit(op: Operation) -> None:
        if isinstance(op, func.FuncOp):
            found.append(op)
        for region in op.regions:
            for block in region.blocks:
                child = block.first_op
                while child is not None:
                    if child.regions:
                        visit(child)
                    child = child.next_op

    visit(module)
    return found


def run_on_functions(
    name: str,
    module: ModuleOp,
    transform: Callable[[func.FuncOp], R],
    count: Callable[[R], int] = int,
) -> int:
    """Apply `transform` to every function with a body and publish each result as the
    pass's report; record the summed `count(result)` (what the pass reports as
    rewrites) with the op counts and time, like `run_patterns`."""
    before = count_ops(module)
    start = time.perf_counter()
    functions = [f for f in functions_of(module) if f.body.blocks]
    results = [transform(f) for f in functions]
    total = sum(count(r) for r in results)
    record(PassRecord(name, total, before, count_ops(module), time.perf_counter() - start))
    for result in results:
        publish(name, result)
    return total


def run_patterns(
    name: str,
    patterns: Sequence[RewritePattern],
    module: ModuleOp,
    walk_reverse: bool = False,
    limits: RewriteLimits = DEFAULT_LIMITS,
) -> int:
    """Drive `patterns` to a fixed point over `module`, within `limits` (the -1 fields
    from the enclosing `rewrite_limits()` scope); record and return the rewrites.

    Patterns are observed (hits per pattern, traces) only when someone collects hits or
    traces: the autotuner runs many passes and needs neither."""
    before = count_ops(module)
    start = time.perf_counter()
    observed = _HITS_WANTED.get() or _TRACES.get()
    observer = PatternObserver(name, _TRACES.get()) if observed else None
    counting = CountingApplier(patterns, observer, name)
    listener = PatternRewriterListener() if observer is None else observer.listener()
    walker = DispatchingWalker(counting, walk_reverse, listener, limits=limits.over(_LIMITS.get()))
    walker.rewrite_module(module)
    seconds = time.perf_counter() - start
    hits = {} if observer is None else observer.hits
    # No rewrite, no change: patterns change the IR only through the rewriter.
    after = count_ops(module) if counting.rewrites else before
    record(PassRecord(name, counting.rewrites, before, after, seconds, hits))
    return counting.rewrites


@contextmanager
def rewrite_limits(limits: RewriteLimits) -> Iterator[None]:
    """Inside the block, pattern passes whose own options leave a limit at -1 take
    `limits`' (a driver's `--max-iterations`/`--max-rewrites`)."""
    token = _LIMITS.set(limits.over(_LIMITS.get()))
    try:
        yield
    finally:
        _LIMITS.reset(token)


def float_options(spec: ArgSpec, *names: str) -> ArgSpec:
    """`alpha=0`/`alpha=1` parse as ints in xDSL's spec syntax, and `1e-6` as a string;
    make them floats so that a float option accepts them."""

    def as_float(value: object) -> object:
        if type(value) is int:
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return value
        return value

    parameters = {
        key: [as_float(v) if key in names else v for v in values]
        for key, values in spec.normalize_parameter_names().parameters.items()
    }
    return ArgSpec(spec.name, parameters)


@dataclass(frozen=True)
class NpuPatternPass(ModulePass, abc.ABC):
    """A pass made of RewritePatterns, applied greedily to a fixed point."""

    WALK_REVERSE: ClassVar[bool] = False

    max_iterations: int = field(default=-1, kw_only=True)
    """Sweeps that may each rewrite before the pass fails as not converging (-1: the
    driver's `--max-iterations`, else 10, as MLIR's greedy driver)."""
    max_rewrites: int = field(default=-1, kw_only=True)
    """Rewrites one run may make (-1: the driver's `--max-rewrites`, else 16 per op
    plus 1,024)."""

    @abc.abstractmethod
    def patterns(self) -> Sequence[RewritePattern]: ...

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        limits = RewriteLimits(self.max_iterations, self.max_rewrites)
        run_patterns(self.name, self.patterns(), op, self.WALK_REVERSE, limits)

    def would_rewrite(self, module: ModuleOp) -> bool:
        """Whether `apply` would change `module`, found without changing it: the
        patterns' first sweep, stopped at the first rewrite (for the autotuner, which
        then copies a module only when a pass will change it)."""
        applier = CountingApplier(self.patterns())
        walker = DispatchingWalker(applier, walk_reverse=self.WALK_REVERSE)
        walker.rewriter_class = ProbeRewriter
        try:
            walker.rewrite_module(module)
        except RewriteFound:
            return True
        return False
