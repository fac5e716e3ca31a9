"""One lowering table: what placement may put on the NPU is what conversion can lower.

Every row of `forge.target.capabilities.LOWERINGS` names a lowering of its op,
every lowering has a row, and an ATen op registered from Python (docs/executor.md)
runs inside an NNFactory graph instead of falling back to the CPU.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from conftest import load_tiny
from xdsl.ir import Operation

from forge.conversion import nnfactory_graph
from forge.conversion.nnfactory_graph import GraphBuilder, Node
from forge.dialects import npu
from forge.dialects.context import entry_function
from forge.frontend.models import SPECS
from forge.runtime.compile import compile_model
from forge.target import capabilities
from forge.target.capabilities import (
    LOWERINGS,
    Capability,
    Key,
    Lowering,
    register_lowering,
    unregister_lowering,
)
from forge.transforms.forge_pipeline import plan

CUMSUM = "aten.cumsum.default"
# npu.cache_update writes caller-owned state in place: a CPU kernel, never a graph.
CPU_ONLY = (npu.CompareOp, npu.WhereOp, npu.GenericOp, npu.CacheUpdateOp, npu.RunStartOp)
"""Op classes with no NNFactory node (comparisons and boolean logic, `where`) and
`npu.generic`, whose ATen opcodes get rows of their own."""


LOWERING_MODULES = (
    "forge.conversion.nnfactory_graph",
    "forge.conversion.attention",
    "forge.conversion.cached_attention",
)
"""Where the built-in rows' functions live."""


def _function(lowering: Lowering) -> typing.Callable[..., object]:
    return nnfactory_graph.resolve_lowering(lowering)


def _key_id(key: Key) -> str:
    return key if isinstance(key, str) else key.name


# ----------------------------------------------------------------- the table


@pytest.mark.parametrize("key", list(LOWERINGS), ids=_key_id)
def test_every_row_names_a_lowering_of_its_op(key: Key) -> None:
    lowering = LOWERINGS[key]
    assert isinstance(lowering.capability, Capability)
    function = _function(lowering)
    assert inspect.isfunction(function) and function.__module__ in LOWERING_MODULES
    accepts = typing.get_type_hints(function)["op"]
    assert isinstance(key, type) and issubclass(key, accepts), (
        f"{key.name}'s row names {function.__name__}, which lowers {accepts.__name__}"
    )


def test_every_lowering_has_a_row() -> None:
    functions = {
        f
        for module in map(importlib.import_module, LOWERING_MODULES)
        for name, f in vars(module).items()
        if name.startswith("lower_") and inspect.isfunction(f) and f.__module__ == module.__name__
    }
    named = {_function(lowering) for lowering in LOWERINGS.values()}
    assert functions == named


def test_ops_without_a_row_are_the_cpu_only_ones() -> None:
    """A new `npu` op runs on the NPU only once it has a lowering; until then it must
    be listed here as a CPU op, deliberately."""
    missing = [op for op in npu.NPU.operations if op not in LOWERINGS]
    assert missing and all(issubclass(op, CPU_ONLY) for op in missing), [
        op.name for op in missing if not issubclass(op, CPU_ONLY)
    ]


@pytest.mark.parametrize("name", list(SPECS))
def test_every_op_placed_on_the_npu_has_its_lowering(name: str) -> None:
    module = load_tiny(name).fresh_module()
    plan(module)
    placed = [
        op
        for op in entry_function(module).body.block.ops
        if isinstance(op, npu.NpuOp) and op.device is not None and op.device.data == "npu"
    ]
    assert placed
    for op in placed:
        assert nnfactory_graph._lowering_for(op) is not None, op.name


# ------------------------------------------------------------- extension API


def test_a_capability_cannot_be_registered_without_its_lowering() -> None:
    assert not hasattr(capabilities, "register_capability")
    register_lowering(CUMSUM, Capability())  # a decorator nothing was given to
    assert CUMSUM not in LOWERINGS
    with pytest.raises(TypeError, match="needs its lowering"):
        register_lowering(CUMSUM, Capability())(None)  # type: ignore[arg-type]
    assert CUMSUM not in LOWERINGS


def test_keys_are_op_classes_or_aten_opcodes() -> None:
    with pytest.raises(ValueError, match="by its class"):
        register_lowering("npu.matmul", Capability())
    with pytest.raises(TypeError, match="npu op class or an ATen opcode"):
        register_lowering(npu.GenericOp, Capability())
    with pytest.raises(TypeError, match="must be a Capability"):
        register_lowering(CUMSUM, lambda op: None)  # type: ignore[arg-type]


def test_a_row_is_not_replaced_silently() -> None:
    before = LOWERINGS[npu.MatmulOp]
    with pytest.raises(ValueError, match="already has a lowering"):
        register_lowering(npu.MatmulOp, Capability())(lambda b, op: None)
    assert LOWERINGS[npu.MatmulOp] is before


# ------------------------------------------ an ATen op lowered from user code


def over_the_last_dim(op: Operation) -> str | None:
    assert isinstance(op, npu.GenericOp)
    dim = op.args.data[1].value.data  # type: ignore[attr-defined]
    rank = len(op.inputs[0].type.get_shape())  # type: ignore[attr-defined]
    return None if dim in (-1, rank - 1) else "cumsum over a dim other than the last"


def lower_cumsum(b: GraphBuilder, op: npu.GenericOp) -> Node:
    """NNFactory 1.4 has no CumSum node: x @ U with U[i, j] = 1 where i <= j."""
    n = op.inputs[0].type.get_shape()[-1]  # type: ignore[attr-defined]
    ones = b.constant(np.triu(np.ones((n, n))))
    return b.factory.matmul(b.node(op.inputs[0]), ones, False, False)


@pytest.fixture
def cumsum_on_the_npu() -> Iterator[None]:
    register_lowering(CUMSUM, Capability(check=over_the_last_dim))(lower_cumsum)
    try:
        yield
    finally:
        unregister_lowering(CUMSUM)


class RunningTotal(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(torch.relu(x), dim=self.dim) * 0.5


@pytest.mark.usefixtures("cumsum_on_the_npu")
def test_a_registered_aten_op_runs_inside_an_nnfactory_graph() -> None:
    model, x = RunningTotal(dim=-1), torch.randn(2, 3, 16)
    executor, report = compile_model(model, (x,))
    assert report.plan.placement.cpu_ops == 0
    assert executor.fallback_ops == 0 and report.fallback_ops == 0
    assert not executor.notes
    [segment] = executor.segments
    cumsums = [op for op in segment.ops if isinstance(op, npu.GenericOp)]
    assert [(op.opcode, op.device.data) for op in cumsums] == [(CUMSUM, "npu")]
    for _ in range(2):
        torch.testing.assert_close(executor(x)[0], model(x), rtol=0, atol=1e-5)
        x = torch.randn(2, 3, 16)


@pytest.mark.usefixtures("cumsum_on_the_npu")
def test_a_failing_check_keeps_the_op_on_the_cpu() -> None:
    model, x = RunningTotal(dim=1), torch.randn(2, 3, 16)
    executor, report = compile_model(model, (x,))
    assert report.plan.placement.cpu_reasons == {
        f"{CUMSUM}: cumsum over a dim other than the last": 1
    }
    assert executor.fallback_ops == 0
    torch.testing.assert_close(executor(x)[0], model(x), rtol=0, atol=1e-5)


def test_without_its_row_the_op_stays_on_the_cpu() -> None:
    model, x = RunningTotal(dim=-1), torch.randn(2, 3, 16)
    executor, report = compile_model(model, (x,))
    assert report.plan.placement.cpu_reasons == {f"{CUMSUM}: not in the capability table": 1}
    assert executor.fallback_ops == 0
    torch.testing.assert_close(executor(x)[0], model(x), rtol=0, atol=1e-5)
