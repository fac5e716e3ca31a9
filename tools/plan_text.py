"""How the plan printer writes values and names: Python literals of constants (packed
when large), one-line descriptions of ops, and the program's names of IR values."""

from __future__ import annotations

import base64
import keyword
import re
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import FileLineColLoc, IntegerAttr, StringAttr
from xdsl.ir import Operation, SSAValue

from forge.support.diagnostics import ForgeError
from forge.transforms.npu_schedule_affinity import body_ops

RESERVED = {
    "torch",
    "np",
    "run",
    "build",
    "GraphCall",
    "GraphInput",
    "PackedLinear",
    "strided_slice",
    "unpack_array",
    "weight_arrays",
    "compile_with_snippets",
    "NNFactory",
}
"""Module-level names of the printed program, which argument names must not shadow."""

GENERATED = re.compile(r"(v|t|p|w|seg|build_seg|const_|pack)\d+")

INLINE_ELEMENTS = 16
"""Constants up to this many elements are printed as literals; larger ones packed."""


# -------------------------------------------------------------------- literals


def _float(value: float) -> str:
    if value != value:
        return 'float("nan")'
    if value in (float("inf"), float("-inf")):
        return 'float("inf")' if value > 0 else '-float("inf")'
    return repr(value)


def _numpy_dtype(dtype: np.dtype) -> str:
    return "np.bool_" if dtype == np.bool_ else f"np.{dtype.name}"


def _pack(array: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(array).tobytes(), 9)).decode()


def _ndarray(array: np.ndarray) -> str:
    dtype = _numpy_dtype(array.dtype)
    flat = array.reshape(-1)
    if array.ndim > 0 and flat.size > 1 and bool((flat == flat[0]).all()):
        return f"np.full({list(array.shape)}, {literal(flat[0].item())}, dtype={dtype})"
    if flat.size <= INLINE_ELEMENTS:
        return f"np.array({literal(array.tolist())}, dtype={dtype})"
    return f"unpack_array({_pack(array)!r}, {dtype}, {list(array.shape)})"


def _tensor(tensor: torch.Tensor) -> str:
    dtype = str(tensor.dtype)
    flat = tensor.reshape(-1)
    if tensor.dim() > 0 and flat.numel() > 1 and bool((flat == flat[0]).all()):
        return f"torch.full({list(tensor.shape)}, {literal(flat[0].item())}, dtype={dtype})"
    if flat.numel() <= INLINE_ELEMENTS or tensor.dtype == torch.bfloat16:
        return f"torch.tensor({literal(tensor.tolist())}, dtype={dtype})"
    array = tensor.numpy()
    packed = f"unpack_array({_pack(array)!r}, {_numpy_dtype(array.dtype)}, {list(array.shape)})"
    return f"torch.from_numpy({packed})"


def literal(value: Any, name: Callable[[Any], str | None] = lambda _: None) -> str:
    """`value` as Python source; `name` names the graph nodes and tensors it knows."""
    known = name(value)
    if known is not None:
        return known
    match value:
        case None | bool() | str() | int():
            return repr(value)
        case float():
            return _float(value)
        case np.generic():
            return literal(value.item())
        case np.dtype():
            return _numpy_dtype(value)
        case type() if issubclass(value, np.generic):
            return _numpy_dtype(np.dtype(value))
        case torch.dtype() | torch.layout() | torch.memory_format():
            return str(value)
        case torch.device():
            return f"torch.device({str(value)!r})"
        case list():
            return f"[{', '.join(literal(v, name) for v in value)}]"
        case tuple():
            items = [literal(v, name) for v in value]
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        case np.ndarray():
            return _ndarray(value)
        case torch.Tensor():
            return _tensor(value)
    raise ForgeError(f"cannot print a {type(value).__name__} in the plan")


def tuple_text(items: Sequence[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


# ------------------------------------------------------------------- naming


def describe(op: Operation) -> str:
    """`%ctx = npu.sdpa @ line 22`: the op as a reader finds it in the source IR."""
    opcode = getattr(op, "opcode", None) if op.name == "npu.generic" else None
    opcode = opcode.data if isinstance(opcode, StringAttr) else opcode
    what = f'{op.name} "{opcode}"' if isinstance(opcode, str) else op.name
    location = op.location
    if isinstance(location, FileLineColLoc):
        what += f" @ line {location.line.data}"
    names = [f"%{r.name_hint}" for r in op.results if r.name_hint]
    return f"{', '.join(names)} = {what}" if names and len(names) == len(op.results) else what


class Names:
    """Python names of a function's values: arguments after their names (`c_attn.weight`
    -> `c_attn_weight`), op results after their `vreg` (`v12`), as the planned IR shows."""

    def __init__(self, function: func.FuncOp):
        self.of: dict[SSAValue, str] = {}
        taken = set(RESERVED)
        for i, arg in enumerate(function.body.block.args):
            self.of[arg] = self._identifier(arg.name_hint or f"arg{i}", taken)
        ops = body_ops(function.body.block)
        vregs = [op.attributes.get("vreg") for op in ops]
        free = 1 + max((v.value.data for v in vregs if isinstance(v, IntegerAttr)), default=-1)
        for op, vreg in zip(ops, vregs, strict=True):
            if isinstance(vreg, IntegerAttr):
                base = vreg.value.data
            else:
                base, free = free, free + len(op.results)
            for k, result in enumerate(op.results):
                name = f"v{base + k}"
                while name in taken:  # vregs are unique in planned IR; be safe anyway
                    name, free = f"v{free}", free + 1
                taken.add(name)
                self.of[result] = name

    @staticmethod
    def _identifier(hint: str, taken: set[str]) -> str:
        name = re.sub(r"\W", "_", hint)
        if not name or name[0].isdigit():
            name = f"a_{name}"
        while keyword.iskeyword(name) or name in taken or GENERATED.fullmatch(name):
            name += "_"
        taken.add(name)
        return name

    def __call__(self, values: Sequence[SSAValue]) -> list[str]:
        return [self.of[v] for v in values]
