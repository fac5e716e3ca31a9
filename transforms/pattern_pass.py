"""What every Forge pass shares: rewrite counting, timing and per-pass statistics.

A pass built from RewritePatterns subclasses `NpuPatternPass` and lists its patterns;
the driver counts how many rewrites it made, times it, and records a `PassRecord`
into every active `collect_statistics()` scope (forge-opt's `--pass-statistics`,
`npu-optimize`'s report, benchmarks). Inside `trace_patterns()` every successful
pattern application is also printed, one line each (forge-opt's `--trace-patterns`).
"""

from __future__ import annotations

import abc
import sys
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
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriterListener,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.utils.arg_spec import ArgSpec

from forge.diagnostics import location_of

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


@dataclass(frozen=True)
class PatternTrace:
    """Where `trace_patterns()` prints, and which passes or patterns (by pass name or
    pattern class name; empty: all)."""

    names: frozenset[str]
    stream: TextIO | None = None
    """None: `sys.stderr` at the time of printing."""

    def wants(self, pass_name: str, pattern: RewritePattern) -> bool:
        return not self.names or bool({pass_name, type(pattern).__name__} & self.names)

    def print(self, line: str) -> None:
        print(line, file=self.stream or sys.stderr)


_COLLECTORS: ContextVar[tuple[list[PassRecord], ...]] = ContextVar("collectors", default=())
_REPORTS: ContextVar[tuple[list[PassReport], ...]] = ContextVar("reports", default=())
_TRACES: ContextVar[tuple[PatternTrace, ...]] = ContextVar("traces", default=())


@contextmanager
def _collecting(scopes: ContextVar[tuple[list[R], ...]]) -> Iterator[list[R]]:
    """A list that receives what is recorded into `scopes` inside the block (nests)."""
    items: list[R] = []
    token = scopes.set((*scopes.get(), items))
    try:
        yield items
    finally:
        scopes.reset(token)


def collect_statistics() -> AbstractContextManager[list[PassRecord]]:
    """Collect the records of every pass run inside the `with` block (nests)."""
    return _collecting(_COLLECTORS)


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

    Plain loops rather than `walk()` generators: every pass run counts twice, and the
    autotuner runs dozens of passes."""
    count = 0
    stack = [module]
    while stack:
        op = stack.pop()
        if isinstance(op, func.FuncOp):
            count += _count_nested(op)
        for region in op.regions:
            for block in region.blocks:
                stack.extend(child for child in block.ops if child.regions)
    return count


def _count_nested(op: Operation) -> int:
    """Ops nested in `op`'s regions at any depth, `func.return` excluded."""
    count = 0
    for region in op.regions:
        for block in region.blocks:
            for child in block.ops:
                count += not isinstance(child, func.ReturnOp)
                if child.regions:
                    count += _count_nested(child)
    return count


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
    functions = [f for f in module.walk() if isinstance(f, func.FuncOp) and f.body.blocks]
    results = [transform(f) for f in functions]
    total = sum(count(r) for r in results)
    record(PassRecord(name, total, before, count_ops(module), time.perf_counter() - start))
    for result in results:
        publish(name, result)
    return total


class PatternObserver:
    """Counts each pattern's successful applications in one pass run and, for the active
    traces, prints a line per application with the ops the rewriter created and erased
    (heard through the walker's listener)."""

    def __init__(self, pass_name: str, traces: Sequence[PatternTrace]):
        self.pass_name = pass_name
        self.traces = traces
        self.hits: dict[str, int] = {}
        self.created: list[Operation] = []
        self.erased: list[str] = []

    def listener(self) -> PatternRewriterListener:
        return PatternRewriterListener(
            operation_insertion_handler=[self.created.append],
            operation_removal_handler=[lambda op: self.erased.append(op.name)],
        )

    def observe(self, pattern: RewritePattern) -> RewritePattern:
        self.hits[type(pattern).__name__] = 0
        return ObservedPattern(pattern, self)

    def applied(self, pattern: RewritePattern, op_name: str, location: str | None) -> None:
        self.hits[type(pattern).__name__] += 1
        traces = [t for t in self.traces if t.wants(self.pass_name, pattern)]
        if not traces:
            return
        at = f" at {location}" if location else ""
        line = (
            f"[{self.pass_name}] {type(pattern).__name__} on {op_name}{at}: "
            f"created {_listed([op.name for op in self.created])}, "
            f"erased {_listed(self.erased)}"
        )
        for trace in traces:
            trace.print(line)


def _listed(names: Sequence[str]) -> str:
    return f"{len(names)} ({', '.join(names)})" if names else "0"


class ObservedPattern(RewritePattern):
    """`pattern`, reporting each application that changed the IR to its observer."""

    def __init__(self, pattern: RewritePattern, observer: PatternObserver):
        self.pattern = pattern
        self.observer = observer

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if rewriter.has_done_action:  # an earlier pattern acted; the applier stops anyway
            self.pattern.match_and_rewrite(op, rewriter)
            return
        op_name, location = op.name, op.location  # read now: the rewrite may erase `op`
        self.observer.created.clear()
        self.observer.erased.clear()
        self.pattern.match_and_rewrite(op, rewriter)
        if rewriter.has_done_action:
            self.observer.applied(self.pattern, op_name, location_of(location))


class CountingApplier(RewritePattern):
    """Applies the first matching pattern per op and counts ops that were rewritten."""

    def __init__(self, patterns: Sequence[RewritePattern]):
        self.applier = GreedyRewritePatternApplier(list(patterns), dce_enabled=False)
        self.rewrites = 0

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        self.applier.match_and_rewrite(op, rewriter)
        if rewriter.has_done_action:
            self.rewrites += 1


def run_patterns(
    name: str, patterns: Sequence[RewritePattern], module: ModuleOp, walk_reverse: bool = False
) -> int:
    """Drive `patterns` to a fixed point over `module`; record and return the rewrites.

    Patterns are observed (hits per pattern, traces) only when someone collects or traces:
    the autotuner runs many passes and needs neither."""
    before = count_ops(module)
    start = time.perf_counter()
    observer = PatternObserver(name, _TRACES.get()) if _COLLECTORS.get() or _TRACES.get() else None
    if observer is None:
        counting = CountingApplier(patterns)
        walker = PatternRewriteWalker(counting, walk_reverse=walk_reverse)
    else:
        counting = CountingApplier([observer.observe(p) for p in patterns])
        walker = PatternRewriteWalker(
            counting, walk_reverse=walk_reverse, listener=observer.listener()
        )
    walker.rewrite_module(module)
    seconds = time.perf_counter() - start
    hits = {} if observer is None else observer.hits
    record(PassRecord(name, counting.rewrites, before, count_ops(module), seconds, hits))
    return counting.rewrites


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

    @abc.abstractmethod
    def patterns(self) -> Sequence[RewritePattern]: ...

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_patterns(self.name, self.patterns(), op, self.WALK_REVERSE)
