"""Element types and precisions, defined once for every layer above the dialect.

`DTYPES`/`TORCH_DTYPES` translate between torch dtypes and the builtin element types
the `npu` dialect uses (the importer, constant folding and the CPU kernels share them);
`PRECISIONS` are the executor's weight precisions, which `npu-assign-precision`
writes into the IR and everything downstream reads back.
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

# Defined without torch, for the CLI's start-up; the names every layer imports are these.
from forge.dialects.precisions import PRECISIONS, QUANTIZED_PRECISIONS, WEIGHT_PRECISIONS

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

__all__ = [
    "DTYPES",
    "PRECISIONS",
    "QUANTIZED_PRECISIONS",
    "TORCH_DTYPES",
    "WEIGHT_PRECISIONS",
]
