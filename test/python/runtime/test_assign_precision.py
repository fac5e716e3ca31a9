"""npu-assign-precision decides, the executor obeys: a weight is stored int8/fp16 exactly
where the IR's `precision` attributes say, whether the pass ran from forge-opt text or
inside compile_model's pipeline."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import load_tiny
from xdsl.dialects import func
from xdsl.ir import BlockArgument

from forge.dialects import contract, npu
from forge.dialects.context import entry_function, parse_module
from forge.runtime.compile import compile_model
from forge.runtime.executor import CompiledNPUExecutor
from forge.transforms.forge_pipeline import plan


def stored_as(executor: CompiledNPUExecutor) -> dict[str, str]:
    """Weight argument name -> how the executor's graphs bind it (int8/fp16/float)."""
    found: dict[str, str] = {}
    for segment in executor.segments:
        for value, spec in zip(segment.inputs, segment.graph_inputs, strict=True):
            if isinstance(value, BlockArgument) and value.name_hint:
                found[value.name_hint] = spec.storage
    return found


def annotated(function: func.FuncOp) -> dict[str, str]:
    """Weight argument name -> the `precision` attribute of the linears reading it."""
    marks: dict[str, str] = {}
    for op in function.body.block.ops:
        if isinstance(op, npu.WEIGHTED_LINEAR_OPS) and op.precision is not None:
            assert isinstance(op.weight, BlockArgument)
            marks[op.weight.name_hint or ""] = op.precision.data
    return marks


def test_forge_opt_int8_is_what_the_executor_quantizes() -> None:
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    spec = "npu-assign-precision{precision=int8}"
    proc = subprocess.run(
        [sys.executable, "-m", "forge.tools.forge_opt", "-p", spec],
        input=str(module),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    function = entry_function(parse_module(proc.stdout))
    assert contract.program_precision(function) == "int8"
    marks = annotated(function)
    assert marks and set(marks.values()) == {"int8"}
    program = tiny.program
    executor = CompiledNPUExecutor(function, program.weights, len(program.input_names))
    assert executor.precision == "int8"  # read from the IR
    stored = stored_as(executor)
    int8 = {name for name, storage in stored.items() if storage == "int8"}
    assert int8 == set(marks) & set(stored)
    assert all(s.precision == "int8" for s in executor.segments)  # the IR, read once


@pytest.mark.parametrize("precision", ["int8", "mixed"])
def test_compile_model_goes_through_the_pass(precision: str) -> None:
    tiny = load_tiny("gpt2")
    executor, report = compile_model(tiny.model, tiny.args, tiny.kwargs, precision=precision)
    assert report.plan.precision is not None
    assert report.plan.precision.precision == precision
    assert any(r.name == "npu-assign-precision" for r in report.plan.records)
    function = executor.segments[0].ops[0].parent_op()
    assert isinstance(function, func.FuncOp)
    marks = annotated(function)
    assert marks == report.plan.precision.weights
    stored = stored_as(executor)
    for name, storage in stored.items():
        if name in marks:
            assert storage == marks[name], name
    kinds = {marks[name] for name in stored if name in marks}
    assert kinds == ({"int8"} if precision == "int8" else {"fp16", "int8"})


def test_fp32_compile_runs_no_precision_pass() -> None:
    tiny = load_tiny("gpt2")
    executor, report = compile_model(tiny.model, tiny.args, tiny.kwargs)
    assert report.plan.precision is None
    assert executor.precision == "fp32"
    assert all(s == "float" for s in stored_as(executor).values())
