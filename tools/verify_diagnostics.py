"""MLIR's `--verify-diagnostics`: the input names, in comments, every diagnostic it expects.

    %0 = npu.neg %x {device = "gpu"} : tensor<4xf32>  // expected-error {{device must be}}
    // expected-error@+1 {{op result has shape 3x3}}
    // expected-error-re@below {{shapes {{[0-9x]+}}, 4 do not broadcast}}
    // expected-error@unknown {{pass failed}}

A line is `expected-(error|warning|remark|note)`, an optional `-re`, an optional
designator (`@+N`, `@-N`, `@above`, `@below`, `@unknown`; none means this line) and the
message in `{{...}}`: a substring of the diagnostic or, with `-re`, literal text whose
own `{{...}}` parts are regular expressions. Each diagnostic must match an annotation on
its line (columns are not compared) and each annotation must be matched; otherwise the
mismatches are reported in MLIR's words. These are the rules of MLIR's
SourceMgrDiagnosticVerifierHandler, kept pure here (text in, messages out) so that they
are tested without running the tool.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

SEVERITIES = ("error", "warning", "remark", "note")

# MLIR's pattern, with its LLVM-regex braces escaped for Python's `re`.
ANNOTATION = re.compile(
    r"expected-(error|note|remark|warning)(-re)? *"
    r"(@([+-][0-9]+|above|below|unknown))? *\{\{(.*)\}\}$"
)


ELSEWHERE = -1
"""The line of a diagnostic located in another file: no annotation matches it (MLIR
reports it as unexpected)."""


@dataclass(frozen=True)
class Diagnostic:
    """One diagnostic the tool emitted: its line in the verified file, None when its
    location is unknown (only `@unknown` matches it), or ELSEWHERE."""

    line: int | None
    severity: str
    message: str
    location: str | None = None
    """As printed (`file:line:col`), to point at it in a mismatch message."""

    @classmethod
    def at(cls, location: str | None, severity: str, message: str, file: str) -> Diagnostic:
        """The diagnostic at `location` (`file:line:col` as Forge prints it, a bare file
        name, or None), checked against the annotations of `file`."""
        if not location or location == file:  # no line to annotate: `@unknown`
            return cls(None, severity, message, location)
        parts = location.rsplit(":", 2)
        in_file = len(parts) == 3 and parts[0] == file
        if not (in_file and parts[1].isdigit() and parts[2].isdigit()):
            return cls(ELSEWHERE, severity, message, location)
        return cls(int(parts[1]), severity, message, location)

    def where(self, file: str) -> str:
        return self.location or file


@dataclass
class Expected:
    """One `expected-*` annotation; `line` is None for `@unknown`."""

    line: int | None
    severity: str
    text: str
    where: str
    """`file:line:col` of the annotation itself, where a mismatch is reported."""
    regex: re.Pattern[str] | None = None
    matched: bool = field(default=False, compare=False)

    def accepts(self, message: str) -> bool:
        if self.regex is not None:
            return self.regex.search(message) is not None
        return self.text in message


@dataclass
class Annotations:
    """The annotations of one input, and the ones that could not be read."""

    expected: list[Expected] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def literal_and_regex(text: str) -> str:
    """An `expected-*-re` message as one Python regex: literal text, and each `{{...}}`
    a group of regex syntax. Raises ValueError on an unterminated or invalid block."""
    parts: list[str] = []
    rest = text
    while "{{" in rest:
        literal, rest = rest.split("{{", 1)
        if "}}" not in rest:
            raise ValueError("found start of regex with no end '}}'")
        block, rest = rest.split("}}", 1)
        try:
            re.compile(block)
        except re.error as e:
            raise ValueError(f"invalid regex: {e}") from e
        parts += [re.escape(literal), f"({block})"]
    return "".join(parts) + re.escape(rest)


def parse_annotations(text: str, file: str, first_line: int = 1) -> Annotations:
    """The annotations in `text`, whose first line is line `first_line` of `file` (a
    chunk of --split-input-file keeps the line numbers of the whole file)."""
    found = Annotations()
    below: list[Expected] = []  # `@below` waits for the next line without an annotation
    last_plain: int | None = None  # `@above` refers to the last line without one
    lines = text.split("\n")
    for number, line in enumerate(lines, first_line):
        match = ANNOTATION.search(line.rstrip())
        if match is None:
            for expected in below:
                expected.line = number
            below.clear()
            last_plain = number
            continue
        severity, is_regex, _, designator, message = match.groups()
        where = f"{file}:{number}:{match.start() + 1}"
        expected = Expected(number, severity, message, where)
        if is_regex:
            try:
                expected.regex = re.compile(literal_and_regex(message))
            except ValueError as e:
                found.errors.append(f"{where}: error: {e}")
                continue
        if designator == "unknown":
            expected.line = None
        elif designator == "above":
            expected.line = last_plain if last_plain is not None else first_line - 1
        elif designator == "below":
            expected.line = first_line + len(lines)  # never matched if nothing follows
            below.append(expected)
        elif designator is not None:
            expected.line = number + int(designator)
        found.expected.append(expected)
    return found


def verify(annotations: Annotations, emitted: Sequence[Diagnostic], file: str) -> list[str]:
    """The mismatches between what was expected and what was emitted, one MLIR-worded
    `file:line:col: error: ...` line each; empty when everything matched.

    A diagnostic whose text matches an annotation of another severity is a near miss,
    reported at the annotation."""
    problems = list(annotations.errors)
    for diagnostic in emitted:
        candidates = [
            e
            for e in annotations.expected
            if e.line == diagnostic.line and e.accepts(diagnostic.message)
        ]
        # An annotation not yet matched first, so that N identical annotations expect N
        # identical diagnostics; a matched one still absorbs repeats, as in MLIR.
        exact = sorted(
            (e for e in candidates if e.severity == diagnostic.severity),
            key=lambda e: e.matched,
        )
        if exact:
            exact[0].matched = True
        elif candidates:
            near = candidates[0]
            problems.append(
                f"{near.where}: error: '{diagnostic.severity}' diagnostic emitted when "
                f"expecting a '{near.severity}'"
            )
        else:
            problems.append(
                f"{diagnostic.where(file)}: error: unexpected {diagnostic.severity}: "
                f"{diagnostic.message}"
            )
    for expected in annotations.expected:
        if not expected.matched:
            problems.append(
                f'{expected.where}: error: expected {expected.severity} "{expected.text}" '
                "was not produced"
            )
    return problems
