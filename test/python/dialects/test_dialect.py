"""Python-level checks of the npu dialect: opcodes are real ATen ops, builders work."""

from __future__ import annotations

import pytest
import torch
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    f32,
    i64,
)
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException

from forge.dialects import npu

FUSED = {npu.FusedLinearOp, npu.RunStartOp, npu.CachedAttentionOp}


def aten_overload(opcode: str) -> object:
    namespace, name, overload = opcode.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


@pytest.mark.parametrize("op", npu.NAMED_OPS, ids=lambda op: op.name)
def test_opcode_is_a_real_aten_op(op: type[npu.NpuOp]) -> None:
    if op in FUSED:
        assert op.ATEN == "" and op.name.startswith("npu.")
        return
    assert aten_overload(op.ATEN) is not None


def test_every_op_is_registered() -> None:
    registered = {op.name for op in npu.NPU.operations}
    assert {op.name for op in npu.NAMED_OPS} | {"npu.generic"} == registered


def test_unary_builder_and_placement_attributes() -> None:
    block = Block(arg_types=[TensorType(f32, [2, 3])])
    op = npu.TanhOp(block.args[0])
    assert op.result.type == block.args[0].type
    assert op.opcode == "aten.tanh.default"
    op.attributes["device"] = StringAttr("npu")
    op.attributes["vreg"] = IntegerAttr(3, i64)
    op.verify()
    op.attributes["device"] = StringAttr("gpu")
    with pytest.raises(VerifyException, match="device must be one of npu, cpu, got 'gpu'"):
        op.verify()


def test_generic_op_carries_its_opcode() -> None:
    block = Block(arg_types=[TensorType(f32, [4])])
    op = npu.GenericOp(
        "aten.cumsum.default",
        [block.args[0]],
        [npu.OperandRefAttr(0), IntegerAttr(0, i64)],
        [TensorType(f32, [4])],
    )
    op.verify()
    assert op.opcode == "aten.cumsum.default"
    assert aten_overload(op.opcode) is torch.ops.aten.cumsum.default


def test_constant_builder_infers_type() -> None:
    value = DenseIntOrFPElementsAttr.from_list(TensorType(f32, [2]), [1.0, 2.0])
    op = npu.ConstantOp(value)
    op.verify()
    assert op.result.type == TensorType(f32, [2])
