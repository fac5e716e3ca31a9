"""The greedy rewrite driver under every Forge pattern pass: patterns dispatched on the
op's class, a worklist keyed by op ids, traces and per-pattern hits, a probe that finds
whether a pass would rewrite without changing anything, and the bounds that stop a set
of patterns that never converges (MLIR's `GreedyRewriteConfig`).

The walker owns its whole loop (sweeps and worklist), so a change in xDSL's
`PatternRewriteWalker` internals cannot change what it does; it subclasses xDSL's walker
only for its fields and listener plumbing.
"""

from __future__ import annotations

import sys
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO
from weakref import WeakKeyDictionary

from xdsl.dialects.builtin import ModuleOp, UnknownLoc
from xdsl.ir import Attribute, Operation, OpResult, Region, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriterListener,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.utils.worklist import Worklist

from forge.support.diagnostics import ForgeError, location_of, one_line

DEFAULT_ITERATIONS = 10
"""Sweeps that each rewrote something before a pattern pass gives up (MLIR's
`GreedyRewriteConfig::maxIterations`)."""
REWRITES_PER_OP = 16
REWRITES_FLOOR = 1024
"""Default rewrite bound of one pass run: 16 per op the first sweep offers to a
pattern, plus 1,024. Forge's passes rewrite an op a few times at most."""
TAIL = 12
"""Applications a non-convergence diagnostic quotes (the tail of the cycle)."""
CREATED_BY: WeakKeyDictionary[Operation, tuple[str, str]] = WeakKeyDictionary()
"""Op -> (pass, pattern) that created it, for diagnostics after a pass."""


class PatternFailed(ForgeError):
    """A pattern raised while it was applied: located where the pattern is written (a
    PDL pattern's `file:line:col`, a Python class's file and line), naming the pattern
    and the op it was applied to."""

    @classmethod
    def of(
        cls, pass_name: str, pattern: RewritePattern, op: Operation, error: Exception
    ) -> PatternFailed:
        at = location_of(op.location)
        applied_to = f"'{op.name}'" + (f" at {at}" if at else "")
        return cls(
            f"pattern {type(pattern).__name__} (pass '{pass_name}') failed on {applied_to}: "
            f"{type(error).__name__}: {one_line(str(error))}",
            defined_at(pattern),
        )


class NotConverged(ForgeError):
    """A pattern pass that hit its `RewriteLimits`: names the patterns of the last sweep
    and is located at the op of the last rewrite."""

    @classmethod
    def of(cls, applier: CountingApplier, spent: str) -> NotConverged:
        hits = ", ".join(f"{name} ({n})" for name, n in applier.sweep_hits.most_common(4))
        last = applier.recent[-1] if applier.recent else None
        error = cls(
            f"pass '{applier.pass_name}' did not converge: {spent}; the last "
            f"sweep's rewrites: {hits or 'none'}",
            last[2] if last else None,
        )
        if applier.observer is not None:
            tail = " -> ".join(
                f"{name} on {op} at {where or '?'}" for name, op, where in applier.recent
            )
            for trace in applier.observer.traces:
                trace.print(f"[{applier.pass_name}] did not converge; the last rewrites: {tail}")
        return error


def defined_at(pattern: RewritePattern) -> str | None:
    """Where `pattern` is written: its class's `defined_at` (a PDL pattern's
    `file:line:col`), else the file and line of its Python `match_and_rewrite`."""
    declared = getattr(type(pattern), "defined_at", None)
    if isinstance(declared, str):
        return declared
    _, match = _dispatch_entry(pattern)
    code = getattr(getattr(match, "__func__", match), "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else None


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
    application is counted per pattern and traced. Every application is also kept for
    a non-convergence diagnostic: the hits of the current sweep and the last few
    applications."""

    def __init__(
        self,
        patterns: Sequence[RewritePattern],
        observer: PatternObserver | None = None,
        pass_name: str = "",
    ):
        self.entries = [(p, *_dispatch_entry(p)) for p in patterns]
        self.by_class: dict[type[Operation], list[tuple[RewritePattern, Matcher]]] = {}
        self.observer = observer
        self.pass_name = pass_name
        if observer is not None:
            for p in patterns:
                observer.hits[type(p).__name__] = 0
        self.rewrites = 0
        self.sweep_hits: Counter[str] = Counter()
        self.recent: deque[tuple[str, str, str | None]] = deque(maxlen=TAIL)

    def matchers(self, cls: type[Operation]) -> list[tuple[RewritePattern, Matcher]]:
        found = [(p, match) for p, types, match in self.entries if issubclass(cls, types)]
        self.by_class[cls] = found
        return found

    def applied(self, pattern: RewritePattern, op_name: str, location: Attribute) -> None:
        """Count one successful application of `pattern` to an op named `op_name`."""
        self.rewrites += 1
        name = type(pattern).__name__
        self.sweep_hits[name] += 1
        where = location_of(location)
        self.recent.append((name, op_name, where))
        if self.observer is not None:
            self.observer.applied(pattern, op_name, where)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        cls = type(op)
        matchers = self.by_class.get(cls)
        if matchers is None:
            matchers = self.matchers(cls)
        op_name, location = op.name, op.location  # read now: the rewrite may erase `op`
        for pattern, match in matchers:
            if self.observer is not None:
                self.observer.created.clear()
                self.observer.erased.clear()
            if isinstance(rewriter, MatchRewriter):
                rewriter.pattern = pattern
            _guarded(self.pass_name, pattern, match, op, rewriter)
            if rewriter.has_done_action:
                self.applied(pattern, op_name, location)
                return


def _guarded(
    pass_name: str,
    pattern: RewritePattern,
    match: Matcher,
    op: Operation,
    rewriter: PatternRewriter,
) -> None:
    """`match(op, rewriter)`; an exception from the pattern becomes a `PatternFailed`
    naming the pattern, where it is written and the op it was applied to."""
    try:
        match(op, rewriter)
    except (RewriteFound, ForgeError):
        raise
    except Exception as err:
        raise PatternFailed.of(pass_name, pattern, op, err) from err


class MatchRewriter(PatternRewriter):
    """xDSL's `PatternRewriter` whose insertion point before the matched op is made
    only when a pattern asks for it: the driver offers every op of the module to the
    patterns and most make no rewrite, so building one per offered op was a tenth of
    a no-op pass run."""

    _insertion_point: InsertPoint | None = None
    pattern: RewritePattern | None = None
    """The pattern being applied (for `CREATED_BY`)."""
    pass_name: str = ""

    @property
    def insertion_point(self) -> InsertPoint:
        if self._insertion_point is None:
            assert self._current_operation is not None
            self._insertion_point = InsertPoint.before(self._current_operation)
        return self._insertion_point

    @insertion_point.setter
    def insertion_point(self, point: InsertPoint) -> None:
        self._insertion_point = point

    def handle_operation_insertion(self, op: Operation) -> None:
        """A created op (and the ops nested in it) without a location gets the matched
        op's, as MLIR's rewriters do, and is remembered as the pattern's work: a verifier
        error after the pass can then point into the input and name the pattern."""
        root = self._current_operation
        if root is not None and not isinstance(root.location, UnknownLoc):
            for created in op.walk():
                if isinstance(created.location, UnknownLoc):
                    created.location = root.location
        if self.pattern is not None:
            CREATED_BY[op] = (self.pass_name, type(self.pattern).__name__)
        super().handle_operation_insertion(op)

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
        self._stack = ops
        self._ids = {id(op): i for i, op in enumerate(ops)}


@dataclass(frozen=True)
class RewriteLimits:
    """When a pattern pass gives up (MLIR's `GreedyRewriteConfig`): after `iterations`
    sweeps over the IR that each rewrote something, or after `rewrites` applications in
    one run (a pair of patterns that undo each other never finishes a sweep). -1 takes
    the default: `DEFAULT_ITERATIONS` sweeps, and `REWRITES_PER_OP` per op the first
    sweep offers to a pattern plus `REWRITES_FLOOR`."""

    iterations: int = -1
    rewrites: int = -1

    def sweeps(self) -> int:
        return DEFAULT_ITERATIONS if self.iterations < 0 else self.iterations

    def rewrite_bound(self, offered: int) -> int:
        if self.rewrites >= 0:
            return self.rewrites
        return REWRITES_PER_OP * offered + REWRITES_FLOOR

    def over(self, defaults: RewriteLimits) -> RewriteLimits:
        """These limits, with `defaults`' where these say -1."""
        return RewriteLimits(
            self.iterations if self.iterations >= 0 else defaults.iterations,
            self.rewrites if self.rewrites >= 0 else defaults.rewrites,
        )


@dataclass(eq=False, repr=False)
class DispatchingWalker:
    """A greedy rewrite driver with xDSL's walk order and worklist semantics whose
    sweeps over the IR queue only the ops some pattern of its `CountingApplier` can
    match: the others would be popped and offered to no pattern. Ops the rewrites touch
    are queued by the walker's listener, and the sweeps repeat until one makes no
    rewrite, within `limits` (`NotConverged` past them)."""

    pattern: CountingApplier
    walk_reverse: bool = False
    listener: PatternRewriterListener = field(default_factory=PatternRewriterListener)
    limits: RewriteLimits = field(default_factory=RewriteLimits)
    rewriter_class: type[MatchRewriter] = MatchRewriter
    """`ProbeRewriter` to find whether the patterns would rewrite, changing nothing."""
    _worklist: OpWorklist = field(default_factory=OpWorklist, init=False)
    _max_rewrites: int = field(default=0, init=False)

    def rewrite_module(self, module: ModuleOp) -> bool:
        """Rewrite the ops nested in `module` to a fixed point; whether any changed."""
        listener = self._worklist_listener()
        changed_any = False
        for sweep in range(self.limits.sweeps()):
            self._populate_worklist(module.body)
            if sweep == 0:
                self._max_rewrites = self.limits.rewrite_bound(len(self._worklist._ids))
            self.pattern.sweep_hits.clear()
            if not self._process_worklist(listener):
                return changed_any
            changed_any = True
        sweeps = self.limits.sweeps()
        raise NotConverged.of(self.pattern, f"{sweeps} sweeps rewrote (max-iterations={sweeps})")

    def _worklist_listener(self) -> PatternRewriterListener:
        """The caller's listener, and the handlers that keep the worklist in step with
        the rewrites (as xDSL's walker does)."""
        own = self.listener
        return PatternRewriterListener(
            operation_insertion_handler=[*own.operation_insertion_handler, self._worklist.push],
            operation_removal_handler=[*own.operation_removal_handler, self._removed],
            operation_modification_handler=[
                *own.operation_modification_handler,
                self._worklist.push,
            ],
            operation_replacement_handler=[*own.operation_replacement_handler, self._replaced],
            block_creation_handler=own.block_creation_handler,
        )

    def _removed(self, op: Operation) -> None:
        for operand in op.operands:
            if isinstance(operand, OpResult):
                self._worklist.push(operand.op)
        for nested in op.walk() if op.regions else (op,):
            self._worklist.remove(nested)

    def _replaced(self, op: Operation, new_results: Sequence[SSAValue | None]) -> None:
        for result in op.results:
            for use in result.uses:
                self._worklist.push(use.operation)

    def _populate_worklist(self, region: Region) -> None:
        # xDSL's order: ops pushed in reverse (the worklist is a stack), an op before
        # its regions; one list instead of nested generators.
        reverse = not self.walk_reverse
        by_class, matchers_of = self.pattern.by_class, self.pattern.matchers
        queued: list[Operation] = []
        push = queued.append

        def visit_self(op: Operation) -> None:
            cls = type(op)
            matchers = by_class.get(cls)
            if matchers is None:
                matchers = matchers_of(cls)
            if matchers:
                push(op)

        def visit_region(region: Region) -> None:
            for block in reversed(region.blocks) if reverse else region.blocks:
                child = block.last_op if reverse else block.first_op
                while child is not None:
                    for nested in reversed(child.regions) if reverse else child.regions:
                        visit_region(nested)
                    visit_self(child)
                    child = child.prev_op if reverse else child.next_op

        visit_region(region)
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
                rewriter.pass_name = applier.pass_name
            rewriter.offer(op)
            if observed:
                applier.match_and_rewrite(op, rewriter)
            else:
                self._apply_first(matchers, op, rewriter)
            if rewriter.has_done_action:
                changed = True
                if applier.rewrites > self._max_rewrites:
                    bound = self._max_rewrites
                    raise NotConverged.of(applier, f"over {bound} rewrites (max-rewrites={bound})")
        return changed

    def _apply_first(
        self,
        matchers: list[tuple[RewritePattern, Matcher]],
        op: Operation,
        rewriter: MatchRewriter,
    ) -> None:
        """The applier's loop without an observer."""
        op_name, location = op.name, op.location  # read now: the rewrite may erase `op`
        pass_name = self.pattern.pass_name
        for pattern, match in matchers:
            rewriter.pattern = pattern
            _guarded(pass_name, pattern, match, op, rewriter)
            if rewriter.has_done_action:
                self.pattern.applied(pattern, op_name, location)
                return
