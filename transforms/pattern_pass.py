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
from xdsl.ir import Block, Operation, Region
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriterListener,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.traits import MemoryEffect, NoMemoryEffect, is_side_effect_free
from xdsl.utils.arg_spec import ArgSpec
from xdsl.utils.worklist import Worklist

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


Matcher = Callable[[Operation, PatternRewriter], None]


def _dispatch_entry(pattern: RewritePattern) -> tuple[Any, Matcher]:
    """(the op types `pattern` can match, the function that matches them).

    A `match_and_rewrite` decorated with xDSL's `op_type_rewrite_pattern` starts with an
    isinstance test of its annotated op type; the types are read from that wrapper and the
    decorated function is returned, bound, so that the driver tests each op class once and
    calls the pattern body directly. Any other pattern may match any op (`Operation`)."""
    method = type(pattern).match_and_rewrite
    code = getattr(method, "__code__", None)
    cells = getattr(method, "__closure__", None)
    if (
        code is None
        or cells is None
        or method.__qualname__ != "op_type_rewrite_pattern.<locals>.impl"
    ):
        return Operation, pattern.match_and_rewrite
    captured = dict(zip(code.co_freevars, (c.cell_contents for c in cells), strict=True))
    return captured["expected_type"], captured["func"].__get__(pattern)


class CountingApplier(RewritePattern):
    """Applies the first matching pattern per op (in the listed order, as xDSL's
    `GreedyRewritePatternApplier` without DCE) and counts ops that were rewritten.

    Patterns are dispatched on the op's class: the patterns that can match a class are
    found once per pass run, so an op is offered only to those (a pattern pass has up to
    a dozen patterns and most match one op type). With an observer, each successful
    application is counted per pattern and traced."""

    def __init__(self, patterns: Sequence[RewritePattern], observer: PatternObserver | None = None):
        self.entries = [(p, *_dispatch_entry(p)) for p in patterns]
        self.by_class: dict[type[Operation], list[tuple[RewritePattern, Matcher]]] = {}
        self.observer = observer
        if observer is not None:
            for p in patterns:
                observer.hits[type(p).__name__] = 0
        self.rewrites = 0

    def matchers(self, cls: type[Operation]) -> list[tuple[RewritePattern, Matcher]]:
        found = [(p, match) for p, types, match in self.entries if issubclass(cls, types)]
        self.by_class[cls] = found
        return found

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        cls = type(op)
        matchers = self.by_class.get(cls)
        if matchers is None:
            matchers = self.matchers(cls)
        if not matchers:
            return
        observer = self.observer
        if observer is None:
            for _, match in matchers:
                match(op, rewriter)
                if rewriter.has_done_action:
                    self.rewrites += 1
                    return
            return
        op_name, location = op.name, op.location  # read now: the rewrite may erase `op`
        for pattern, match in matchers:
            observer.created.clear()
            observer.erased.clear()
            match(op, rewriter)
            if rewriter.has_done_action:
                self.rewrites += 1
                observer.applied(pattern, op_name, location_of(location))
                return


class MatchRewriter(PatternRewriter):
    """xDSL's `PatternRewriter` whose insertion point before the matched op is made
    only when a pattern asks for it: the driver offers every op of the module to the
    patterns and most make no rewrite, so building one per offered op was a tenth of
    a no-op pass run."""

    _insertion_point: InsertPoint | None = None

    @property
    def insertion_point(self) -> InsertPoint:
        if self._insertion_point is None:
            assert self._current_operation is not None
            self._insertion_point = InsertPoint.before(self._current_operation)
        return self._insertion_point

    @insertion_point.setter
    def insertion_point(self, point: InsertPoint) -> None:
        self._insertion_point = point

    def offer(self, op: Operation) -> None:
        """Reset for matching `op` (fields set directly: their setters validate)."""
        self.has_done_action = False
        self._current_operation = op
        self._insertion_point = None
        self._name_hint = None


class RewriteFound(Exception):
    """Raised by `ProbeRewriter` at a pattern's first change, before it is made."""


class ProbeRewriter(MatchRewriter):
    """A rewriter that changes nothing: the first call that would change the IR raises
    `RewriteFound` instead. Forge's patterns change IR only through the rewriter's
    insert, erase, replace and replace-uses calls (never `notify_op_modified` after
    changing an op themselves), so a probe leaves the module as it was, once the ops
    the pattern built for the call are dropped: an op is a user of its operands from
    the moment it is created, and `single_use` and friends would count them."""

    def insert(self, op: Any, *args: Any, **kwargs: Any) -> Any:
        _forget(op)
        raise RewriteFound

    def erase(self, *args: Any, **kwargs: Any) -> None:
        raise RewriteFound

    def replace(self, op: Any, new_ops: Any, *args: Any, **kwargs: Any) -> None:
        _forget(new_ops)
        raise RewriteFound

    def replace_all_uses_with(self, from_value: Any, to_value: Any, safe_erase: bool = True):
        if from_value is not to_value and (to_value is None or from_value.uses):
            _forget(to_value.owner if to_value is not None else ())
            raise RewriteFound

    def replace_uses_with_if(self, from_value: Any, to_value: Any, predicate: Any) -> None:
        if from_value is not to_value and any(predicate(use) for use in from_value.uses):
            _forget(to_value.owner)
            raise RewriteFound

    def notify_op_modified(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a pattern changed an op outside the rewriter: it cannot be probed")

    replace_value_with_new_type = insert_block_argument = erase_block_argument = erase
    inline_block = move_region_contents_to_new_regions = inline_region = erase


def _forget(ops: Any) -> None:
    """Drop the operand uses of the ops in `ops` (one op or a sequence) that are not in
    any block: built for a rewrite the probe stopped."""
    for op in [ops] if isinstance(ops, Operation) else ops:
        if isinstance(op, Operation) and op.parent is None:
            for nested in op.walk():
                nested.drop_all_references()


_REMOVED: Any = object()
"""An `OpWorklist` slot whose op was removed."""


class OpWorklist(Worklist[Operation]):
    """xDSL's worklist (a stack with O(1) removal) keyed by the ops' ids: an op's
    `__hash__` is a Python method, and the driver hashes every op it queues, pops or
    drops several times per pass run."""

    _ids: dict[int, int]

    def __init__(self) -> None:
        super().__init__()
        self._ids = {}

    def __bool__(self) -> bool:
        stack = self._stack
        while stack and stack[-1] is _REMOVED:
            stack.pop()
        return bool(stack)

    def push(self, item: Operation) -> None:
        key = id(item)
        if key not in self._ids:
            self._ids[key] = len(self._stack)
            self._stack.append(item)

    def pop(self) -> Operation:
        item = self.take()
        if item is None:
            raise IndexError("pop from empty worklist")
        return item

    def take(self) -> Operation | None:
        """The last op pushed and not removed, or None when there is none."""
        stack = self._stack
        while stack:
            item = stack.pop()
            if item is not _REMOVED:
                del self._ids[id(item)]
                return item  # type: ignore[return-value]
        return None

    def remove(self, item: Operation) -> None:
        index = self._ids.pop(id(item), None)
        if index is not None:
            self._stack[index] = _REMOVED

    def fill(self, ops: list[Operation]) -> None:
        """Queue distinct `ops` at once, the last one to pop first; the worklist must
        be empty (it is, whenever the driver sweeps the IR)."""
        assert not self._ids, "fill needs an empty worklist"
        self._stack = ops  # type: ignore[assignment]
        self._ids = {id(op): i for i, op in enumerate(ops)}


@dataclass(eq=False, repr=False)
class DispatchingWalker(PatternRewriteWalker):
    """xDSL's greedy walker whose sweeps over the IR queue only the ops some pattern of
    its `CountingApplier` can match: the others would be popped and offered to no
    pattern. Ops the rewrites touch are still queued by the walker's listener, as in
    xDSL, and the sweeps still repeat until one makes no rewrite."""

    pattern: CountingApplier
    rewriter_class: type[MatchRewriter] = MatchRewriter
    """`ProbeRewriter` to find whether the patterns would rewrite, changing nothing."""
    _worklist: OpWorklist = field(default_factory=OpWorklist, init=False)

    def _populate_worklist(self, op: Operation | Region | Block) -> None:
        # xDSL walks `op` with reverse=not walk_reverse (the worklist is a stack) and
        # region_first=not walk_regions_first; the same order without nested generators.
        reverse, region_first = not self.walk_reverse, not self.walk_regions_first
        by_class, matchers_of = self.pattern.by_class, self.pattern.matchers
        queued: list[Operation] = []
        push = queued.append

        def visit(op: Operation) -> None:
            if not region_first:
                visit_self(op)
            for region in reversed(op.regions) if reverse else op.regions:
                visit_region(region)
            if region_first:
                visit_self(op)

        def visit_self(op: Operation) -> None:
            cls = type(op)
            matchers = by_class.get(cls)
            if matchers is None:
                matchers = matchers_of(cls)
            if matchers:
                push(op)

        def visit_region(region: Region) -> None:
            for block in reversed(region.blocks) if reverse else region.blocks:
                visit_block(block)

        def visit_block(block: Block) -> None:
            child = block.last_op if reverse else block.first_op
            while child is not None:
                if child.regions:
                    visit(child)
                else:
                    visit_self(child)
                child = child.prev_op if reverse else child.next_op

        if isinstance(op, Operation):
            visit(op)
        elif isinstance(op, Region):
            visit_region(op)
        else:
            visit_block(op)
        self._worklist.fill(queued)

    def _process_worklist(self, listener: PatternRewriterListener) -> bool:
        # xDSL's loop, except that an op no pattern can match (one the listener queued)
        # is dropped before the rewriter is reset for it.
        # Without an observer the applier's loop is inlined: it runs once per queued op.
        worklist, applier = self._worklist, self.pattern
        by_class, matchers_of = applier.by_class, applier.matchers
        observed = applier.observer is not None
        rewriter: MatchRewriter | None = None
        changed = False
        while (op := worklist.take()) is not None:
            matchers = by_class.get(type(op))
            if matchers is None:
                matchers = matchers_of(type(op))
            if not matchers:
                continue
            if rewriter is None:
                rewriter = self.rewriter_class(op)
                rewriter.extend_from_listener(listener)
            rewriter.offer(op)
            try:
                if observed:
                    applier.match_and_rewrite(op, rewriter)
                else:
                    for _, match in matchers:
                        match(op, rewriter)
                        if rewriter.has_done_action:
                            applier.rewrites += 1
                            break
            except RewriteFound:
                raise
            except Exception as err:
                op.emit_error(f"Error while applying pattern: {err}", underlying_error=err)
            changed |= rewriter.has_done_action
        return changed


def run_patterns(
    name: str, patterns: Sequence[RewritePattern], module: ModuleOp, walk_reverse: bool = False
) -> int:
    """Drive `patterns` to a fixed point over `module`; record and return the rewrites.

    Patterns are observed (hits per pattern, traces) only when someone collects hits or
    traces: the autotuner runs many passes and needs neither."""
    before = count_ops(module)
    start = time.perf_counter()
    observed = _HITS_WANTED.get() or _TRACES.get()
    observer = PatternObserver(name, _TRACES.get()) if observed else None
    counting = CountingApplier(patterns, observer)
    listener = PatternRewriterListener() if observer is None else observer.listener()
    DispatchingWalker(counting, walk_reverse=walk_reverse, listener=listener).rewrite_module(module)
    seconds = time.perf_counter() - start
    hits = {} if observer is None else observer.hits
    # No rewrite, no change: patterns change the IR only through the rewriter.
    after = count_ops(module) if counting.rewrites else before
    record(PassRecord(name, counting.rewrites, before, after, seconds, hits))
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
