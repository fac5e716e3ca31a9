"""Fixes to the pinned xDSL (0.75.0), applied by the two places Forge parses text
(`forge.dialects.context` and `forge-opt`) when they are imported; `import forge` stays free
of xDSL.

* The MLIR lexer matches string literals with `"(?:[^"\\...]+|\\...)*"`, a nested
  quantifier that backtracks exponentially on an unterminated literal: `forge fuzz-ir`
  found a one-line mutant (`npu.generic "aten.rand_like.de(%x) ...`) on which
  forge-opt never finished. The same pattern with possessive quantifiers (Python 3.11)
  matches the same strings and fails in linear time, so the parser reports the
  unterminated literal as usual.
* `TensorType` accepts dimensions of any size; MLIR's are int64_t, and a dimension of
  10^26 overflowed later (`-t python`). The verifier now rejects what does not fit.
* `IntegerType` accepts any bitwidth, and verifying a value of `i9999999999` builds
  2**9999999999 (fuzz-ir found that hang too). MLIR limits integer types to 16777215
  bits; the verifier now says so.
* A pass option of type `tuple[str, ...]` (npu-optimize's and forge-pipeline's `skip`)
  is documented to take `skip=a,b` as `("a", "b")`, but the option parser type-checks
  the list it read against the tuple type and rejects every value (`fuzz-ir --mutate
  pipeline` found it). A list given for a tuple option now becomes that tuple, the
  empty one included (`skip` with no value, as `--dump-pass-pipeline` prints it).
* xDSL stores a dense constant element by element, so a splat (`dense<1.0> :
  tensor<2x3x100000000xf32>`, a few bytes of text) is expanded while it is parsed:
  `fuzz-ir`'s large-dimension mutants ran out of memory before any pass. A dense literal
  of more than `MAX_DENSE_ELEMENTS` elements is now a parse error, so parsing stays
  bounded by the text (weights belong in function arguments, not in the text).
* Dense literals and arrays of integers wider than 64 bits (`array<i65: 2>`) raised
  NotImplementedError from `struct`; they are a parse error now.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"')


MAX_INTEGER_WIDTH = (1 << 24) - 1
"""MLIR's limit on integer bitwidths."""

MAX_DIMENSION = (1 << 63) - 1
"""Tensor dimensions are int64_t in MLIR; larger ones overflow every consumer."""


MAX_DENSE_ELEMENTS = 1 << 20
"""The most elements a dense literal may declare: a splat of this many f64 takes 8 MiB,
and the printer's splat test reads every element back as a Python object."""

_applied = False


def apply() -> None:
    """Idempotent: both parsing modules call it when imported."""
    global _applied
    if _applied:
        return
    _applied = True
    from xdsl.dialects.builtin import IntegerType
    from xdsl.utils.exceptions import VerifyException
    from xdsl.utils.mlir_lexer import MLIRLexer

    MLIRLexer._unescaped_characters_regex = STRING_LITERAL

    verify_width = IntegerType.verify

    def verify(self: IntegerType) -> None:
        if self.width.data > MAX_INTEGER_WIDTH:
            raise VerifyException(
                f"integer bitwidth is limited to {MAX_INTEGER_WIDTH} bits (got {self.width.data})"
            )
        verify_width(self)

    IntegerType.verify = verify

    from xdsl.dialects.builtin import DYNAMIC_INDEX, TensorType

    verify_tensor = TensorType.verify

    def verify_shape(self: TensorType) -> None:
        for dim in self.get_shape():
            if dim != DYNAMIC_INDEX and not 0 <= dim <= MAX_DIMENSION:
                raise VerifyException(
                    f"dimension {dim} does not fit in a signed 64-bit integer (MLIR's limit)"
                )
        verify_tensor(self)

    TensorType.verify = verify_shape

    from types import UnionType
    from typing import Union, get_args, get_origin

    from xdsl.utils import arg_spec

    convert = arg_spec._convert_arg_to_type

    def takes_tuple(dest_type: object) -> bool:
        if get_origin(dest_type) in (Union, UnionType):
            return any(takes_tuple(arg) for arg in get_args(dest_type))
        return get_origin(dest_type) is tuple

    def convert_tuples(value: list, dest_type: object) -> object:
        if isinstance(value, list) and takes_tuple(dest_type):
            value = tuple(value)
        return convert(value, dest_type)

    arg_spec._convert_arg_to_type = convert_tuples
    _bound_dense_literals()


def _bound_dense_literals() -> None:
    """Refuse a dense literal's type before xDSL expands the literal to its size."""
    import math

    from xdsl.parser.attribute_parser import AttrParser
    from xdsl.utils.lexer import Position

    def check_size(parser: AttrParser, type: Any, start: Position) -> None:
        count = math.prod(type.get_shape())
        if count > MAX_DENSE_ELEMENTS:
            parser.raise_error(
                f"dense literal of {count} elements: more than the {MAX_DENSE_ELEMENTS} "
                "an inline constant may hold (pass large tensors as function arguments)",
                start,
                max(start, parser.pos),
            )

    parse_type = AttrParser._parse_dense_literal_type
    parse_dense = AttrParser.parse_dense_int_or_fp_elements_attr

    def parse_bounded_type(self: AttrParser) -> Any:
        start = self.pos
        type = parse_type(self)
        check_size(self, type, start)
        return type

    def parse_bounded_dense(self: AttrParser, type: Any) -> Any:
        start = self.pos
        if type is not None:
            check_size(self, type, start)
        with packable(self, start):
            return parse_dense(self, type)

    parse_array = AttrParser._parse_builtin_densearray_attr

    def parse_packable_array(self: AttrParser) -> Any:
        with packable(self, self.pos):
            return parse_array(self)

    AttrParser._parse_dense_literal_type = parse_bounded_type
    AttrParser.parse_dense_int_or_fp_elements_attr = parse_bounded_dense
    AttrParser._parse_builtin_densearray_attr = parse_packable_array


@contextmanager
def packable(parser: Any, start: Any) -> Iterator[None]:
    """xDSL packs dense literals and arrays with `struct`, which has no integers wider
    than 64 bits: `array<i65: 2>` (fuzz-ir) raised NotImplementedError. A parse error."""
    try:
        yield
    except NotImplementedError as e:
        parser.raise_error(
            f"{str(e).rpartition(' for ')[2]} elements: dense literals and arrays hold "
            "integers of at most 64 bits",
            start,
            max(start, parser.pos),
        )
