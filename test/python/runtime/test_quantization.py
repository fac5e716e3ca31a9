"""Weight precisions: int8 weight-only quantization (per output channel) and `mixed`,
where a weight's op may ask for fp16 or fp32 storage through its `precision` attribute."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import load_tiny
from xdsl.dialects.builtin import StringAttr
from xdsl.utils.exceptions import VerifyException

from forge.conversion.graph_call import quantize_int8
from forge.conversion.kernel_choice import BuildOptions
from forge.conversion.nnfactory_graph import graph_input
from forge.devtools.numerics import agreement, eager_outputs
from forge.dialects import npu
from forge.dialects.context import entry_function, parse_module
from forge.frontend.loading import ordered_inputs
from forge.runtime.executor import CompiledNPUExecutor
from forge.transforms.forge_pipeline import plan
from forge.transforms.npu_assign_precision import record_precision

LINEAR_AND_ADDMM = """
func.func @f(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>,
             %w2: tensor<16x16xf32>) -> tensor<4x16xf32> {
  %0 = npu.linear %x, %w, %b
      : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %1 = npu.addmm %b, %0, %w2
      : (tensor<16xf32>, tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  func.return %1 : tensor<4x16xf32>
}
"""


def test_quantize_int8_error_is_at_most_half_a_step() -> None:
    weight = torch.randn(16, 32, generator=torch.Generator().manual_seed(0))
    for dim in (0, 1):
        q, scale = quantize_int8(weight, dim, np.float32)
        assert q.dtype.name == "int8" and abs(q).max() <= 127
        assert scale.shape == ((1, 32) if dim == 0 else (16, 1))
        error = (torch.from_numpy(q).float() * torch.from_numpy(scale) - weight).abs()
        assert bool((error <= torch.from_numpy(scale) / 2 + 1e-7).all())


def test_quantize_int8_zero_channel_gets_unit_scale() -> None:
    q, scale = quantize_int8(torch.zeros(3, 4), 1, np.float32)
    assert (q == 0).all() and (scale == 1).all()


def test_graph_input_quantizes_only_linear_weights() -> None:
    function = entry_function(parse_module(LINEAR_AND_ADDMM))
    x, w, b, w2 = function.body.block.args
    plain = BuildOptions()
    assert graph_input(w, "int8", plain).storage == "int8"
    assert graph_input(w, "int8", plain).reduce_dim == 1  # [out, in]: one scale per row
    assert graph_input(w2, "int8", plain).reduce_dim == 0  # addmm's [in, out]: one per column
    assert graph_input(x, "int8", plain).storage == "float"  # an activation, not a weight
    assert graph_input(b, "int8", plain).storage == "float"  # a bias is 1-D
    assert graph_input(w, "fp32", plain).storage == "float"
    # fp16 weights: kept fp16, unless the host profile measured the fp32 weights
    # faster at these rows (`FP16_KERNELS`); a bias is not a linear weight.
    assert graph_input(b, "fp16", plain).storage == "float"
    wide = BuildOptions(fp16_kernels=((1, "wide"),))
    assert graph_input(w, "fp16", wide).storage == "float"  # the fp32 weights, no copy
    assert not graph_input(w, "fp16", wide, constant=True).transposed
    assert graph_input(w, "fp16", plain).storage == "fp16"  # unmeasured: as asked
    narrow = BuildOptions(fp16_kernels=((1, "narrow"),))
    assert graph_input(w, "fp16", narrow).storage == "fp16"
    assert not graph_input(w2, "fp16", narrow).transposed  # bound per call: as it is
    assert graph_input(w2, "fp16", narrow, constant=True).transposed  # [in, out] kept [out, in]
    assert not graph_input(w, "fp16", narrow, constant=True).transposed


def test_precision_attribute_decides_under_mixed() -> None:
    function = entry_function(parse_module(LINEAR_AND_ADDMM))
    w = function.body.block.args[1]
    linear = next(op for op in function.body.block.ops if isinstance(op, npu.LinearOp))
    plain = BuildOptions()
    assert graph_input(w, "mixed", plain).storage == "int8"
    linear.attributes["precision"] = StringAttr("fp16")
    assert graph_input(w, "mixed", plain).storage == "fp16"
    assert graph_input(w, "mixed", BuildOptions(fp16_kernels=((1, "wide"),))).storage == "float"
    assert graph_input(w, "int8", plain).storage == "int8"  # int8 quantizes every linear
    linear.attributes["precision"] = StringAttr("fp32")
    assert graph_input(w, "mixed", plain).storage == "float"
    assert graph_input(w, "fp32", plain).storage == "float"


def test_verifier_rejects_unknown_precision() -> None:
    module = parse_module(LINEAR_AND_ADDMM)
    linear = next(
        op for op in entry_function(module).body.block.ops if isinstance(op, npu.LinearOp)
    )
    linear.attributes["precision"] = StringAttr("int4")
    with pytest.raises(VerifyException, match="precision must be one of fp32, fp16, int8"):
        module.verify()


def run_tiny(
    name: str, precision: str, annotate: str | None = None, options: BuildOptions | None = None
):
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    plan(module)
    if annotate is not None:
        for op in entry_function(module).body.block.ops:
            if isinstance(op, npu.WEIGHTED_LINEAR_OPS):
                op.attributes["precision"] = StringAttr(annotate)
    program = tiny.program
    record_precision(entry_function(module), precision)  # the IR states it
    executor = CompiledNPUExecutor(module, program.weights, len(program.input_names), options)
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, program.input_names)
    expected = eager_outputs(tiny.model, tiny.args, tiny.kwargs)
    actual = executor(*inputs)
    return executor, agreement(expected[0], actual[0])


@pytest.mark.parametrize("name", ["gpt2", "llama-3.2-1b"])
def test_int8_weights_are_quantized_and_close(name: str) -> None:
    executor, result = run_tiny(name, "int8")
    storages = [s.storage for seg in executor.segments for s in seg.graph_inputs]
    assert storages.count("int8") >= 4
    assert result.max_abs > 1e-6  # the weights really were rounded
    assert result.kl < 1e-2 and result.top1 >= 0.9


def test_mixed_with_every_linear_at_fp32_matches_eager() -> None:
    executor, result = run_tiny("gpt2", "mixed", annotate="fp32")
    assert all(s.storage != "int8" for seg in executor.segments for s in seg.graph_inputs)
    assert result.max_abs <= 1e-4 and result.top1 == 1.0


def test_mixed_with_every_linear_at_fp16_is_between() -> None:
    executor, fp16 = run_tiny("gpt2", "mixed", annotate="fp16")
    assert any(s.storage == "fp16" for seg in executor.segments for s in seg.graph_inputs)
    _, int8 = run_tiny("gpt2", "int8")
    assert 0.0 < fp16.max_abs < int8.max_abs


def test_dynamic_quantization_compiles_its_own_graphs_and_stays_close() -> None:
    """Graphs built with their activations' quantization forced on are compiled apart
    from the weight-only ones (the options are part of the graph cache's key), and the
    int8 model with its activations quantized at run time stays close to eager."""
    from forge.conversion import nnfactory_graph

    run_tiny("gpt2", "int8")  # the weight-only graphs are in the cache now
    before = nnfactory_graph.STATS.compiles
    _, result = run_tiny("gpt2", "int8", options=BuildOptions.for_host(None, True))
    assert nnfactory_graph.STATS.compiles > before
    assert result.kl < 1e-2 and result.top1 >= 0.9


def test_dynamic_quantization_needs_int8_weights() -> None:
    from forge.runtime.compile import compile_model
    from forge.runtime.generate import compile_lm

    tiny = load_tiny("gpt2")
    with pytest.raises(Exception, match="needs precision 'int8', got 'fp32'") as error:
        compile_model(tiny.model, tiny.args, tiny.kwargs, "fp32", dynamic_quantized=True)
    assert "\n" not in str(error.value)
    with pytest.raises(Exception, match="dynamic_prefill needs precision 'int8'"):
        compile_lm(tiny.model, capacity=16, prompt_capacity=4, dynamic_prefill=True)


def test_the_profile_decides_which_int8_graphs_quantize_their_activations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No forcing: a graph with int8 weights quantizes its activations where the host
    profile's rule says so for its rows (the nearest measured row count), a graph
    without int8 weights never; forcing weight-only (`dynamic_quantized=False`) and the
    user's variable, read when the options are made, win over the rule."""
    from forge.conversion.kernel_choice import DYNAMIC_QUANTIZATION_ENV

    monkeypatch.delenv(DYNAMIC_QUANTIZATION_ENV, raising=False)
    ops = list(entry_function(parse_module(LINEAR_AND_ADDMM)).body.block.ops)  # 4 rows
    assert BuildOptions().quantization_group_for(ops, int8=True) == "0"  # nothing measured
    near_one = ((1, True), (128, False))
    options = BuildOptions(int8_dynamic=near_one)
    assert options.quantization_group_for(ops, int8=True) == "32"  # 4 is nearest 1
    assert options.quantization_group_for(ops, int8=False) == "0"
    weight_only = BuildOptions(int8_dynamic=near_one, quantization_group="0")
    assert weight_only.quantization_group_for(ops, int8=True) == "0"
    far = ((1, False), (128, True))
    assert BuildOptions(int8_dynamic=far).quantization_group_for(ops, int8=True) == "0"
    monkeypatch.setenv(DYNAMIC_QUANTIZATION_ENV, "64")
    assert BuildOptions(int8_dynamic=far).quantization_group_for(ops, int8=True) == "64"


def test_int8_graphs_the_profile_quantizes_are_their_own_and_stay_close() -> None:
    from forge.conversion import nnfactory_graph

    run_tiny("gpt2", "int8")  # weight-only graphs are in the cache now
    before = nnfactory_graph.STATS.compiles
    _, result = run_tiny("gpt2", "int8", options=BuildOptions(int8_dynamic=((1, True),)))
    assert nnfactory_graph.STATS.compiles > before
    assert result.kl < 1e-2 and result.top1 >= 0.9


def test_weight_only_needs_int8_in_one_line() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "forge.cli", "compile", "gpt2", "--tiny", "--weight-only"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert done.stderr.strip() == "forge: error: --weight-only needs --precision int8, got fp32"
