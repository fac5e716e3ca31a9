"""npu-schedule-affinity: valid, deterministic, never worse, minimal on small graphs,
numerics unchanged on the tiny models.

Placement (npu-place-devices) is written in parallel, so `place_approximately` marks
devices here: float named compute and data-movement ops on the NPU, everything else
(generic ATen ops, integer/bool ops, embedding, casts, constants) on the CPU.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from conftest import load_tiny
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    FunctionType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    f32,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue

from forge.dialects import npu
from forge.dialects.context import entry_function
from forge.dialects.shapes import element_type, is_float
from forge.frontend.models import SPECS
from forge.support.diagnostics import ForgeError
from forge.transforms import run_pipeline
from forge.transforms.npu_optimize import optimize
from forge.transforms.npu_schedule_affinity import (
    DEVICES,
    NpuScheduleAffinityPass,
    body_ops,
    check_schedule,
    count_transitions,
    device_of,
    has_side_effects,
    schedule,
    side_effecting_ops,
)

NPU_CLASSES: tuple[type[npu.NpuOp], ...] = (
    npu.MatmulOp,
    npu.LinearOp,
    npu.AddmmOp,
    npu.FusedLinearOp,
    npu.SDPAOp,
    npu.SoftmaxOp,
    npu.NormOp,
    npu.UnaryOp,
    npu.BinaryOp,
    npu.ShapeOp,
    npu.ReduceOp,
    npu.CatOp,
    npu.SplitOp,
)


def _all_float(op: Operation) -> bool:
    values = (*op.operands, *op.results)
    return all(is_float(element_type(v.type)) for v in values if isinstance(v.type, TensorType))


def place_approximately(module: ModuleOp) -> None:
    """Stand-in for npu-place-devices: `npu` for float ops of NPU_CLASSES, else `cpu`."""
    for op in module.walk():
        if isinstance(op, npu.NpuOp):
            on_npu = isinstance(op, NPU_CLASSES) and _all_float(op)
            op.attributes["device"] = StringAttr("npu" if on_npu else "cpu")


def place_like_paper(module: ModuleOp) -> None:
    """The paper's lowering: only linear/matmul-like ops on the NPU. Many more
    transitions than `place_approximately`, so the scheduler has work to do."""
    for op in module.walk():
        if isinstance(op, npu.NpuOp):
            on_npu = isinstance(op, npu.MatmulOp | npu.LinearOp | npu.AddmmOp | npu.FusedLinearOp)
            op.attributes["device"] = StringAttr("npu" if on_npu else "cpu")


PLACEMENTS = {"approximate": place_approximately, "paper": place_like_paper}


# ------------------------------------------------------------ random DAGs

T = TensorType(f32, [4])


@st.composite
def dags(draw: st.DrawFn) -> list[tuple[str, list[int], bool]]:
    """Ops as (device, operand indices, side effects); operand index -1 is the argument."""
    n = draw(st.integers(1, 14))
    ops = []
    for i in range(n):
        device = draw(st.sampled_from(("npu", "cpu", "none")))
        operands = draw(st.lists(st.integers(-1, i - 1), min_size=1, max_size=3))
        effect = draw(st.integers(0, 5)) == 0
        ops.append((device, operands, effect))
    return ops


def build_function(spec: Sequence[tuple[str, list[int], bool]]) -> func.FuncOp:
    """Binary/unary float ops (npu.add, npu.tanh), or side-effecting generic ops."""
    block = Block(arg_types=[T])
    values: list[SSAValue] = []
    for device, operands, effect in spec:
        args = [block.args[0] if j < 0 else values[j] for j in operands]
        if effect:
            refs = [npu.OperandRefAttr(k) for k in range(len(args))]
            op: Operation = npu.GenericOp(
                "aten.rand_like.default", args, refs, [T], has_side_effects=True
            )
        elif len(args) == 1:
            op = npu.TanhOp(args[0])
        else:
            op = npu.AddOp.create(operands=args[:2], result_types=[T])
        if device != "none":
            op.attributes["device"] = StringAttr(device)
        block.add_op(op)
        values.append(op.results[0])
    block.add_op(func.ReturnOp(*values[-2:]))
    return func.FuncOp("f", FunctionType.from_lists([T], [T] * min(2, len(values))), Region(block))


def test_random_builder_makes_valid_ir() -> None:
    function = build_function([("npu", [-1], False), ("cpu", [0, -1], True), ("none", [1], False)])
    ModuleOp([function]).verify()
    ops = body_ops(function.body.block)
    assert [device_of(op) for op in ops] == ["npu", "cpu", "cpu"]
    assert [has_side_effects(op) for op in ops] == [False, True, False]


def minimum_transitions(function: func.FuncOp) -> int:
    """Exhaustive minimum over all valid orders (subset DP): the schedule's yardstick."""
    ops = body_ops(function.body.block)
    index = {op: i for i, op in enumerate(ops)}
    preds = [0] * len(ops)
    effects = [i for i, op in enumerate(ops) if has_side_effects(op)]
    for i, op in enumerate(ops):
        for operand in op.operands:
            if operand.owner in index:
                preds[i] |= 1 << index[operand.owner]  # type: ignore[index]
    for a, b in itertools.pairwise(effects):
        preds[b] |= 1 << a
    devices = [DEVICES.index(device_of(op)) for op in ops]
    best: dict[tuple[int, int], int] = {(0, -1): 0}
    for size in range(len(ops)):
        layer = {k: v for k, v in best.items() if bin(k[0]).count("1") == size}
        for (done, last), cost in layer.items():
            for i in range(len(ops)):
                if not done >> i & 1 and preds[i] & done == preds[i]:
                    step = cost + (last >= 0 and last != devices[i])
                    key = (done | 1 << i, devices[i])
                    if step < best.get(key, len(ops)):
                        best[key] = step
    full = (1 << len(ops)) - 1
    return min(v for (done, _), v in best.items() if done == full)


@settings(max_examples=150, deadline=None)
@given(spec=dags(), rule=st.sampled_from(("best-start", "greedy")))
def test_random_dags(spec: list[tuple[str, list[int], bool]], rule: str) -> None:
    function = build_function(spec)
    ops_before = body_ops(function.body.block)
    effects = side_effecting_ops(function)
    report = schedule(function, rule)
    ops_after = body_ops(function.body.block)

    check_schedule(function, effects)  # dependencies and side-effect order
    assert isinstance(function.body.block.last_op, func.ReturnOp)
    assert sorted(map(id, ops_after)) == sorted(map(id, ops_before))  # a permutation
    assert report.ops == len(ops_before)
    assert report.transitions_before == count_transitions(ops_before)
    assert report.transitions_after == count_transitions(ops_after)
    assert report.transitions_after <= report.transitions_before
    assert report.moved <= sum(a is not b for a, b in zip(ops_before, ops_after, strict=True))
    if rule == "best-start":
        assert report.transitions_after == minimum_transitions(function)

    again = build_function(spec)  # deterministic: same input, same order
    schedule(again, rule)
    assert str(again) == str(function)
    second = schedule(function, rule)  # a fixed point
    assert second.moved == 0 and second.transitions_after == report.transitions_after


# --------------------------------------------------------------- checker


def test_checker_rejects_use_before_definition() -> None:
    function = build_function([("npu", [-1], False), ("cpu", [0], False)])
    block = function.body.block
    first, second = body_ops(block)
    block.detach_op(second)
    block.insert_op_before(second, first)
    with pytest.raises(ForgeError, match="breaks a dependency"):
        check_schedule(function)


def test_checker_rejects_reordered_side_effects() -> None:
    function = build_function([("npu", [-1], True), ("cpu", [-1], True)])
    block = function.body.block
    effects = side_effecting_ops(function)
    first, second = body_ops(block)
    block.detach_op(second)
    block.insert_op_before(second, first)
    check_schedule(function)  # no dependency is broken...
    with pytest.raises(ForgeError, match="reorders side effects"):
        check_schedule(function, effects)  # ...but the effects run in the wrong order


def test_refuses_to_invalidate_liveness() -> None:
    """vregs are names and survive a reorder; liveness and buffers encode the old order."""
    spec = [("npu", [-1], False), ("cpu", [-1], False), ("npu", [0], False)]
    with_vregs = build_function(spec)
    run_pipeline(ModuleOp([with_vregs]), "npu-assign-vregs")
    assert schedule(with_vregs).moved == 1

    with_buffers = build_function(spec)
    body_ops(with_buffers.body.block)[0].attributes["buffer"] = IntegerAttr(0, i64)
    before = str(with_buffers)
    with pytest.raises(ForgeError, match="before npu-liveness"):
        schedule(with_buffers)
    assert str(with_buffers) == before


def test_rejects_unknown_rule() -> None:
    with pytest.raises(ValueError, match="rule must be one of"):
        NpuScheduleAffinityPass(rule="lookahead")


# ------------------------------------------------------------ tiny models


@pytest.mark.parametrize("placement", list(PLACEMENTS))
@pytest.mark.parametrize("name", list(SPECS))
def test_tiny_models_keep_numerics(name: str, placement: str) -> None:
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    optimize(module)
    PLACEMENTS[placement](module)
    function = entry_function(module)
    before = count_transitions(body_ops(function.body.block))
    records = run_pipeline(module, "npu-schedule-affinity")
    after = count_transitions(body_ops(function.body.block))
    assert [r.name for r in records] == ["npu-schedule-affinity"]
    assert records[0].ops_before == records[0].ops_after
    assert after <= before
    assert (records[0].rewrites > 0) == (after < before)  # moves only when it pays
    check_schedule(function)
    agreement = tiny.agreement(module)
    assert agreement.max_abs <= 1e-5 and agreement.top1 == 1.0


def test_tiny_models_improve() -> None:
    """Measured: approximate placement leaves little to gain (it already runs Llama's
    elementwise ops on the NPU); the paper's placement interleaves q/k/v projections
    with CPU views."""
    reductions = {}
    for placement, name in [("approximate", "gpt2"), ("paper", "llama-3.2-1b")]:
        module = load_tiny(name).fresh_module()
        optimize(module)
        PLACEMENTS[placement](module)
        report = schedule(entry_function(module))
        reductions[placement] = report.transitions_before - report.transitions_after
    assert reductions["approximate"] >= 2 and reductions["paper"] >= 4


def test_unplaced_ops_count_as_cpu_and_stay_put() -> None:
    module = load_tiny("gpt2").fresh_module()
    optimize(module)
    function = entry_function(module)
    before = str(module)
    report = schedule(function)
    assert (report.transitions_before, report.transitions_after, report.moved) == (0, 0, 0)
    assert str(module) == before
