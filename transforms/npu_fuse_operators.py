"""npu-fuse-operators: fold activations and bias adds into the linear layer they follow.

A linear layer followed by a separate activation costs two dispatches and a round
trip of the full activation tensor through memory; `npu.fused_linear` runs the
activation as the linear's epilogue in one NNFactory dispatch. The rewrites:

- linear + activation: `relu`, `silu`, `sigmoid` or `gelu` (erf or tanh form) of a
  `npu.linear`, `npu.addmm` or un-activated `npu.fused_linear` becomes one
  `npu.fused_linear{activation=…}` (addmm keeps its [in, out] weight through
  `weight_in_out`). The SwiGLU gate of Llama, Qwen2, Granite and LFM2,
  `silu(gate_proj(x)) * up_proj(x)`, is this rewrite on the gate projection.
- decomposed tanh-GELU: `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, GPT-2's
  `gelu_new`, becomes `npu.gelu{approximate="tanh"}` (constants matched to 1e-6
  relative; operand order and `x³` as `pow` or products do not matter), which the
  first rewrite then absorbs.
- through a reshape: elementwise ops commute with `npu.view`/`npu.reshape`, so
  `act(view(linear(x)))` becomes `view(fused_linear(x))` (GPT-2 reshapes between
  its addmm and its gelu).
- bias absorption: `matmul(x, W) + b` with a weight `W` (a function argument or a
  constant) and a per-feature bias `b` ([N]) becomes `npu.addmm(b, x, W)` for rank-2 `x`, else
  `npu.fused_linear{activation="none", weight_in_out}`; `linear(x, W) + b` becomes
  `npu.linear(x, W, b)`.

Every rewrite requires the intermediates it removes to have no other users (a
linear whose result is also used elsewhere is left alone), float element types,
and matching shapes and `device` placement.

`alpha` in [0, 1] sets how aggressive the pass is. Each rewrite has a threshold and
is enabled when `alpha >= threshold`, so raising alpha only ever adds rewrites:

| alpha >= | adds |
|---|---|
| 0.2 | linear + relu / silu / sigmoid (one-op epilogues; includes the SwiGLU gate) |
| 0.4 | linear + gelu, erf and tanh forms |
| 0.6 | recognizing the decomposed tanh-GELU formula (rounds differently by ~1e-7) |
| 0.8 | fusion through one view/reshape between the linear and the activation |
| 1.0 | bias absorption: matmul + bias -> addmm/fused_linear, linear + bias -> linear |

`alpha=0` disables the pass: it makes no rewrite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.arg_spec import ArgSpec

from forge.dialects import npu
from forge.dialects.shapes import element_type, is_float, shape_of, shapes_equal
from forge.transforms.matchers import (
    only_user,
    replace_and_erase_producers,
    scalar_value,
    single_use,
)
from forge.transforms.pattern_pass import NpuPatternPass, float_options, publish, run_patterns

# Thresholds: a rewrite is enabled when alpha >= its threshold (see the module docstring).
SIMPLE_ACTIVATION_ALPHA = 0.2
GELU_ALPHA = 0.4
DECOMPOSED_GELU_ALPHA = 0.6
THROUGH_RESHAPE_ALPHA = 0.8
BIAS_ADD_ALPHA = 1.0


@dataclass
class AlphaUsed:
    """The highest threshold any rewrite of one pass run relied on. Every alpha from
    `needed` up to the run's own makes exactly the same rewrites (a gate that let a
    pattern through without a rewrite changed nothing), which the autotuner reads
    to share one graph across those alphas instead of running each."""

    needed: float = 0.0

    def use(self, threshold: float) -> None:
        self.needed = max(self.needed, threshold)


ACTIVATION_ALPHA = {
    "relu": SIMPLE_ACTIVATION_ALPHA,
    "silu": SIMPLE_ACTIVATION_ALPHA,
    "sigmoid": SIMPLE_ACTIVATION_ALPHA,
    "gelu": GELU_ALPHA,
    "gelu_tanh": GELU_ALPHA,
}

CONSTANT_RTOL = 1e-6
"""Relative tolerance for the constants of a decomposed formula: exporters print and
round them differently (0.7978845608028654 vs sqrt(2 / pi) computed in fp32)."""


# ------------------------------------------------------------------ helpers


@dataclass(frozen=True)
class LinearParts:
    """The operands of a linear layer, whatever op spells it."""

    input: SSAValue
    weight: SSAValue
    bias: SSAValue | None
    weight_in_out: bool


def linear_parts(op: Operation | None) -> LinearParts | None:
    """`op` as a linear layer without an activation, or None."""
    if isinstance(op, npu.LinearOp):
        return LinearParts(op.input, op.weight, op.bias, weight_in_out=False)
    if isinstance(op, npu.AddmmOp):
        return LinearParts(op.input, op.weight, op.bias, weight_in_out=True)
    if isinstance(op, npu.FusedLinearOp) and op.activation.data == "none":
        return LinearParts(op.input, op.weight, op.bias, op.weight_in_out is not None)
    return None


def fused_linear(parts: LinearParts, activation: str, result_type: Attribute) -> npu.FusedLinearOp:
    operands = [parts.input, parts.weight]
    if parts.bias is not None:
        operands.append(parts.bias)
    properties: dict[str, Attribute] = {"activation": StringAttr(activation)}
    if parts.weight_in_out:
        properties["weight_in_out"] = UnitAttr()
    return npu.FusedLinearOp.create(
        operands=operands, result_types=[result_type], properties=properties
    )


def activation_name(op: Operation) -> str | None:
    """The `npu.fused_linear` activation that `op` computes, or None."""
    if isinstance(op, npu.ReluOp):
        return "relu"
    if isinstance(op, npu.SiluOp):
        return "silu"
    if isinstance(op, npu.SigmoidOp):
        return "sigmoid"
    if isinstance(op, npu.GeluOp):
        approximate = op.approximate.data if op.approximate is not None else "none"
        return {"none": "gelu", "tanh": "gelu_tanh"}.get(approximate)
    return None


def float_tensor(value: SSAValue) -> bool:
    return is_float(element_type(value.type))


def devices_agree(*ops: Operation) -> bool:
    """Whether the placed ones among `ops` share a `device`: fusing ops placed on
    different devices would silently move work across them."""
    return len({op.device.data for op in ops if isinstance(op, npu.NpuOp) and op.device}) <= 1


def placed_like(op: Operation, *sources: Operation) -> Operation:
    """`op` with the `device` of the first placed op among `sources`, if any."""
    for source in sources:
        if isinstance(source, npu.NpuOp) and source.device is not None:
            op.attributes["device"] = source.device
            break
    return op


def close(value: float | None, expected: float) -> bool:
    return value is not None and math.isclose(value, expected, rel_tol=CONSTANT_RTOL)


def is_weight(value: SSAValue) -> bool:
    """A function argument (parameters are arguments named by state-dict key) or a
    literal constant: what a linear layer's weight or bias is, unlike activations."""
    return isinstance(value, BlockArgument) or isinstance(value.owner, npu.ConstantOp)


# ----------------------------------------------------------------- patterns


class FuseLinearActivation(RewritePattern):
    """`act(linear(x))` -> `fused_linear{activation=act}(x)`, optionally through one
    view/reshape: `act(view(linear(x)))` -> `view(fused_linear(x))`.

    Anchored on the activation so a linear with several consumers is never
    duplicated; each activation is enabled by its own alpha threshold.
    """

    def __init__(self, alpha: float, used: AlphaUsed | None = None):
        self.alpha = alpha
        self.used = used or AlphaUsed()

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self,
        op: npu.ReluOp | npu.SiluOp | npu.SigmoidOp | npu.GeluOp,
        rewriter: PatternRewriter,
    ) -> None:
        activation = activation_name(op)
        if activation is None or self.alpha < ACTIVATION_ALPHA[activation]:
            return
        if not float_tensor(op.result):
            return
        producer = op.input.owner
        reshape: npu.ReshapeLikeOp | None = None
        if isinstance(producer, npu.ReshapeLikeOp):
            if self.alpha < THROUGH_RESHAPE_ALPHA or not single_use(producer.result):
                return
            reshape, producer = producer, producer.input.owner
        if not isinstance(producer, Operation):
            return
        parts = linear_parts(producer)
        if parts is None:
            return
        user = reshape if reshape is not None else op
        if not only_user(producer.results[0], user) or not devices_agree(producer, user, op):
            return

        fused = fused_linear(parts, activation, producer.results[0].type)
        placed_like(fused, producer, op)
        self.used.use(ACTIVATION_ALPHA[activation])
        if reshape is not None:
            self.used.use(THROUGH_RESHAPE_ALPHA)
        if reshape is None:
            rewriter.replace(op, fused)
        else:
            moved = type(reshape).create(
                operands=[fused.results[0]],
                result_types=[reshape.result.type],
                attributes=dict(reshape.attributes),
            )
            rewriter.replace(op, [fused, moved])
            rewriter.erase(reshape)
        rewriter.erase(producer)


class RecognizeTanhGelu(RewritePattern):
    """`0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` -> `npu.gelu{approximate="tanh"}`.

    GPT-2's `gelu_new` reaches ATen as eight elementwise ops; as one named op it is
    one kernel, and `FuseLinearActivation` can put it in the linear's epilogue.
    Products are read as scale·Π factors (see `product`), so any association and
    operand order of the muls, and `pow(x, 3)` or `x*x*x`, match.
    """

    def __init__(self, used: AlphaUsed | None = None):
        self.used = used or AlphaUsed()

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.MulOp, rewriter: PatternRewriter) -> None:
        if not float_tensor(op.result):
            return
        factors, scale = product(op.result, root=True)
        if len(factors) != 2 or not close(scale, 0.5):
            return
        a, b = factors
        x = next((u for u, t in ((a, b), (b, a)) if self.is_one_plus_tanh_of_cubic(t, u)), None)
        if x is None or x.type != op.result.type:
            return

        gelu = npu.GeluOp(x, {"approximate": StringAttr("tanh")})
        self.used.use(DECOMPOSED_GELU_ALPHA)
        replace_and_erase_producers(op, placed_like(gelu, op), None, rewriter)

    @staticmethod
    def is_one_plus_tanh_of_cubic(value: SSAValue, x: SSAValue) -> bool:
        """`value` is `1 + tanh(√(2/π)·(x + 0.044715·x³))`, every step used only here."""
        add = value.owner
        if not isinstance(add, npu.AddOp) or not single_use(value):
            return False
        if not close(scalar_value(add.scalar), 1):
            return False
        tanh = add.lhs.owner
        if not isinstance(tanh, npu.TanhOp) or not single_use(add.lhs):
            return False
        scaled, scale = product(tanh.input)
        if len(scaled) != 1 or not close(scale, math.sqrt(2 / math.pi)):
            return False
        inner = scaled[0]
        poly = inner.owner
        if not isinstance(poly, npu.AddOp) or poly.rhs is None or not single_use(inner):
            return False
        for linear_term, cubic_term in ((poly.lhs, poly.rhs), (poly.rhs, poly.lhs)):
            cubic, scale = product(cubic_term)
            if linear_term == x and cubic == [x, x, x] and close(scale, 0.044715):
                return True
        return False


def product(value: SSAValue, root: bool = False) -> tuple[list[SSAValue], float]:
    """`value` as (factors, scale) with value = scale · Π factors.

    Looks through `npu.mul` (by a tensor or a scalar) and `npu.pow` by a small integer
    scalar whose results are used only inside this product (`root` exempts `value`
    itself) and that do not broadcast; anything else is a factor."""
    op = value.owner
    if not isinstance(op, npu.MulOp | npu.PowOp) or not (root or single_use(value)):
        return [value], 1.0
    if any(operand.type != value.type for operand in op.operands):
        return [value], 1.0  # broadcasting: not an elementwise product of like tensors
    factors, scale = product(op.lhs)
    if isinstance(op, npu.PowOp):
        exponent = scalar_value(op.scalar)
        if exponent not in (2.0, 3.0, 4.0):
            return [value], 1.0
        n = int(exponent)
        return factors * n, scale**n
    if op.rhs is None:
        factor = scalar_value(op.scalar)
        assert factor is not None  # a binary op has an rhs or a scalar
        return factors, scale * factor
    right, right_scale = product(op.rhs)
    return factors + right, scale * right_scale


class AbsorbBiasAdd(RewritePattern):
    """`matmul(x, W) + b` -> `addmm(b, x, W)` (rank-2 x) or
    `fused_linear{none, weight_in_out}(x, W, b)`; `linear(x, W) + b` -> `linear(x, W, b)`.

    Only a weight `W` (a function argument or constant) makes a matmul a linear
    layer, as opposed to attention's activation-by-activation products, and only a
    per-output-feature bias `b` ([N], or [1, …, 1, N]) is what NPU linears add.
    """

    def __init__(self, used: AlphaUsed | None = None):
        self.used = used or AlphaUsed()

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.AddOp, rewriter: PatternRewriter) -> None:
        if op.rhs is None or not float_tensor(op.result):
            return
        for value, bias in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            producer = value.owner
            if not isinstance(producer, Operation) or not only_user(value, op):
                continue
            if value.type != op.result.type or not self.is_bias_for(bias, value):
                continue
            if not devices_agree(producer, op):
                continue
            replacement = self.with_bias(producer, bias, op.result.type)
            if replacement is None:
                continue
            self.used.use(BIAS_ADD_ALPHA)
            rewriter.replace(op, placed_like(replacement, producer, op))
            rewriter.erase(producer)
            return

    @staticmethod
    def is_bias_for(bias: SSAValue, value: SSAValue) -> bool:
        out, shape = shape_of(value.type), shape_of(bias.type)
        if not is_weight(bias) or element_type(bias.type) != element_type(value.type):
            return False
        if not shape or len(shape) > len(out) or any(d != 1 for d in shape[:-1]):
            return False
        return shapes_equal(shape[-1:], out[-1:])

    @staticmethod
    def with_bias(producer: Operation, bias: SSAValue, result_type: Attribute) -> Operation | None:
        """`producer` rebuilt with `bias`, or None when it is no bias-free linear."""
        if isinstance(producer, npu.MatmulOp):
            x, w = producer.lhs, producer.rhs
            if not is_weight(w) or len(shape_of(w.type)) != 2:
                return None
            if len(shape_of(x.type)) == 2:
                return npu.AddmmOp.create(operands=[bias, x, w], result_types=[result_type])
            return fused_linear(LinearParts(x, w, bias, weight_in_out=True), "none", result_type)
        parts = linear_parts(producer)
        if parts is None or parts.bias is not None:
            return None
        if isinstance(producer, npu.FusedLinearOp):
            return fused_linear(
                LinearParts(parts.input, parts.weight, bias, parts.weight_in_out),
                "none",
                result_type,
            )
        return npu.LinearOp.create(
            operands=[parts.input, parts.weight, bias], result_types=[result_type]
        )


# --------------------------------------------------------------------- pass


@dataclass(frozen=True)
class NpuFuseOperatorsPass(NpuPatternPass):
    """Fuse linear layers with their activation and bias (see the module docstring)."""

    name = "npu-fuse-operators"

    alpha: float = 1.0
    """Aggressiveness in [0, 1]; a rewrite runs when alpha >= its threshold: 0.2
    relu/silu/sigmoid (incl. the SwiGLU gate), 0.4 gelu, 0.6 decomposed tanh-GELU,
    0.8 through view/reshape, 1.0 bias absorption. 0 disables fusion."""

    def __post_init__(self) -> None:
        alpha = self.alpha
        if isinstance(alpha, bool) or not isinstance(alpha, int | float):
            raise ValueError(f"alpha must be a number in [0, 1], got {alpha!r}")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
        object.__setattr__(self, "alpha", float(alpha))

    @classmethod
    def from_spec(cls, spec: ArgSpec) -> Self:
        return super().from_spec(float_options(spec, "alpha"))

    def patterns(self, used: AlphaUsed | None = None) -> Sequence[RewritePattern]:
        """The patterns `alpha` enables, recording into `used` what their rewrites need."""
        if self.alpha <= 0.0:
            return ()
        used = used or AlphaUsed()
        patterns: list[RewritePattern] = [FuseLinearActivation(self.alpha, used)]
        if self.alpha >= DECOMPOSED_GELU_ALPHA:
            patterns.append(RecognizeTanhGelu(used))
        if self.alpha >= BIAS_ADD_ALPHA:
            patterns.append(AbsorbBiasAdd(used))
        return patterns

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Runs the patterns and publishes the `AlphaUsed` of the run."""
        used = AlphaUsed()
        run_patterns(self.name, self.patterns(used), op, self.WALK_REVERSE)
        publish(self.name, used)
