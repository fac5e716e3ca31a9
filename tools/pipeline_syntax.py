"""MLIR's textual pass pipelines for forge-opt: `builtin.module(func.func(cse),npu-dce)`.

xDSL parses flat lists (`cse,dce{...}`); MLIR nests passes under the op they run on.
This parses the nesting (anchors) itself and hands each `name{options}` to xDSL's spec
parser, so options keep xDSL's syntax, with error columns into the whole string.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, parse_spec
from xdsl.utils.exceptions import ArgSpecParseError

from forge.transforms.pattern_pass import PassRecord

MODULE = "builtin.module"
FUNCTION = "func.func"
ANCHORS = (MODULE, FUNCTION)

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_OPTION_END = re.compile(r'"(?:\\.|[^"\\])*"|\}')
_BARE_PATH = re.compile(r'(?<==)([^\s{}",=]*/[^\s{}",=]*)')
"""An unquoted option value with a '/': a path, which xDSL's spec syntax needs quoted."""


def _quote_paths(text: str) -> str:
    """`file=dir/x.mlir` as `file="dir/x.mlir"` (xDSL's spec lexer stops at '/')."""
    return _BARE_PATH.sub(r'"\1"', text)


class PipelineSyntaxError(Exception):
    """A malformed pipeline string, with the 1-based column of the problem."""

    def __init__(self, message: str, column: int):
        super().__init__(f"{message} (column {column})")


@dataclass(frozen=True)
class NestedSpec:
    """One pass of a pipeline: its spec and the op it runs on (a module or each function)."""

    spec: ArgSpec
    anchor: str
    column: int
    """1-based, of the pass name in the pipeline string (for option errors)."""


class _Scanner:
    """Recursive descent over `pipeline ::= element (',' element)*`, where `element ::=
    anchor '(' pipeline? ')' | pass-name options?`."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, message: str, pos: int | None = None) -> PipelineSyntaxError:
        return PipelineSyntaxError(message, (self.pos if pos is None else pos) + 1)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_spaces(self) -> None:
        while self.peek().isspace():
            self.pos += 1

    def parse(self) -> list[NestedSpec]:
        specs = self.parse_list(None)
        self.skip_spaces()
        if self.peek() == ")":
            raise self.error("unbalanced ')'")
        if self.peek():
            raise self.error(f"expected ',' or the end of the pipeline, got '{self.peek()}'")
        return specs

    def parse_list(self, anchor: str | None) -> list[NestedSpec]:
        specs: list[NestedSpec] = []
        self.skip_spaces()
        if self.peek() in ("", ")"):
            return specs  # an empty pipeline, or an empty nest: `func.func()`
        while True:
            specs.extend(self.parse_element(anchor))
            self.skip_spaces()
            if self.peek() != ",":
                return specs
            self.pos += 1
            self.skip_spaces()
            if self.peek() in ("", ")", ","):
                raise self.error("expected a pass name after ','")

    def parse_element(self, anchor: str | None) -> list[NestedSpec]:
        start = self.pos
        match = _NAME.match(self.text, self.pos)
        if match is None:
            raise self.error(f"expected a pass name, got '{self.peek()}'")
        name = match.group()
        self.pos = match.end()
        if self.peek() == "(":
            return self.parse_nest(name, anchor, start)
        if name in ANCHORS:
            raise self.error(f"'{name}' anchors a nested pipeline: write {name}(pass,...)", start)
        if "." in name:
            raise self.error(f"'{name}' is no pass name (op anchors take a '(')", start)
        return [NestedSpec(self.parse_pass(name, start), anchor or MODULE, start + 1)]

    def parse_nest(self, name: str, anchor: str | None, start: int) -> list[NestedSpec]:
        if name not in ANCHORS:
            raise self.error(
                f"unknown anchor '{name}': forge-opt nests passes under builtin.module(...) "
                "and func.func(...)",
                start,
            )
        if name == MODULE and anchor is not None:
            raise self.error("builtin.module(...) anchors only the whole pipeline", start)
        if name == FUNCTION and anchor == FUNCTION:
            raise self.error("func.func(...) cannot nest inside func.func(...)", start)
        self.pos += 1
        specs = self.parse_list(name)
        self.skip_spaces()
        if self.peek() == "":
            raise self.error(f"'{name}(' at column {start + 1} is never closed")
        if self.peek() != ")":
            raise self.error(f"expected ',' or ')' in {name}(...), got '{self.peek()}'")
        self.pos += 1
        return specs

    def parse_pass(self, name: str, start: int) -> ArgSpec:
        """`name{options}`, the options parsed by xDSL (errors moved to our columns)."""
        end = self.pos
        if self.peek() == "{":
            end = len(self.text)  # unclosed: xDSL names the problem
            for m in _OPTION_END.finditer(self.text, self.pos + 1):
                if m.group() == "}":
                    end = m.end()
                    break
        self.pos = end
        try:
            return parse_spec(_quote_paths(self.text[start:end]))
        except ArgSpecParseError as e:
            message, column = xdsl_spec_error(e)
            raise PipelineSyntaxError(message, start + column) from e


def xdsl_spec_error(e: ArgSpecParseError) -> tuple[str, int]:
    """The message and 1-based column of xDSL's multi-line spec error."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    column = lines[1].rsplit(":", 1)[-1] if len(lines) > 1 else "1"
    return lines[-1], int(column) if column.isdigit() else 1


def parse_nested_pipeline(text: str) -> list[NestedSpec]:
    """The passes of `text` in order, each with its anchor; flat lists are module passes."""
    return _Scanner(text).parse()


def format_nested(items: Sequence[tuple[str, str]]) -> str:
    """`builtin.module(a,func.func(b,c),d)` from (pass text, anchor) pairs; adjacent
    function passes share one `func.func(...)`, as MLIR merges sibling nests."""
    parts: list[str] = []
    nest: list[str] = []
    for text, anchor in items:
        if anchor == FUNCTION:
            nest.append(text)
            continue
        if nest:
            parts.append(f"func.func({','.join(nest)})")
            nest = []
        parts.append(text)
    if nest:
        parts.append(f"func.func({','.join(nest)})")
    return f"builtin.module({','.join(parts)})"


def functions_of(module: ModuleOp) -> list[func.FuncOp]:
    """The `func.func` ops directly in `module`: what a `func.func(...)` nest runs on."""
    return [op for op in module.body.block.ops if isinstance(op, func.FuncOp)]


@contextmanager
def isolated(function: func.FuncOp) -> Iterator[ModuleOp]:
    """`function` alone in a temporary module (a ModulePass sees only it), put back in
    its place afterwards, with whatever else the pass left in that module."""
    block = function.parent_block()
    if block is None:
        raise ValueError(f"function @{function.sym_name.data} is not in a module")
    after = function.next_op
    function.detach()
    scratch = ModuleOp([function])
    try:
        yield scratch
    finally:
        for op in list(scratch.body.block.ops):
            op.detach()
            if after is None:
                block.add_op(op)
            else:
                block.insert_op_before(op, after)


def merge_runs(records: Sequence[PassRecord], runs: int) -> list[PassRecord]:
    """One pass's statistics over `runs` functions as if it ran once on the module: the
    runs' rows summed position by position (rows of composite passes included), or the
    rows unchanged when the runs recorded different rows."""
    if runs <= 1 or len(records) % runs:
        return list(records)
    width = len(records) // runs
    chunks = [records[i * width : (i + 1) * width] for i in range(runs)]
    if any([r.name for r in c] != [r.name for r in chunks[0]] for c in chunks):
        return list(records)
    return [
        PassRecord(
            rows[0].name,
            sum(r.rewrites for r in rows),
            sum(r.ops_before for r in rows),
            sum(r.ops_after for r in rows),
            sum(r.seconds for r in rows),
            {k: sum(r.pattern_hits.get(k, 0) for r in rows) for k in rows[0].pattern_hits},
        )
        for rows in zip(*chunks, strict=True)
    ]


DRIVER_OPTIONS = ("max_iterations", "max_rewrites")
"""Every pattern pass's rewrite limits: printed only when set (-1: the driver's)."""


def pass_text(p: ModulePass) -> str:
    """`p` as a pipeline element, every option with its value; the rewrite limits only
    where set, as every pattern pass has them."""
    spec = p.pipeline_pass_spec(include_default=True)
    parameters = {
        name: values
        for name, values in spec.parameters.items()
        if not (name in DRIVER_OPTIONS and list(values) == [-1])
    }
    return str(ArgSpec(spec.name, parameters))
