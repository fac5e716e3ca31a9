"""forge-opt's IR printing: MLIR's `--mlir-print-ir-*` dumps and elided constants.

Dumps go to stderr, or one file each under `--print-ir-tree-dir`; every dump starts
with MLIR's header (`// -----// IR Dump After npu-cse //----- //`), so tools that
split MLIR dumps read ours.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from io import StringIO
from itertools import pairwise

from xdsl.dialects import func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, DenseResourceAttr, ModuleOp
from xdsl.ir import Attribute, Operation
from xdsl.passes import ModulePass
from xdsl.printer import Printer

ELIDED = "__elided__"
ELIDED_MESSAGE = (
    "elided constant: the IR was printed with --elide-elementsattrs-if-larger and cannot "
    "be read back"
)


class ElidingPrinter(Printer):
    """Prints dense constants of more than `elide_larger` elements as MLIR's
    `dense_resource<__elided__> : tensor<...>` (`--mlir-elide-elementsattrs-if-larger`)."""

    def __init__(self, *args: object, elide_larger: int | None = None, **kwargs: object):
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.elide_larger = elide_larger

    def print_attribute(self, attribute: Attribute) -> None:
        if self.elide_larger is not None and _is_large(attribute, self.elide_larger):
            self.print_string(f"dense_resource<{ELIDED}> : ")
            self.print_attribute(attribute.get_type())
            return
        super().print_attribute(attribute)


def _is_large(attribute: Attribute, limit: int) -> bool:
    if not isinstance(attribute, DenseIntOrFPElementsAttr | DenseResourceAttr):
        return False
    count = 1
    for dim in attribute.get_type().get_shape():
        count *= max(dim, 0)
    return count > limit


def print_ir(
    op: Operation,
    *,
    elide_larger: int | None = None,
    generic: bool = False,
    debuginfo: bool = False,
) -> str:
    """`op` as MLIR text; with constants elided (text for reading, not for parsing
    back), long function signatures wrapped too."""
    out = StringIO()
    printer = ElidingPrinter(
        stream=out,
        print_generic_format=generic,
        print_debuginfo=debuginfo,
        elide_larger=elide_larger,
    )
    printer.print_op(op)
    text = out.getvalue()
    return text if elide_larger is None else wrap_signatures(text)


SIGNATURE_WIDTH = 200
_SIGNATURE = re.compile(r"^(\s*)func\.func (?:\w+ )?@[^(]*\(")
_OPEN, _CLOSE = "([{<", ")]}>"


def wrap_signatures(text: str, width: int = SIGNATURE_WIDTH) -> str:
    """Function headers longer than `width` with one argument per line (still valid
    MLIR): an imported model's signature lists every weight, thousands of characters."""
    return "\n".join(_wrap_signature(line, width) for line in text.split("\n"))


def _wrap_signature(line: str, width: int) -> str:
    match = _SIGNATURE.match(line)
    if len(line) <= width or match is None:
        return line
    indent, start = match.group(1), match.end()
    cuts: list[int] = []
    depth, i = 0, start
    while i < len(line):
        c = line[i]
        if c == '"':  # skip a string literal, escapes included
            i += 1
            while i < len(line) and line[i] != '"':
                i += 2 if line[i] == "\\" else 1
        elif line.startswith("->", i):
            i += 1
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE and depth == 0:
            break
        elif c in _CLOSE:
            depth -= 1
        elif c == "," and depth == 0:
            cuts.append(i)
        i += 1
    if i >= len(line):
        return line  # unbalanced: leave it as printed
    bounds = [start, *[c + 1 for c in cuts], i]
    args = [line[a:b].strip().rstrip(",") for a, b in pairwise(bounds)]
    inner = ",\n".join(f"{indent}    {a}" for a in args if a)
    return f"{line[:start]}\n{inner}\n{indent}{line[i:]}"


@dataclass(frozen=True)
class IRPrintOptions:
    """Which dumps to make (forge-opt's --print-ir-* flags)."""

    before: frozenset[str] = frozenset()
    after: frozenset[str] = frozenset()
    before_all: bool = False
    after_all: bool = False
    after_change: bool = False
    after_failure: bool = False
    module_scope: bool = False
    tree_dir: str | None = None
    elide_larger: int | None = None

    def wants_before(self, name: str) -> bool:
        return self.before_all or name in self.before

    def wants_after(self, name: str) -> bool:
        return self.after_all or self.after_change or name in self.after

    @property
    def keeps_text(self) -> bool:
        """Whether the IR text before a pass must be kept (to compare or to fall back on)."""
        return self.after_change or self.after_failure


def pass_names(text: str | None) -> frozenset[str]:
    """`--print-ir-before=a,b`: the pass names."""
    return frozenset(n.strip() for n in (text or "").split(",") if n.strip())


class IRDumper:
    """Makes the dumps of one forge-opt run; numbers them for --print-ir-tree-dir."""

    def __init__(self, options: IRPrintOptions, generic: bool = False):
        self.options = options
        self.generic = generic
        self.count = 0

    def text(self, op: Operation) -> str:
        return print_ir(op, elide_larger=self.options.elide_larger, generic=self.generic)

    def scope(self, op: Operation, module: ModuleOp) -> Operation:
        """What a dump of `op` prints: `op`, or the whole module under --print-ir-module-scope."""
        return module if self.options.module_scope else op

    def before(self, p: ModulePass, op: Operation, module: ModuleOp) -> str | None:
        """Dump before `p` if asked; return the text of `op` when it must be kept."""
        shown = self.scope(op, module)
        keep = self.options.keeps_text
        if not (keep or self.options.wants_before(p.name)):
            return None
        text = self.text(shown)
        if self.options.wants_before(p.name):
            self.emit("Before", p.name, op, text)
        return text if keep else None

    def after(self, p: ModulePass, op: Operation, module: ModuleOp, before: str | None) -> None:
        if not self.options.wants_after(p.name):
            return
        text = self.text(self.scope(op, module))
        explicit = self.options.after_all or p.name in self.options.after
        if not explicit and before is not None and text == before:
            return  # --print-ir-after-change: unchanged
        self.emit("After", p.name, op, text)

    def failed(self, p: ModulePass, op: Operation, module: ModuleOp, before: str | None) -> None:
        """--print-ir-after-failure: the IR as the failing pass left it, else as it was."""
        if not self.options.after_failure:
            return
        try:
            text = self.text(self.scope(op, module))
        except Exception:
            text = before if before is not None else "// (the IR could not be printed)\n"
        self.emit("After", p.name, op, text, suffix=" Failed")

    def emit(self, when: str, name: str, op: Operation, text: str, suffix: str = "") -> None:
        where = ""
        if isinstance(op, func.FuncOp) and not self.options.module_scope:
            where = f" ('func.func' operation: @{op.sym_name.data})"
        header = f"// -----// IR Dump {when} {name}{suffix}{where} //----- //"
        body = f"{header}\n{text.rstrip()}\n\n"
        self.count += 1
        if self.options.tree_dir is None:
            sys.stderr.write(body)
            return
        os.makedirs(self.options.tree_dir, exist_ok=True)
        slug = (when + suffix).lower().replace(" ", "_")
        function = f"_{op.sym_name.data}" if where else ""
        path = os.path.join(
            self.options.tree_dir, f"{self.count - 1:03d}_{name}_{slug}{function}.mlir"
        )
        with open(path, "w", encoding="utf-8") as f:
            f.write(body)
