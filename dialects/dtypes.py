"""Element types and precisions, defined once for every layer above the dialect.

`DTYPES`/`TORCH_DTYPES` translate between torch dtypes and the builtin element types
the `npu` dialect uses (the importer, constant folding and the CPU kernels share them);
`PROGRAM_PRECISIONS` are the whole-program precisions, which `npu-assign-precision`
writes into the IR and everything downstream reads back; `check_precision` is the one
check of a precision's name.
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import (
    Attribute,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    i1,
    i64,
)

from forge.dialects.precisions import PROGRAM_PRECISIONS, QUANTIZED_PRECISIONS, WEIGHT_PRECISIONS

# Defined without torch, for the CLI's start-up; the names every layer imports are these.
from forge.support.diagnostics import ForgeError

DTYPES: dict[torch.dtype, Attribute] = {
    torch.float32: Float32Type(),
    torch.float16: Float16Type(),
    torch.bfloat16: BFloat16Type(),
    torch.float64: Float64Type(),
    torch.int64: i64,
    torch.int32: IntegerType(32),
    torch.int16: IntegerType(16),
    torch.int8: IntegerType(8),
    torch.uint8: IntegerType(8, Signedness.UNSIGNED),
    torch.bool: i1,
}
TORCH_DTYPES: dict[Attribute, torch.dtype] = {v: k for k, v in DTYPES.items()}


def check_precision(precision: str, error: type[Exception] = ForgeError) -> str:
    """`precision`, when it is one of `PROGRAM_PRECISIONS`: the one check of its name
    (`error`: ValueError for a pass's or a target's option, as xDSL reports those)."""
    if precision not in PROGRAM_PRECISIONS:
        raise error(f"precision must be one of {', '.join(PROGRAM_PRECISIONS)}, got '{precision}'")
    return precision


__all__ = [
    "DTYPES",
    "PROGRAM_PRECISIONS",
    "QUANTIZED_PRECISIONS",
    "TORCH_DTYPES",
    "WEIGHT_PRECISIONS",
    "check_precision",
]
