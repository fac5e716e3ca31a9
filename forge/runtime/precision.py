"""Mixed precision (π = mixed): which linear layers keep fp16 weights, by measurement.

A layer's sensitivity is the relative output error int8 weights cause against fp16
weights on the layer's real input activation (from one reference run of the IR):

    error(l) = ||x W8(l)^T - x W16(l)^T|| / ||x W16(l)^T||

where W8 is per-channel int8 (as the executor quantizes) and W16 the weight rounded to
fp16. The `keep` fraction of layers with the largest error stay fp16; the rest become
int8. The decision is written into the IR as each op's `precision` attribute, so it can
be read, diffed and overridden by hand, and the executor's `mixed` precision obeys it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr

from forge.conversion.nnfactory_graph import LINEAR_OPS, quantize_int8
from forge.diagnostics import ForgeError
from forge.dialects import npu
from forge.dialects.context import entry_function
from forge.runtime.reference import ReferenceExecutor


@dataclass(frozen=True)
class LayerSensitivity:
    index: int
    """Position of the op among the function's linear ops."""
    weight: str
    """The weight argument's name."""
    error: float
    """Relative output error of int8 against fp16 weights."""
    params: int


@dataclass
class MixedPrecisionReport:
    layers: list[LayerSensitivity]
    fp16: list[int] = field(default_factory=list)
    """Indices of the layers kept at fp16."""

    def format(self) -> str:
        kept = set(self.fp16)
        lines = [f"{'layer':>5}  {'weight':<40}{'int8 error':>12}  precision"]
        for layer in sorted(self.layers, key=lambda x: -x.error):
            precision = "fp16" if layer.index in kept else "int8"
            lines.append(f"{layer.index:>5}  {layer.weight:<40}{layer.error:>12.3e}  {precision}")
        return "\n".join(lines)


def linear_ops(function: func.FuncOp) -> list[npu.NpuOp]:
    return [op for op in function.body.block.ops if isinstance(op, LINEAR_OPS)]


def measure_sensitivity(
    module: ModuleOp | func.FuncOp,
    weights: Mapping[str, torch.Tensor],
    inputs: Sequence[torch.Tensor],
) -> list[LayerSensitivity]:
    """The int8-vs-fp16 output error of every linear op whose weight is an argument."""
    function = entry_function(module)
    values = ReferenceExecutor(function, weights, len(inputs)).trace(*inputs)
    layers = []
    for index, op in enumerate(linear_ops(function)):
        name = getattr(op.weight, "name_hint", None)
        if name is None or name not in weights or weights[name].dim() != 2:
            continue
        w = weights[name].detach().float()
        in_out = npu.weight_in_out(op)
        reduce_dim = 0 if in_out else 1
        q, scale = quantize_int8(w, reduce_dim, np.dtype(np.float32))
        w8 = torch.from_numpy(q).float() * torch.from_numpy(scale)
        w16 = w.half().float()
        x = values[op.input].detach().float()
        y16 = x @ w16 if in_out else x @ w16.T
        y8 = x @ w8 if in_out else x @ w8.T
        norm = float(y16.norm())
        error = float((y8 - y16).norm()) / norm if norm > 0 else 0.0
        layers.append(LayerSensitivity(index, name, error, w.numel()))
    return layers


def assign_mixed_precision(
    module: ModuleOp | func.FuncOp,
    weights: Mapping[str, torch.Tensor],
    inputs: Sequence[torch.Tensor],
    keep: float = 0.25,
) -> MixedPrecisionReport:
    """Measure every linear layer and mark the `keep` fraction most sensitive ones fp16,
    the others int8, as `precision` attributes on the ops."""
    if not 0.0 <= keep <= 1.0:
        raise ForgeError(f"keep must be a fraction in [0, 1], got {keep}")
    function = entry_function(module)
    layers = measure_sensitivity(function, weights, inputs)
    ranked = sorted(layers, key=lambda layer: (-layer.error, layer.index))
    fp16 = sorted(layer.index for layer in ranked[: math.ceil(keep * len(ranked))])
    kept = set(fp16)
    measured = {layer.index for layer in layers}
    for index, op in enumerate(linear_ops(function)):
        if index in measured:
            op.attributes["precision"] = StringAttr("fp16" if index in kept else "int8")
    return MixedPrecisionReport(layers, fp16)
