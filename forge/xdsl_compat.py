"""Fixes to the pinned xDSL (0.75.0) that Forge applies when it is imported.

* The MLIR lexer matches string literals with `"(?:[^"\\...]+|\\...)*"`, a nested
  quantifier that backtracks exponentially on an unterminated literal: `forge fuzz-ir`
  found a one-line mutant (`npu.generic "aten.rand_like.de(%x) ...`) on which
  forge-opt never finished. The same pattern with possessive quantifiers (Python 3.11)
  matches the same strings and fails in linear time, so the parser reports the
  unterminated literal as usual.
"""

from __future__ import annotations

import re

STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"')


def apply() -> None:
    from xdsl.utils.mlir_lexer import MLIRLexer

    MLIRLexer._unescaped_characters_regex = STRING_LITERAL
