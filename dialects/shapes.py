"""Shape and element-type helpers shared by the `npu` verifiers.

Dimensions are xDSL shape entries: a non-negative int, or `DYNAMIC` for `?`.
Every helper treats a dynamic dimension as compatible with anything, so verifiers
only reject what is certainly wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    Attribute,
    IntegerType,
    TensorType,
)

DYNAMIC = DYNAMIC_INDEX
Shape = tuple[int, ...]


class ShapeError(ValueError):
    """A shape relation that cannot hold; its message is shown to the user."""


def fmt_shape(shape: Sequence[int]) -> str:
    return "x".join("?" if d == DYNAMIC else str(d) for d in shape) or "scalar"


def shape_of(value_type: Attribute) -> Shape:
    assert isinstance(value_type, TensorType)
    return tuple(value_type.get_shape())


def element_type(value_type: Attribute) -> Attribute:
    assert isinstance(value_type, TensorType)
    return value_type.get_element_type()


def is_float(element: Attribute) -> bool:
    return isinstance(element, AnyFloat)


def is_bool(element: Attribute) -> bool:
    return isinstance(element, IntegerType) and element.width.data == 1


def dims_equal(a: int, b: int) -> bool:
    return DYNAMIC in (a, b) or a == b


def shapes_equal(a: Sequence[int], b: Sequence[int]) -> bool:
    return len(a) == len(b) and all(dims_equal(x, y) for x, y in zip(a, b, strict=True))


def broadcast(*shapes: Sequence[int]) -> Shape:
    """NumPy/ATen broadcasting; raises ShapeError naming the clashing dimension."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for i in range(rank):
        dim = 1
        for shape in shapes:
            j = i - (rank - len(shape))
            if j < 0:
                continue
            d = shape[j]
            if d == 1:
                continue
            if dim == 1 or dim == DYNAMIC:
                dim = d
            elif d != DYNAMIC and d != dim:
                listed = ", ".join(fmt_shape(s) for s in shapes)
                raise ShapeError(f"shapes {listed} do not broadcast (dimension {i}: {dim} vs {d})")
        out.append(dim)
    return tuple(out)


def normalize_dim(dim: int, rank: int) -> int:
    """Map a possibly negative dimension index into [0, rank); ShapeError if out of range."""
    bound = max(rank, 1)  # ATen lets a scalar take dims -1 and 0
    if not -bound <= dim < bound:
        raise ShapeError(f"dimension {dim} is out of range for rank {rank}")
    return dim % bound if rank else 0


def numel(shape: Sequence[int]) -> int | None:
    """Element count, or None when a dimension is dynamic."""
    if any(d == DYNAMIC for d in shape):
        return None
    count = 1
    for d in shape:
        count *= d
    return count


def slice_length(size: int, start: int, end: int, step: int) -> int:
    """Length of `x[start:end:step]` along a dimension of `size` (ATen clamping rules)."""
    if size == DYNAMIC:
        return DYNAMIC
    return len(range(*slice(start, end, step).indices(size)))
