"""Mixed precision (π = mixed): which linear layers keep fp16 weights, by measurement.

A layer's sensitivity is the relative output error int8 weights cause against fp16
weights on the layer's real input activation (from one reference run of the IR):

    error(l) = ||x W8(l)^T - x W16(l)^T|| / ||x W16(l)^T||

where W8 is per-channel int8 (as the executor quantizes) and W16 the weight rounded to
fp16. The `keep` fraction of layers with the largest error stay fp16; the rest become
int8. The measurement only produces the names of the weights to keep fp16: the option
`fp16-weights` of npu-assign-precision (and of forge-pipeline, `plan(...,
fp16_weights=...)`), which writes the decision into the IR, where it can be read, diffed
and overridden by hand.

Measured on the imported graph: Phase 2 keeps each linear's weight argument and input
activation, so the one measurement holds for every configuration's graph.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from forge.conversion.graph_call import quantize_int8
from forge.dialects import npu
from forge.dialects.context import entry_function
from forge.frontend.loading import Program, ordered_inputs
from forge.runtime.reference import ReferenceExecutor
from forge.support.diagnostics import ForgeError


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

    @property
    def fp16_weights(self) -> tuple[str, ...]:
        """The names of the weights kept fp16 (npu-assign-precision's `fp16-weights`); a
        weight several linears read is fp16 when one of them is kept."""
        kept = set(self.fp16)
        return tuple(dict.fromkeys(layer.weight for layer in self.layers if layer.index in kept))

    def note(self) -> str:
        return (
            f"mixed precision: {len(self.fp16)} of {len(self.layers)} linear layers keep "
            "fp16 weights (largest int8 output error), the rest int8"
        )

    def format(self) -> str:
        kept = set(self.fp16)
        lines = [f"{'layer':>5}  {'weight':<40}{'int8 error':>12}  precision"]
        for layer in sorted(self.layers, key=lambda x: -x.error):
            precision = "fp16" if layer.index in kept else "int8"
            lines.append(f"{layer.index:>5}  {layer.weight:<40}{layer.error:>12.3e}  {precision}")
        return "\n".join(lines)


def linear_ops(function: func.FuncOp) -> list[npu.NpuOp]:
    return [op for op in function.body.block.ops if isinstance(op, npu.WEIGHTED_LINEAR_OPS)]


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


def measure_mixed_precision(
    module: ModuleOp | func.FuncOp,
    weights: Mapping[str, torch.Tensor],
    inputs: Sequence[torch.Tensor],
    keep: float = 0.25,
) -> MixedPrecisionReport:
    """Measure every linear layer and pick the `keep` fraction most sensitive ones to
    stay fp16 (`fp16_weights` of the report), the others int8; writes nothing."""
    if not 0.0 <= keep <= 1.0:
        raise ForgeError(f"keep must be a fraction in [0, 1], got {keep}")
    layers = measure_sensitivity(module, weights, inputs)
    ranked = sorted(layers, key=lambda layer: (-layer.error, layer.index))
    fp16 = sorted(layer.index for layer in ranked[: math.ceil(keep * len(ranked))])
    return MixedPrecisionReport(layers, fp16)


def program_fp16_weights(program: Program) -> tuple[tuple[str, ...] | None, str]:
    """The measured `fp16-weights` of a loaded program and a one-line note; None (and
    why) when its weights are on the meta device and cannot be measured, so that
    npu-assign-precision falls back to its rule."""
    if any(getattr(w, "is_meta", False) for w in program.weights.values()):
        return None, "mixed precision: meta-device weights, priced with the fallback rule"
    loaded = program.loaded
    args = entry_function(program.module).body.block.args[: program.num_inputs]
    names = [a.name_hint or f"arg{i}" for i, a in enumerate(args)]
    inputs = ordered_inputs(loaded.model, loaded.args, loaded.kwargs, names)
    report = measure_mixed_precision(program.module, program.weights, inputs)
    note = (
        f"mixed precision: measured int8 sensitivity keeps {len(report.fp16)} of "
        f"{len(report.layers)} linear layers fp16"
    )
    return report.fp16_weights, note
