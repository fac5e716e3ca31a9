"""What a compiled program accepts, checked at every call: one definition for the CLI
(`forge generate`'s prompt) and every Python entry point (`forge.compile`,
`torch.compile(backend="forge")`, `compile_lm(...).generate`), all of which end in
`CompiledNPUExecutor.__call__`.

* each input has the shape and dtype it was compiled for;
* an input whose values index an embedding table (token ids, position ids) holds ids
  inside the table, as eager's `IndexError` demands: the compiled gather would read
  another row, or memory past the table.

A violation is a one-line `ForgeError` naming the input, the value and the bound."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from forge.dialects import npu
from forge.dialects.dtypes import TORCH_DTYPES
from forge.support.diagnostics import ForgeError

SAME_VALUES = (npu.ContiguousOp, npu.ReshapeLikeOp, npu.ExpandOp, npu.CastOp)
"""Ops whose result holds the operand's values (rearranged): ids stay ids through them."""


def check_token_ids(ids: Iterable[int] | torch.Tensor, vocab: int, what: str = "token id") -> None:
    """A `ForgeError` naming the first id outside [0, vocab)."""
    if isinstance(ids, torch.Tensor):
        outside = ids[(ids < 0) | (ids >= vocab)]
        bad = [int(outside.reshape(-1)[0])] if outside.numel() else []
    else:
        bad = [i for i in ids if not 0 <= i < vocab]
    if bad:
        raise ForgeError(f"{what} {bad[0]} is outside the vocabulary of {vocab}")


@dataclass(frozen=True)
class InputContract:
    """Per executor input: its name, compiled shape and dtype, and the number of rows of
    the embedding table its values index (None when they index none)."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype | None, ...]
    vocab: tuple[int | None, ...]

    def check(self, inputs: Sequence[torch.Tensor]) -> None:
        if len(inputs) != len(self.names):
            raise ForgeError(f"expected {len(self.names)} inputs, got {len(inputs)}")
        for name, value, shape, dtype, vocab in zip(
            self.names, inputs, self.shapes, self.dtypes, self.vocab, strict=True
        ):
            if not isinstance(value, torch.Tensor):
                raise ForgeError(f"{name}: expected a tensor, got {type(value).__name__}")
            if tuple(value.shape) != shape or (dtype is not None and value.dtype != dtype):
                compiled = "x".join(map(str, shape)) or "scalar"
                given = "x".join(map(str, value.shape)) or "scalar"
                raise ForgeError(
                    f"{name}: compiled for {compiled} {dtype}, got {given} {value.dtype}"
                )
            if vocab is not None:
                check_token_ids(value, vocab, f"{name}: id")


def input_contract(function: func.FuncOp, num_inputs: int) -> InputContract:
    args = function.body.block.args[:num_inputs]
    types = [a.type if isinstance(a.type, TensorType) else None for a in args]
    return InputContract(
        names=tuple(a.name_hint or f"input {i}" for i, a in enumerate(args)),
        shapes=tuple(tuple(t.get_shape()) if t else () for t in types),
        dtypes=tuple(TORCH_DTYPES.get(t.element_type) if t else None for t in types),
        vocab=tuple(_table_rows(a) for a in args),
    )


def _table_rows(value: SSAValue) -> int | None:
    """The fewest rows of any embedding table `value`'s values index (through
    reshapes, copies and casts), or None."""
    rows: list[int] = []
    pending, seen = [value], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for use in current.uses:
            op = use.operation
            if isinstance(op, npu.EmbeddingOp) and op.indices == current:
                table = op.weight.type
                if isinstance(table, TensorType):
                    rows.append(table.get_shape()[0])
            elif isinstance(op, SAME_VALUES):
                pending.extend(op.results)
    return min(rows) if rows else None
