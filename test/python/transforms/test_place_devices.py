"""npu-place-devices: the capability table decides, and it is extensible from Python."""

from __future__ import annotations

import pytest
from conftest import load_tiny

from forge.dialects import npu
from forge.dialects.context import entry_function, parse_module
from forge.frontend.models import SPECS
from forge.target.capabilities import Capability, register_lowering, unregister_lowering
from forge.transforms.npu_optimize import optimize
from forge.transforms.npu_place_devices import place

CUMSUM = """
func.func @f(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = npu.generic "aten.cumsum.default"(%x, 1 : i64) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %0 : tensor<2x4xf32>
}
"""


def lower_cumsum(b: object, op: npu.GenericOp) -> object:
    raise AssertionError("placement never lowers")


def devices(module) -> list[str]:
    return [
        op.device.data for op in entry_function(module).body.block.ops if isinstance(op, npu.NpuOp)
    ]


def test_registering_a_lowering_moves_a_generic_op_to_the_npu() -> None:
    module = parse_module(CUMSUM)
    place(entry_function(module))
    assert devices(module) == ["cpu"]
    register_lowering("aten.cumsum.default", Capability(max_rank=4))(lower_cumsum)
    try:
        place(entry_function(module))
        assert devices(module) == ["npu"]
    finally:
        unregister_lowering("aten.cumsum.default")
    place(entry_function(module))
    assert devices(module) == ["cpu"]


def test_capability_conditions_are_checked() -> None:
    register_lowering("aten.cumsum.default", Capability(max_rank=1))(lower_cumsum)
    try:
        module = parse_module(CUMSUM)
        placement = place(entry_function(module))
        assert devices(module) == ["cpu"]
        assert "aten.cumsum.default: rank 2 outside [0, 1]" in placement.cpu_reasons
    finally:
        unregister_lowering("aten.cumsum.default")


@pytest.mark.parametrize("name", list(SPECS))
def test_models_put_their_compute_on_the_npu(name: str) -> None:
    module = load_tiny(name).fresh_module()
    optimize(module)
    placement = place(entry_function(module))
    ops = list(entry_function(module).body.block.ops)
    compute = [op for op in ops if isinstance(op, npu.SDPAOp | npu.FusedLinearOp | npu.LinearOp)]
    assert compute and all(op.device.data == "npu" for op in compute)
    assert placement.npu_ops > 5 * placement.cpu_ops
