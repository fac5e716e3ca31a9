"""`forge-opt -t python`: the printed plan is the executor's plan, and it runs.

The program is exec'd with NNFactory and torch and called with the executor's
arguments; it must give the executor's outputs, segment for segment."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import load_tiny

from forge.conversion import nnfactory_graph
from forge.conversion.plan_to_python import plan_to_python
from forge.executor import CompiledNPUExecutor
from forge.nnfactory import NNFactoryUnavailable
from forge.numerics import ordered_inputs
from forge.pipeline import plan
from forge.reference import entry_function
from forge.tools.forge_opt import main

SAMPLE = Path(__file__).parents[1] / "samples" / "gpt2_attention.mlir"


def run_program(source: str, arguments: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    namespace: dict[str, object] = {}
    exec(compile(source, "<plan>", "exec"), namespace)
    return namespace["run"](*arguments)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("name", "granularity", "precision"),
    [
        ("gpt2", "segment", "fp32"),
        ("gpt2", "op", "fp32"),
        ("llama-3.2-1b", "segment", "fp16"),
    ],
)
def test_program_runs_as_the_executor(name: str, granularity: str, precision: str) -> None:
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    plan(module)
    program = tiny.program
    executor = CompiledNPUExecutor(
        module, program.weights, len(program.input_names), precision, granularity
    )
    source = plan_to_python(module, precision, granularity)
    assert source.count(" = seg") + source.count("\n    seg") >= len(executor.segments)
    assert f"{len(executor.segments)} NNFactory segment(s)" in source
    assert f"{executor.static_transitions()} NPU<->CPU transition(s)" in source

    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, program.input_names)
    names = [a.name_hint for a in entry_function(module).body.block.args]
    weights = [program.weights[n] for n in names[len(inputs) :]]
    expected = executor(*inputs)
    got = run_program(source, [*inputs, *weights])
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)


def test_identical_layers_share_one_graph() -> None:
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    source = plan_to_python(module, granularity="op")
    assert "# the same graph (cache hit)" in source


def test_cpu_steps_are_aten_calls() -> None:
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    source = plan_to_python(module)
    assert "torch.ops.aten.where.ScalarOther(v6, v7, -3.4028234663852886e+38)" in source
    assert "# cpu: " in source and "# npu: seg0: " in source


def test_fallback_group_runs_on_the_cpu() -> None:
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from forge.dialects.npu import NPU
    from forge.tools.forge_opt import LocatingParser

    ctx = Context()
    for dialect in (Builtin, Func, NPU):
        ctx.load_dialect(dialect)
    text = (
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        '  %0 = npu.generic "aten.cumsum.default"(%x, 0 : i64) {device = "npu"}'
        " : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  func.return %0 : tensor<4xf32>\n}\n"
    )
    module = LocatingParser(ctx, text, "f.mlir").parse_module()
    executor = CompiledNPUExecutor(module, {}, 1)
    source = plan_to_python(module)
    assert executor.fallback_ops == 1 and "NNFactory cannot lower it" in source
    x = torch.arange(4.0)
    assert torch.equal(run_program(source, [x])[0], executor(x)[0])


def test_forge_opt_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(SAMPLE), "-p", "forge-pipeline", "--emit", "python"]) == 0
    out = capsys.readouterr().out
    assert "def run(hidden, c_attn_weight, c_attn_bias, mask):" in out
    assert "(v19,) = seg0(hidden, c_attn_bias, c_attn_weight, v1)" in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "'npu.view' op has no 'device'"),
        (["-p", "forge-pipeline", "-t", "python{precision=int8}"], "precision must be one of"),
        (["-p", "forge-pipeline", "-t", "python{granularity=x}"], "granularity must be one of"),
        (["-p", "forge-pipeline", "-t", "python{"], "invalid target: Expected argument name"),
    ],
)
def test_errors_are_one_line(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(SAMPLE), "-t", "python", *args]) == 1
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err


def test_missing_nnfactory_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unavailable() -> None:
        raise NNFactoryUnavailable("NNFactory (intel-npu-acceleration-library 1.4.0) is missing")

    monkeypatch.setattr(nnfactory_graph, "load_backend", unavailable)
    assert main([str(SAMPLE), "-p", "forge-pipeline", "-t", "python"]) == 1
    err = capsys.readouterr().err
    assert err == "forge-opt: error: NNFactory (intel-npu-acceleration-library 1.4.0) is missing\n"
