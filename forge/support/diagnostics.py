"""One-line diagnostics: `file:line:col: error: message`, as MLIR prints them."""

from __future__ import annotations

import sys

from xdsl.dialects.builtin import FileLineColLoc, UnknownLoc
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import ParseError


class ForgeError(Exception):
    """An error meant for the user: printed as one line, exit code 1."""

    def __init__(self, message: str, location: str | None = None):
        super().__init__(message)
        self.location = location

    def __str__(self) -> str:
        message = " ".join(super().__str__().split())
        prefix = f"{self.location}: " if self.location else ""
        return f"{prefix}error: {message}"


def one_line(text: str) -> str:
    """Collapse a message onto one line (xDSL messages often span several)."""
    return " ".join(str(text).split())


PARSE_MESSAGES = {
    "in block definition": "expected an operation, a block label (^bb...) or '}' here",
    "Could not parse entire input!": "unexpected text after the top-level operation "
    "(an extra '}'?)",
}
"""xDSL parse messages that say nothing where they stand alone -> what they mean."""


def parse_error(e: ParseError) -> ForgeError:
    message = one_line(e.msg)
    return ForgeError(PARSE_MESSAGES.get(message, message), str(e.span.get_location()))


def location_of(loc: Attribute) -> str | None:
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    if isinstance(loc, UnknownLoc):
        return None
    return None


def op_error(op: Operation, message: str) -> ForgeError:
    return ForgeError(f"'{op.name}' op {one_line(message)}", location_of(op.location))


def note(message: str, tool: str = "forge") -> None:
    """A one-line note on stderr: something the user should know that is no error."""
    print(f"{tool}: note: {one_line(message)}", file=sys.stderr, flush=True)


def report(error: ForgeError, tool: str) -> int:
    print(f"{tool}: {error}" if error.location is None else str(error), file=sys.stderr)
    return 1
