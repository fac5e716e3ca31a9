"""π = mixed: per-layer int8-vs-fp16 sensitivity decides which linears keep fp16."""

from __future__ import annotations

import pytest
import torch
from conftest import load_tiny

from forge.devtools.numerics import agreement, eager_outputs
from forge.dialects.context import entry_function, make_context
from forge.frontend.loading import ordered_inputs
from forge.runtime.executor import CompiledNPUExecutor
from forge.runtime.precision import linear_ops, measure_mixed_precision, measure_sensitivity
from forge.support.diagnostics import ForgeError
from forge.transforms.forge_pipeline import plan
from forge.transforms.npu_assign_precision import NpuAssignPrecisionPass


def planned_gpt2():
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, tiny.program.input_names)
    return tiny, module, inputs


def test_sensitivity_measures_every_linear_weight() -> None:
    tiny, module, inputs = planned_gpt2()
    layers = measure_sensitivity(module, tiny.program.weights, inputs)
    assert len(layers) == len(linear_ops(entry_function(module)))
    assert all(0.0 < layer.error < 0.1 for layer in layers)  # int8 differs, but mildly
    assert len({layer.error for layer in layers}) > 1


def test_a_layer_with_outliers_is_the_most_sensitive() -> None:
    tiny, module, inputs = planned_gpt2()
    weights = dict(tiny.program.weights)
    layers = measure_sensitivity(module, weights, inputs)
    victim = layers[1].weight
    # One huge entry per channel (rows or columns, whichever holds the output channels)
    # makes the int8 step coarse for every other entry of the channel.
    spiked = weights[victim].clone()
    spiked[0, :] = 1.0
    spiked[:, 0] = 1.0
    weights[victim] = spiked
    worst = max(measure_sensitivity(module, weights, inputs), key=lambda layer: layer.error)
    assert worst.weight == victim


@pytest.mark.parametrize("keep", [0.0, 0.25, 1.0])
def test_assign_marks_the_keep_fraction_fp16(keep: float) -> None:
    tiny, module, inputs = planned_gpt2()
    report = measure_mixed_precision(module, tiny.program.weights, inputs, keep=keep)
    assert all(op.precision is None for op in linear_ops(entry_function(module)))  # measures only
    NpuAssignPrecisionPass("mixed", report.fp16_weights).apply(make_context(), module)
    marks = [op.precision.data for op in linear_ops(entry_function(module))]
    assert marks.count("fp16") == len(report.fp16)
    assert len(report.fp16) == -(-int(keep * 100) * len(report.layers) // 100)
    errors = {layer.index: layer.error for layer in report.layers}
    if report.fp16 and len(report.fp16) < len(report.layers):
        kept = min(errors[i] for i in report.fp16)
        dropped = max(e for i, e in errors.items() if i not in report.fp16)
        assert kept >= dropped
    assert "precision" in report.format()


def test_bad_keep_is_an_error() -> None:
    tiny, module, inputs = planned_gpt2()
    with pytest.raises(ForgeError, match="keep must be a fraction"):
        measure_mixed_precision(module, tiny.program.weights, inputs, keep=1.5)


def test_mixed_is_between_int8_and_fp32() -> None:
    tiny, module, inputs = planned_gpt2()
    report = measure_mixed_precision(module, tiny.program.weights, inputs, keep=0.5)
    expected = eager_outputs(tiny.model, tiny.args, tiny.kwargs)[0]
    errors = {}
    for precision in ("mixed", "int8"):
        graph = module.clone()
        kept = report.fp16_weights if precision == "mixed" else None
        NpuAssignPrecisionPass(precision, kept).apply(make_context(), graph)
        executor = CompiledNPUExecutor(graph, tiny.program.weights, len(inputs))
        errors[precision] = agreement(expected, executor(*inputs)[0])
    assert errors["mixed"].kl < errors["int8"].kl
    assert errors["mixed"].top1 >= errors["int8"].top1
    assert isinstance(expected, torch.Tensor)
