"""The `npu` dialect: tensor-level ops for ATen graphs bound for an NPU + CPU.

Ops that passes reason about are named and verified; the long tail of ATen is one
`npu.generic` op that carries its opcode, so importing a model never fails on an
unknown op. Every op may carry the discardable attributes `device` (set by
placement), `vreg` (set by vreg assignment), `buffer` (set by allocation) and
`precision` (a weight's storage precision, set by npu-assign-precision).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FloatAttr,
    FunctionType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import (
    Attribute,
    BlockArgument,
    Dialect,
    Operation,
    ParametrizedAttribute,
    SSAValue,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParamAttrConstraint,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    opt_attr_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.irdl import operand_def as _operand_def
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    ConstantLike,
    EffectInstance,
    MemoryEffect,
    MemoryEffectKind,
    Pure,
)
from xdsl.utils.exceptions import VerifyException

from forge.dialects.canonicalization import NpuCanonicalization
from forge.dialects.precisions import WEIGHT_PRECISIONS
from forge.dialects.shapes import (
    DYNAMIC,
    ShapeError,
    broadcast,
    dims_equal,
    element_type,
    fmt_shape,
    is_bool,
    is_float,
    normalize_dim,
    numel,
    shape_of,
    shapes_equal,
    slice_length,
)

Tensor = base(TensorType)
DEVICES = ("npu", "cpu")
"""Storage precisions a weight can have (the `precision` attribute)."""
ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu", "sigmoid")


def operand_def(constraint=Tensor):
    return _operand_def(constraint)


# --------------------------------------------------------------------------- base


class NpuOp(IRDLOperation, abc.ABC):
    """Common base: the ATen opcode, the placement/allocation attributes, shape checks."""

    ATEN: ClassVar[str] = ""
    """The ATen opcode this op stands for (fused ops: their own name)."""

    irdl_options = (ParsePropInAttrDict(),)

    device = opt_attr_def(StringAttr)
    """`npu` or `cpu`, set by npu-place-devices."""
    vreg = opt_attr_def(IntegerAttr)
    """Virtual register of the first result (further results: the next numbers), set by
    npu-assign-vregs."""
    live = opt_attr_def(DenseArrayBase)
    """`[s, e]` per result: positions (op indices in the block) of the definition and of
    the last use, set by npu-liveness."""
    dead_after = opt_attr_def(DenseArrayBase)
    """Vregs whose last use is this op, set by npu-liveness."""
    buffer = opt_attr_def(IntegerAttr | DenseArrayBase)
    """Physical buffer of each result (one int, or one per result), set by npu-linear-scan."""
    precision = opt_attr_def(StringAttr)
    """Storage precision of this op's weight operand (`fp32`, `fp16` or `int8`), set by
    npu-assign-precision; overrides the executor's precision for this weight."""

    @property
    def opcode(self) -> str:
        return self.ATEN or self.name

    def verify_(self) -> None:
        if self.device is not None and self.device.data not in DEVICES:
            raise VerifyException(
                f"device must be one of {', '.join(DEVICES)}, got '{self.device.data}'"
            )
        if self.precision is not None and self.precision.data not in WEIGHT_PRECISIONS:
            raise VerifyException(
                f"precision must be one of {', '.join(WEIGHT_PRECISIONS)}, "
                f"got '{self.precision.data}'"
            )
        self.verify_planning_attributes()
        try:
            self.verify_shapes()
        except ShapeError as e:
            raise VerifyException(str(e)) from e

    def verify_planning_attributes(self) -> None:
        n = len(self.results)
        if self.live is not None:
            live = _ints(self.live)
            if len(live) != 2 * n or any(s > e for s, e in zip(live[::2], live[1::2], strict=True)):
                raise VerifyException(
                    f"live must hold one [start, end] pair with start <= end per result "
                    f"({n} results), got {list(live)}"
                )
        if isinstance(self.buffer, DenseArrayBase) and len(_ints(self.buffer)) != n:
            raise VerifyException(
                f"buffer must name one buffer per result ({n}), got {list(_ints(self.buffer))}"
            )

    def verify_shapes(self) -> None:
        """Raise ShapeError when operand and result types cannot be related."""


def _expect_shape(what: str, actual: Sequence[int], expected: Sequence[int]) -> None:
    if not shapes_equal(actual, expected):
        raise ShapeError(f"{what} has shape {fmt_shape(actual)}, expected {fmt_shape(expected)}")


def _expect_rank(what: str, shape: Sequence[int], rank: int, at_least: bool = False) -> None:
    ok = len(shape) >= rank if at_least else len(shape) == rank
    if not ok:
        bound = "at least " if at_least else ""
        raise ShapeError(f"{what} must have rank {bound}{rank}, got rank {len(shape)}")


def _expect_broadcasts_to(what: str, shape: Sequence[int], target: Sequence[int]) -> None:
    """`shape` must broadcast to `target` without growing it (a bias, a mask)."""
    if not shapes_equal(broadcast(shape, target), target):
        raise ShapeError(
            f"{what} of shape {fmt_shape(shape)} does not broadcast to {fmt_shape(target)}"
        )


def _expect_same_element(what: str, actual: Attribute, expected: Attribute) -> None:
    if actual != expected:
        raise ShapeError(f"{what} has element type {actual}, expected {expected}")


def _expect_integer(what: str, value: SSAValue) -> Attribute:
    """`value`'s element type, which must be a (non-boolean) integer."""
    element = element_type(value.type)
    if not isinstance(element, IntegerType) or is_bool(element):
        raise ShapeError(f"{what} must have an integer element type, got {element}")
    return element


def _expect_float(what: str, value: SSAValue) -> None:
    if not is_float(element_type(value.type)):
        raise ShapeError(f"{what} must have a float element type, got {element_type(value.type)}")


def _int(attr: IntegerAttr) -> int:
    return attr.value.data


def _ints(attr: DenseArrayBase) -> tuple[int, ...]:
    return tuple(attr.get_values())


class EffectfulWhen(MemoryEffect):
    """Pure unless the op carries the unit property `EFFECT_FLAG` (e.g. `has_side_effects`).

    Lets DCE and CSE treat generic ATen ops and eval-mode dropout as pure values.
    """

    @classmethod
    def get_effects(cls, op: Operation) -> set[EffectInstance] | None:
        flag = getattr(op, "EFFECT_FLAG", "")
        if flag and flag in op.properties:
            return {EffectInstance(MemoryEffectKind.WRITE)}
        return set()


# ----------------------------------------------------------------- elementwise


class UnaryOp(NpuOp, abc.ABC):
    """Elementwise op whose result has the operand's type."""

    T: ClassVar = VarConstraint("T", Tensor)
    input = operand_def(T)
    result = result_def(T)

    FLOAT_ONLY: ClassVar[bool] = True

    assembly_format = "$input attr-dict `:` type($result)"

    def __init__(self, input: SSAValue | Operation, attributes: dict[str, Attribute] | None = None):
        value = SSAValue.get(input)
        super().__init__(operands=[value], result_types=[value.type], properties=attributes or {})

    def verify_shapes(self) -> None:
        if self.FLOAT_ONLY:
            _expect_float("operand", self.input)


@irdl_op_definition
class NegOp(UnaryOp):
    name = "npu.neg"
    ATEN: ClassVar[str] = "aten.neg.default"
    FLOAT_ONLY: ClassVar[bool] = False
    traits = traits_def(Pure())


@irdl_op_definition
class AbsOp(UnaryOp):
    name = "npu.abs"
    ATEN: ClassVar[str] = "aten.abs.default"
    FLOAT_ONLY: ClassVar[bool] = False
    traits = traits_def(Pure())


@irdl_op_definition
class ExpOp(UnaryOp):
    name = "npu.exp"
    ATEN: ClassVar[str] = "aten.exp.default"
    traits = traits_def(Pure())


@irdl_op_definition
class LogOp(UnaryOp):
    name = "npu.log"
    ATEN: ClassVar[str] = "aten.log.default"
    traits = traits_def(Pure())


@irdl_op_definition
class SqrtOp(UnaryOp):
    name = "npu.sqrt"
    ATEN: ClassVar[str] = "aten.sqrt.default"
    traits = traits_def(Pure())


@irdl_op_definition
class RsqrtOp(UnaryOp):
    name = "npu.rsqrt"
    ATEN: ClassVar[str] = "aten.rsqrt.default"
    traits = traits_def(Pure())


@irdl_op_definition
class ReciprocalOp(UnaryOp):
    name = "npu.reciprocal"
    ATEN: ClassVar[str] = "aten.reciprocal.default"
    traits = traits_def(Pure())


@irdl_op_definition
class TanhOp(UnaryOp):
    name = "npu.tanh"
    ATEN: ClassVar[str] = "aten.tanh.default"
    traits = traits_def(Pure())


@irdl_op_definition
class SinOp(UnaryOp):
    name = "npu.sin"
    ATEN: ClassVar[str] = "aten.sin.default"
    traits = traits_def(Pure())


@irdl_op_definition
class CosOp(UnaryOp):
    name = "npu.cos"
    ATEN: ClassVar[str] = "aten.cos.default"
    traits = traits_def(Pure())


@irdl_op_definition
class ErfOp(UnaryOp):
    name = "npu.erf"
    ATEN: ClassVar[str] = "aten.erf.default"
    traits = traits_def(Pure())


@irdl_op_definition
class ReluOp(UnaryOp):
    name = "npu.relu"
    ATEN: ClassVar[str] = "aten.relu.default"
    FLOAT_ONLY: ClassVar[bool] = False
    traits = traits_def(Pure())


@irdl_op_definition
class SigmoidOp(UnaryOp):
    name = "npu.sigmoid"
    ATEN: ClassVar[str] = "aten.sigmoid.default"
    traits = traits_def(Pure())


@irdl_op_definition
class SiluOp(UnaryOp):
    name = "npu.silu"
    ATEN: ClassVar[str] = "aten.silu.default"
    traits = traits_def(Pure())


@irdl_op_definition
class GeluOp(UnaryOp):
    """`approximate` is "none" (erf form) or "tanh", as in `torch.nn.functional.gelu`."""

    name = "npu.gelu"
    ATEN: ClassVar[str] = "aten.gelu.default"
    approximate = opt_prop_def(StringAttr)
    traits = traits_def(Pure())

    def verify_shapes(self) -> None:
        super().verify_shapes()
        if self.approximate is not None and self.approximate.data not in ("none", "tanh"):
            raise ShapeError(f"approximate must be 'none' or 'tanh', got '{self.approximate.data}'")


@irdl_op_definition
class ContiguousOp(UnaryOp):
    """Materializes a dense row-major copy; layout optimization inserts and merges these."""

    name = "npu.contiguous"
    ATEN: ClassVar[str] = "aten.contiguous.default"
    FLOAT_ONLY: ClassVar[bool] = False
    traits = traits_def(Pure(), NpuCanonicalization())


@irdl_op_definition
class DropoutOp(UnaryOp):
    """Identity unless `train` is set; eval-mode dropout is removed by DCE."""

    name = "npu.dropout"
    ATEN: ClassVar[str] = "aten.dropout.default"
    EFFECT_FLAG: ClassVar[str] = "train"
    p = prop_def(FloatAttr)
    train = opt_prop_def(UnitAttr)
    traits = traits_def(EffectfulWhen())

    def verify_shapes(self) -> None:
        super().verify_shapes()
        if not 0.0 <= self.p.value.data <= 1.0:
            raise ShapeError(f"dropout probability must lie in [0, 1], got {self.p.value.data}")


class BinaryOp(NpuOp, abc.ABC):
    """Broadcasting elementwise op; the right side is a tensor or a `scalar` property."""

    lhs = operand_def()
    rhs = opt_operand_def(Tensor)
    scalar = opt_prop_def(FloatAttr | IntegerAttr)
    result = result_def(Tensor)

    assembly_format = "$lhs (`,` $rhs^)? attr-dict `:` functional-type(operands, results)"

    def verify_shapes(self) -> None:
        if (self.rhs is None) == (self.scalar is None):
            raise ShapeError("expected exactly one of a right-hand operand or a 'scalar' property")
        lhs_shape = shape_of(self.lhs.type)
        rhs_shape = shape_of(self.rhs.type) if self.rhs is not None else ()
        _expect_shape("result", shape_of(self.result.type), broadcast(lhs_shape, rhs_shape))
        self.verify_element_types()

    def verify_element_types(self) -> None:
        """Same-typed operands keep their type, except that ints may promote to float
        (true division, an int tensor times a float scalar), as ATen does."""
        lhs, result = element_type(self.lhs.type), element_type(self.result.type)
        if self.rhs is not None and element_type(self.rhs.type) != lhs:
            return
        if result != lhs and not (is_float(result) and not is_float(lhs)):
            raise ShapeError(f"result has element type {result}, expected {lhs}")


@irdl_op_definition
class AddOp(BinaryOp):
    name = "npu.add"
    ATEN: ClassVar[str] = "aten.add.Tensor"
    traits = traits_def(Pure(), NpuCanonicalization())


@irdl_op_definition
class SubOp(BinaryOp):
    name = "npu.sub"
    ATEN: ClassVar[str] = "aten.sub.Tensor"
    traits = traits_def(Pure(), NpuCanonicalization())


@irdl_op_definition
class MulOp(BinaryOp):
    name = "npu.mul"
    ATEN: ClassVar[str] = "aten.mul.Tensor"
    traits = traits_def(Pure(), NpuCanonicalization())


@irdl_op_definition
class DivOp(BinaryOp):
    name = "npu.div"
    ATEN: ClassVar[str] = "aten.div.Tensor"
    traits = traits_def(Pure())


@irdl_op_definition
class PowOp(BinaryOp):
    name = "npu.pow"
    ATEN: ClassVar[str] = "aten.pow.Tensor_Tensor"
    traits = traits_def(Pure())


@irdl_op_definition
class MaximumOp(BinaryOp):
    name = "npu.maximum"
    ATEN: ClassVar[str] = "aten.maximum.default"
    traits = traits_def(Pure())


@irdl_op_definition
class MinimumOp(BinaryOp):
    name = "npu.minimum"
    ATEN: ClassVar[str] = "aten.minimum.default"
    traits = traits_def(Pure())


class CompareOp(BinaryOp, abc.ABC):
    """Broadcasting comparison; the result is `i1`."""

    def verify_element_types(self) -> None:
        if not is_bool(element_type(self.result.type)):
            raise ShapeError(
                f"result must have element type i1, got {element_type(self.result.type)}"
            )


@irdl_op_definition
class EqOp(CompareOp):
    name = "npu.eq"
    ATEN: ClassVar[str] = "aten.eq.Tensor"
    traits = traits_def(Pure())


@irdl_op_definition
class NeOp(CompareOp):
    name = "npu.ne"
    ATEN: ClassVar[str] = "aten.ne.Tensor"
    traits = traits_def(Pure())


@irdl_op_definition
class LtOp(CompareOp):
    name = "npu.lt"
    ATEN: ClassVar[str] = "aten.lt.Tensor"
    traits = traits_def(Pure())


@irdl_op_definition
class LeOp(CompareOp):
    name = "npu.le"
    ATEN: ClassVar[str] = "aten.le.Tensor"
    traits = traits_def(Pure())


@irdl_op_definition
class GtOp(CompareOp):
    name = "npu.gt"
    ATEN: ClassVar[str] = "aten.gt.Tensor"
    traits = traits_def(Pure())


@irdl_op_definition
class GeOp(CompareOp):
    name = "npu.ge"
    ATEN: ClassVar[str] = "aten.ge.Tensor"
    traits = traits_def(Pure())


class LogicalOp(CompareOp, abc.ABC):
    """Broadcasting boolean op on `i1` tensors."""

    def verify_element_types(self) -> None:
        super().verify_element_types()
        operands = [self.lhs] + ([self.rhs] if self.rhs is not None else [])
        for i, operand in enumerate(operands):
            if not is_bool(element_type(operand.type)):
                raise ShapeError(
                    f"operand {i} must have element type i1, got {element_type(operand.type)}"
                )


@irdl_op_definition
class AndOp(LogicalOp):
    name = "npu.and"
    ATEN: ClassVar[str] = "aten.logical_and.default"
    traits = traits_def(Pure())


@irdl_op_definition
class OrOp(LogicalOp):
    name = "npu.or"
    ATEN: ClassVar[str] = "aten.logical_or.default"
    traits = traits_def(Pure())


@irdl_op_definition
class WhereOp(NpuOp):
    """`cond ? on_true : on_false`, broadcasting; `on_false` may be a `scalar` property."""

    name = "npu.where"
    ATEN: ClassVar[str] = "aten.where.self"
    cond = operand_def()
    on_true = operand_def()
    on_false = opt_operand_def(Tensor)
    scalar = opt_prop_def(FloatAttr | IntegerAttr)
    result = result_def(Tensor)
    traits = traits_def(Pure())

    assembly_format = (
        "$cond `,` $on_true (`,` $on_false^)? attr-dict `:` functional-type(operands, results)"
    )

    def verify_shapes(self) -> None:
        if (self.on_false is None) == (self.scalar is None):
            raise ShapeError("expected exactly one of an 'on_false' operand or a 'scalar' property")
        if not is_bool(element_type(self.cond.type)):
            raise ShapeError(
                f"condition must have element type i1, got {element_type(self.cond.type)}"
            )
        shapes = [shape_of(self.cond.type), shape_of(self.on_true.type)]
        if self.on_false is not None:
            shapes.append(shape_of(self.on_false.type))
            _expect_same_element(
                "on_false", element_type(self.on_false.type), element_type(self.on_true.type)
            )
        _expect_shape("result", shape_of(self.result.type), broadcast(*shapes))
        result, on_true = element_type(self.result.type), element_type(self.on_true.type)
        promoted = self.scalar is not None and is_float(result) and not is_float(on_true)
        if result != on_true and not promoted:
            raise ShapeError(f"result has element type {result}, expected {on_true}")


@irdl_op_definition
class CastOp(NpuOp):
    """Element type conversion (`aten.to.dtype`, `aten._to_copy`)."""

    name = "npu.cast"
    ATEN: ClassVar[str] = "aten.to.dtype"
    input = operand_def()
    result = result_def(Tensor)
    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_shapes(self) -> None:
        _expect_shape("result", shape_of(self.result.type), shape_of(self.input.type))


@irdl_op_definition
class ConstantOp(NpuOp):
    """A small literal tensor. Weights are never constants: they are function arguments."""

    name = "npu.constant"
    ATEN: ClassVar[str] = "aten.scalar_tensor.default"
    _T: ClassVar = VarConstraint("T", Tensor)
    value = prop_def(ParamAttrConstraint(DenseIntOrFPElementsAttr, (_T, base(Attribute))))
    result = result_def(_T)
    traits = traits_def(Pure(), ConstantLike())

    assembly_format = "attr-dict $value"

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(result_types=[value.get_type()], properties={"value": value})


# ---------------------------------------------------------------- contractions


@irdl_op_definition
class MatmulOp(NpuOp):
    """Batched matrix product with broadcast batch dims (`aten.matmul`, `bmm`, `mm`)."""

    name = "npu.matmul"
    ATEN: ClassVar[str] = "aten.matmul.default"
    lhs = operand_def()
    rhs = operand_def()
    result = result_def(Tensor)
    traits = traits_def(Pure())

    assembly_format = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)"

    def verify_shapes(self) -> None:
        a, b = shape_of(self.lhs.type), shape_of(self.rhs.type)
        _expect_rank("lhs", a, 2, at_least=True)
        _expect_rank("rhs", b, 2, at_least=True)
        if not dims_equal(a[-1], b[-2]):
            raise ShapeError(
                f"contraction dimensions differ: lhs {fmt_shape(a)} has K={a[-1]}, "
                f"rhs {fmt_shape(b)} has K={b[-2]}"
            )
        expected = (*broadcast(a[:-2], b[:-2]), a[-2], b[-1])
        _expect_shape("result", shape_of(self.result.type), expected)
        _expect_same_element("rhs", element_type(self.rhs.type), element_type(self.lhs.type))
        _expect_same_element("result", element_type(self.result.type), element_type(self.lhs.type))


def _verify_linear(
    x: SSAValue, w: SSAValue, b: SSAValue | None, result: SSAValue, weight_in_out: bool
) -> None:
    xs, ws = shape_of(x.type), shape_of(w.type)
    _expect_rank("input", xs, 1, at_least=True)
    _expect_rank("weight", ws, 2)
    k, n = (ws[0], ws[1]) if weight_in_out else (ws[1], ws[0])
    if not dims_equal(xs[-1], k):
        layout = "[in, out]" if weight_in_out else "[out, in]"
        raise ShapeError(
            f"input features {xs[-1]} do not match weight {fmt_shape(ws)} (layout {layout})"
        )
    out = (*xs[:-1], n)
    _expect_shape("result", shape_of(result.type), out)
    checked = [("weight", w), ("result", result)]
    if b is not None:
        _expect_broadcasts_to("bias", shape_of(b.type), out)
        checked.append(("bias", b))
    for what, v in checked:
        _expect_same_element(what, element_type(v.type), element_type(x.type))


@irdl_op_definition
class LinearOp(NpuOp):
    """`x @ w.T + b` with `w` laid out [out, in] (`aten.linear`)."""

    name = "npu.linear"
    ATEN: ClassVar[str] = "aten.linear.default"
    input = operand_def()
    weight = operand_def()
    bias = opt_operand_def(Tensor)
    result = result_def(Tensor)
    traits = traits_def(Pure())

    assembly_format = (
        "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)"
    )

    def verify_shapes(self) -> None:
        _verify_linear(self.input, self.weight, self.bias, self.result, weight_in_out=False)


@irdl_op_definition
class AddmmOp(NpuOp):
    """`bias + x @ w` with `w` laid out [in, out] (`aten.addmm`, GPT-2's Conv1D)."""

    name = "npu.addmm"
    ATEN: ClassVar[str] = "aten.addmm.default"
    bias = operand_def()
    input = operand_def()
    weight = operand_def()
    result = result_def(Tensor)
    traits = traits_def(Pure())

    assembly_format = (
        "$bias `,` $input `,` $weight attr-dict `:` functional-type(operands, results)"
    )

    def verify_shapes(self) -> None:
        _expect_rank("input", shape_of(self.input.type), 2)
        _verify_linear(self.input, self.weight, self.bias, self.result, weight_in_out=True)


@irdl_op_definition
class FusedLinearOp(NpuOp):
    """A linear layer with its activation fused; one NNFactory dispatch."""

    name = "npu.fused_linear"
    input = operand_def()
    weight = operand_def()
    bias = opt_operand_def(Tensor)
    activation = prop_def(StringAttr)
    weight_in_out = opt_prop_def(UnitAttr)
    """Set when the weight is laid out [in, out] (it came from an addmm)."""
    result = result_def(Tensor)
    traits = traits_def(Pure())

    assembly_format = (
        "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)"
    )

    def verify_shapes(self) -> None:
        if self.activation.data not in ACTIVATIONS:
            raise ShapeError(
                f"activation must be one of {', '.join(ACTIVATIONS)}, got '{self.activation.data}'"
            )
        _verify_linear(
            self.input, self.weight, self.bias, self.result, self.weight_in_out is not None
        )


WEIGHTED_LINEAR_OPS = (LinearOp, AddmmOp, FusedLinearOp)
"""Ops with a `weight` operand: the ones the weight precisions (`precision`) apply to."""


def weight_in_out(op: LinearOp | AddmmOp | FusedLinearOp) -> bool:
    """Whether the op's weight is stored [in, out] (addmm, and linears fused from one)
    rather than [out, in]: its output channels are then its columns."""
    return isinstance(op, AddmmOp) or (
        isinstance(op, FusedLinearOp) and op.weight_in_out is not None
    )


@irdl_op_definition
class SDPAOp(NpuOp):
    """softmax(q @ k^T * scale + mask) @ v over the last two dims (fused attention).

    `k`/`v` may have fewer heads than `q` (grouped-query attention) when the head
    count of `q` is a multiple of theirs. `is_causal` applies a lower-triangular mask.
    """

    name = "npu.sdpa"
    ATEN: ClassVar[str] = "aten.scaled_dot_product_attention.default"
    query = operand_def()
    key = operand_def()
    value = operand_def()
    mask = opt_operand_def(Tensor)
    scale = opt_prop_def(FloatAttr)
    is_causal = opt_prop_def(UnitAttr)
    result = result_def(Tensor)
    traits = traits_def(Pure())

    assembly_format = (
        "$query `,` $key `,` $value (`,` $mask^)? attr-dict `:` functional-type(operands, results)"
    )

    def verify_shapes(self) -> None:
        q, k, v = (shape_of(x.type) for x in (self.query, self.key, self.value))
        for what, s in (("query", q), ("key", k), ("value", v)):
            _expect_rank(what, s, 2, at_least=True)
        if not (len(q) == len(k) == len(v)):
            raise ShapeError(f"query, key and value ranks differ: {len(q)}, {len(k)}, {len(v)}")
        for what, s in (("key", k), ("value", v)):
            if not shapes_equal(s[:-3], q[:-3]):
                raise ShapeError(
                    f"{what} batch dims {fmt_shape(s[:-3])} differ from query's {fmt_shape(q[:-3])}"
                )
        if not dims_equal(q[-1], k[-1]):
            raise ShapeError(f"query head size {q[-1]} differs from key head size {k[-1]}")
        if not dims_equal(k[-2], v[-2]):
            raise ShapeError(f"key length {k[-2]} differs from value length {v[-2]}")
        if len(q) >= 3:
            hq, hk, hv = q[-3], k[-3], v[-3]
            if not dims_equal(hk, hv):
                raise ShapeError(f"key heads {hk} differ from value heads {hv}")
            if DYNAMIC not in (hq, hk) and (hk == 0 or hq % hk != 0):
                raise ShapeError(f"query heads {hq} are not a multiple of key/value heads {hk}")
        if self.mask is not None:
            _expect_broadcasts_to("mask", shape_of(self.mask.type), (*q[:-1], k[-2]))
            mask_element = element_type(self.mask.type)
            if not is_bool(mask_element) and mask_element != element_type(self.query.type):
                raise ShapeError(
                    f"mask must have element type i1 or the query's, got {mask_element}"
                )
        _expect_shape("result", shape_of(self.result.type), (*q[:-1], v[-1]))
        for what, x in (("key", self.key), ("value", self.value), ("result", self.result)):
            _expect_same_element(what, element_type(x.type), element_type(self.query.type))


# ------------------------------------------------------------------ reductions


@irdl_op_definition
class SoftmaxOp(NpuOp):
    name = "npu.softmax"
    ATEN: ClassVar[str] = "aten.softmax.int"
    T: ClassVar = VarConstraint("T", Tensor)
    input = operand_def(T)
    dim = prop_def(IntegerAttr)
    result = result_def(T)
    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($result)"

    def verify_shapes(self) -> None:
        _expect_float("operand", self.input)
        normalize_dim(_int(self.dim), len(shape_of(self.input.type)))


class NormOp(NpuOp, abc.ABC):
    """Normalization over the trailing `normalized_shape` dims, with optional affine params.

    Subclasses declare the operands themselves: xDSL orders operands leaf-class first.
    """

    normalized_shape = prop_def(DenseArrayBase)
    eps = prop_def(FloatAttr)

    def verify_shapes(self) -> None:
        x = self.operands[0]
        _expect_float("operand", x)
        norm = _ints(self.normalized_shape)
        shape = shape_of(x.type)
        if len(norm) > len(shape) or not shapes_equal(shape[len(shape) - len(norm) :], norm):
            raise ShapeError(
                f"normalized_shape {fmt_shape(norm)} is not a suffix of input shape "
                f"{fmt_shape(shape)}"
            )
        for what, v in self.affine_operands():
            _expect_shape(what, shape_of(v.type), norm)
        _expect_shape("result", shape_of(self.results[0].type), shape)
        _expect_same_element("result", element_type(self.results[0].type), element_type(x.type))
        for what, v in self.affine_operands():
            _expect_same_element(what, element_type(v.type), element_type(x.type))

    def affine_operands(self) -> list[tuple[str, SSAValue]]: ...


@irdl_op_definition
class LayerNormOp(NormOp):
    name = "npu.layer_norm"
    ATEN: ClassVar[str] = "aten.layer_norm.default"
    input = operand_def()
    weight = opt_operand_def(Tensor)
    bias = opt_operand_def(Tensor)
    result = result_def(Tensor)
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    traits = traits_def(Pure())

    assembly_format = (
        "$input (`weight` $weight^ `:` type($weight))? (`bias` $bias^ `:` type($bias))? "
        "attr-dict `:` type($input) `->` type($result)"
    )

    def affine_operands(self) -> list[tuple[str, SSAValue]]:
        pairs = (("weight", self.weight), ("bias", self.bias))
        return [(what, v) for what, v in pairs if v is not None]


@irdl_op_definition
class RMSNormOp(NormOp):
    name = "npu.rms_norm"
    ATEN: ClassVar[str] = "aten.rms_norm.default"
    input = operand_def()
    weight = opt_operand_def(Tensor)
    result = result_def(Tensor)
    traits = traits_def(Pure())

    assembly_format = (
        "$input (`weight` $weight^ `:` type($weight))? attr-dict `:` "
        "type($input) `->` type($result)"
    )

    def affine_operands(self) -> list[tuple[str, SSAValue]]:
        return [("weight", self.weight)] if self.weight is not None else []


class ReduceOp(NpuOp, abc.ABC):
    input = operand_def()
    dims = prop_def(DenseArrayBase)
    keepdim = opt_prop_def(UnitAttr)
    result = result_def(Tensor)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_shapes(self) -> None:
        x = shape_of(self.input.type)
        dims = _ints(self.dims) or tuple(range(len(x)))  # ATen: dim=[] reduces everything
        normalized = [normalize_dim(d, len(x)) for d in dims]
        reduced = set(normalized)
        if len(reduced) != len(normalized):
            raise ShapeError(f"dims {list(dims)} name a dimension more than once")
        self.verify_result_element()
        if self.keepdim is not None:
            expected = tuple(1 if i in reduced else d for i, d in enumerate(x))
        else:
            expected = tuple(d for i, d in enumerate(x) if i not in reduced)
        _expect_shape("result", shape_of(self.result.type), expected)

    def verify_result_element(self) -> None:
        _expect_same_element(
            "result", element_type(self.result.type), element_type(self.input.type)
        )


@irdl_op_definition
class MeanOp(ReduceOp):
    name = "npu.mean"
    ATEN: ClassVar[str] = "aten.mean.dim"
    traits = traits_def(Pure())

    def verify_shapes(self) -> None:
        _expect_float("operand", self.input)
        super().verify_shapes()


@irdl_op_definition
class SumOp(ReduceOp):
    name = "npu.sum"
    ATEN: ClassVar[str] = "aten.sum.dim_IntList"
    traits = traits_def(Pure())

    def verify_result_element(self) -> None:
        source = element_type(self.input.type)
        if is_float(source):
            super().verify_result_element()
        else:  # ATen sums integers and booleans in i64
            _expect_same_element("result", element_type(self.result.type), i64)


@irdl_op_definition
class EmbeddingOp(NpuOp):
    """Row gather `weight[indices]`."""

    name = "npu.embedding"
    ATEN: ClassVar[str] = "aten.embedding.default"
    weight = operand_def()
    indices = operand_def()
    result = result_def(Tensor)
    traits = traits_def(Pure())

    assembly_format = "$weight `,` $indices attr-dict `:` functional-type(operands, results)"

    def verify_shapes(self) -> None:
        w = shape_of(self.weight.type)
        _expect_rank("weight", w, 2)
        _expect_integer("indices", self.indices)
        _expect_shape("result", shape_of(self.result.type), (*shape_of(self.indices.type), w[1]))
        _expect_same_element(
            "result", element_type(self.result.type), element_type(self.weight.type)
        )


# ------------------------------------------------------------------ data movement


class ShapeOp(NpuOp, abc.ABC):
    """Ops that move or reinterpret data; the element type never changes."""

    input = operand_def()
    result = result_def(Tensor)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_shapes(self) -> None:
        _expect_same_element(
            "result", element_type(self.result.type), element_type(self.input.type)
        )
        self.verify_result_shape(shape_of(self.input.type), shape_of(self.result.type))

    def verify_result_shape(self, x: tuple[int, ...], r: tuple[int, ...]) -> None: ...


class ReshapeLikeOp(ShapeOp, abc.ABC):
    def verify_result_shape(self, x: tuple[int, ...], r: tuple[int, ...]) -> None:
        a, b = numel(x), numel(r)
        if a is not None and b is not None and a != b:
            raise ShapeError(
                f"cannot reshape {fmt_shape(x)} ({a} elements) to {fmt_shape(r)} ({b} elements)"
            )


@irdl_op_definition
class ViewOp(ReshapeLikeOp):
    name = "npu.view"
    ATEN: ClassVar[str] = "aten.view.default"
    traits = traits_def(Pure(), NpuCanonicalization())


@irdl_op_definition
class ReshapeOp(ReshapeLikeOp):
    name = "npu.reshape"
    ATEN: ClassVar[str] = "aten.reshape.default"
    traits = traits_def(Pure(), NpuCanonicalization())


@irdl_op_definition
class TransposeOp(ShapeOp):
    name = "npu.transpose"
    ATEN: ClassVar[str] = "aten.transpose.int"
    dim0 = prop_def(IntegerAttr)
    dim1 = prop_def(IntegerAttr)
    traits = traits_def(Pure(), NpuCanonicalization())

    def verify_result_shape(self, x: tuple[int, ...], r: tuple[int, ...]) -> None:
        d0, d1 = normalize_dim(_int(self.dim0), len(x)), normalize_dim(_int(self.dim1), len(x))
        if not x:  # ATen allows transposing a scalar: a no-op
            _expect_shape("result", r, x)
            return
        expected = list(x)
        expected[d0], expected[d1] = x[d1], x[d0]
        _expect_shape("result", r, expected)


@irdl_op_definition
class PermuteOp(ShapeOp):
    name = "npu.permute"
    ATEN: ClassVar[str] = "aten.permute.default"
    dims = prop_def(DenseArrayBase)
    traits = traits_def(Pure())

    def verify_result_shape(self, x: tuple[int, ...], r: tuple[int, ...]) -> None:
        dims = [normalize_dim(d, len(x)) for d in _ints(self.dims)]
        if sorted(dims) != list(range(len(x))):
            raise ShapeError(
                f"dims {list(_ints(self.dims))} are not a permutation of rank {len(x)}"
            )
        _expect_shape("result", r, [x[d] for d in dims])


@irdl_op_definition
class ExpandOp(ShapeOp):
    name = "npu.expand"
    ATEN: ClassVar[str] = "aten.expand.default"
    traits = traits_def(Pure())

    def verify_result_shape(self, x: tuple[int, ...], r: tuple[int, ...]) -> None:
        if len(r) < len(x):
            raise ShapeError(f"cannot expand rank {len(x)} to smaller rank {len(r)}")
        for i, d in enumerate(x):
            target = r[len(r) - len(x) + i]
            if d != 1 and not dims_equal(d, target):
                raise ShapeError(f"cannot expand {fmt_shape(x)} to {fmt_shape(r)}")


@irdl_op_definition
class SliceOp(ShapeOp):
    name = "npu.slice"
    ATEN: ClassVar[str] = "aten.slice.Tensor"
    dim = prop_def(IntegerAttr)
    start = prop_def(IntegerAttr)
    end = prop_def(IntegerAttr)
    step = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    def verify_result_shape(self, x: tuple[int, ...], r: tuple[int, ...]) -> None:
        _expect_rank("input", x, 1, at_least=True)
        d = normalize_dim(_int(self.dim), len(x))
        if _int(self.step) < 1:
            raise ShapeError(f"step must be positive, got {_int(self.step)}")
        expected = list(x)
        expected[d] = slice_length(x[d], _int(self.start), _int(self.end), _int(self.step))
        _expect_shape("result", r, expected)


@irdl_op_definition
class UnsqueezeOp(ShapeOp):
    name = "npu.unsqueeze"
    ATEN: ClassVar[str] = "aten.unsqueeze.default"
    dim = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    def verify_result_shape(self, x: tuple[int, ...], r: tuple[int, ...]) -> None:
        d = normalize_dim(_int(self.dim), len(x) + 1)
        _expect_shape("result", r, (*x[:d], 1, *x[d:]))


@irdl_op_definition
class SqueezeOp(ShapeOp):
    name = "npu.squeeze"
    ATEN: ClassVar[str] = "aten.squeeze.dim"
    dim = prop_def(IntegerAttr)
    traits = traits_def(Pure())

    def verify_result_shape(self, x: tuple[int, ...], r: tuple[int, ...]) -> None:
        d = normalize_dim(_int(self.dim), len(x))
        squeezed = x[:d] + x[d + 1 :]
        if x and x[d] == DYNAMIC and shapes_equal(r, squeezed):
            return  # a `?` dimension may turn out to be 1
        _expect_shape("result", r, squeezed if x and x[d] == 1 else x)


@irdl_op_definition
class CatOp(NpuOp):
    name = "npu.cat"
    ATEN: ClassVar[str] = "aten.cat.default"
    inputs = var_operand_def(Tensor)
    dim = prop_def(IntegerAttr)
    result = result_def(Tensor)
    traits = traits_def(Pure())

    assembly_format = "$inputs attr-dict `:` functional-type(operands, results)"

    def verify_shapes(self) -> None:
        if not self.inputs:
            raise ShapeError("expected at least one input")
        first = shape_of(self.inputs[0].type)
        if not first:
            raise ShapeError("zero-dimensional tensors cannot be concatenated")
        d = normalize_dim(_int(self.dim), len(first))
        total = 0
        for i, x in enumerate(self.inputs):
            s = shape_of(x.type)
            if len(s) != len(first) or not shapes_equal(
                s[:d] + s[d + 1 :], first[:d] + first[d + 1 :]
            ):
                raise ShapeError(
                    f"input {i} has shape {fmt_shape(s)}, incompatible with {fmt_shape(first)} "
                    f"outside dimension {d}"
                )
            _expect_same_element(
                f"input {i}", element_type(x.type), element_type(self.inputs[0].type)
            )
            total = DYNAMIC if DYNAMIC in (total, s[d]) else total + s[d]
        _expect_shape("result", shape_of(self.result.type), (*first[:d], total, *first[d + 1 :]))
        _expect_same_element(
            "result", element_type(self.result.type), element_type(self.inputs[0].type)
        )


@irdl_op_definition
class SplitOp(NpuOp):
    """Splits along `dim` into pieces of `split_sizes` (also `chunk`)."""

    name = "npu.split"
    ATEN: ClassVar[str] = "aten.split_with_sizes.default"
    input = operand_def()
    dim = prop_def(IntegerAttr)
    split_sizes = prop_def(DenseArrayBase)
    results_ = var_result_def(Tensor)
    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `->` type($results_)"

    def verify_shapes(self) -> None:
        x = shape_of(self.input.type)
        _expect_rank("input", x, 1, at_least=True)
        d = normalize_dim(_int(self.dim), len(x))
        sizes = _ints(self.split_sizes)
        for i, r in enumerate(self.results_):
            _expect_same_element(f"result {i}", element_type(r.type), element_type(self.input.type))
        if len(sizes) != len(self.results_):
            raise ShapeError(f"{len(sizes)} split sizes for {len(self.results_)} results")
        if x[d] != DYNAMIC and sum(sizes) != x[d]:
            raise ShapeError(
                f"split sizes {list(sizes)} do not add up to dimension {d} size {x[d]}"
            )
        for i, (size, r) in enumerate(zip(sizes, self.results_, strict=True)):
            _expect_shape(f"result {i}", shape_of(r.type), (*x[:d], size, *x[d + 1 :]))


# ------------------------------------------------------------------- state


class WritesState(MemoryEffect):
    """Writes its first operand (caller-owned state) in place: never removed, merged or
    folded, and ordered after every other reader of that operand (the pass that creates
    it checks there is none)."""

    @classmethod
    def get_effects(cls, op: Operation) -> set[EffectInstance] | None:
        return {EffectInstance(MemoryEffectKind.WRITE, op.operands[0])}


@irdl_op_definition
class CacheUpdateOp(NpuOp):
    """Rows `positions` (along `dim`) of the state `cache` become `update`, in place.

    `cache` is a function argument that the function writes back (`npu.writes`) and
    that nothing else reads; the result is that argument's own storage after the write.
    So a KV-cache step costs the new rows (O(rows), not a copy of the cache), the
    executor skips the write-back copy, and liveness gives the result no buffer of its
    own (it views caller-owned storage, so linear scan never reuses it for a temporary).
    npu-update-state-in-place creates it from a functional `aten.index_copy`, whose
    semantics it keeps: `cache.index_copy(dim, positions, update)`.
    """

    name = "npu.cache_update"
    ATEN: ClassVar[str] = "aten.index_copy.default"
    T: ClassVar = VarConstraint("T", Tensor)
    cache = operand_def(T)
    positions = operand_def()
    update = operand_def()
    dim = prop_def(IntegerAttr)
    result = result_def(T)
    traits = traits_def(WritesState())

    assembly_format = (
        "$cache `[` $positions `]` `=` $update attr-dict `:` type($cache) `,` "
        "type($positions) `,` type($update)"
    )

    def verify_shapes(self) -> None:
        if not isinstance(self.cache, BlockArgument):
            raise ShapeError("cache must be a function argument (state the caller owns)")
        cache = shape_of(self.cache.type)
        _expect_rank("cache", cache, 1, at_least=True)
        d = normalize_dim(_int(self.dim), len(cache))
        positions = shape_of(self.positions.type)
        _expect_rank("positions", positions, 1)
        _expect_integer("positions", self.positions)
        _expect_shape(
            "update", shape_of(self.update.type), (*cache[:d], positions[0], *cache[d + 1 :])
        )
        _expect_same_element(
            "update", element_type(self.update.type), element_type(self.cache.type)
        )


@irdl_op_definition
class RunStartOp(NpuOp):
    """The first of `positions`, which must be consecutive and lie in [0, capacity).

    What `npu.cached_attention` reads for where a step's rows go: the check runs on the
    CPU before any graph writes a cache, and fails the call (not the cache) otherwise.
    """

    name = "npu.run_start"
    positions = operand_def()
    capacity = prop_def(IntegerAttr)
    result = result_def()
    traits = traits_def(Pure())

    assembly_format = "$positions attr-dict `:` type($positions) `->` type($result)"

    def verify_shapes(self) -> None:
        positions = shape_of(self.positions.type)
        _expect_rank("positions", positions, 1)
        idx = _expect_integer("positions", self.positions)
        _expect_shape("result", shape_of(self.result.type), (1,))
        _expect_same_element("result", element_type(self.result.type), idx)
        if DYNAMIC not in positions and positions[0] > _int(self.capacity):
            raise ShapeError(
                f"{positions[0]} positions do not fit a capacity of {_int(self.capacity)}"
            )


class WritesCaches(MemoryEffect):
    """Writes its `key_cache` and `value_cache` operands (caller-owned state) in place."""

    @classmethod
    def get_effects(cls, op: Operation) -> set[EffectInstance] | None:
        assert isinstance(op, CachedAttentionOp)
        return {
            EffectInstance(MemoryEffectKind.WRITE, op.key_cache),
            EffectInstance(MemoryEffectKind.WRITE, op.value_cache),
        }


@irdl_op_definition
class CachedAttentionOp(NpuOp):
    """A static-cache attention step: rows `start`.. of both caches (dim 2) become `key`
    and `value`, in place, then causal attention of `query` over the written caches,
    query row p seeing cache rows up to `start + p`, and with a `window` W only the
    last W of those (rows after `start + p - W`: transformers' sliding window).

    Shapes: query [1, H, P, D], key and value [1, Hk, P, D], caches [1, Hk, C, D],
    `start` [1] (an `npu.run_start`), H a multiple of Hk (grouped-query attention).
    npu-fuse-cached-attention creates it from two `npu.cache_update`s and the
    `npu.sdpa` that reads them under that causal mask; the caches are function
    arguments the function writes back as they are.
    """

    name = "npu.cached_attention"
    query = operand_def()
    key = operand_def()
    value = operand_def()
    key_cache = operand_def()
    value_cache = operand_def()
    start = operand_def()
    scale = prop_def(FloatAttr)
    window = opt_prop_def(IntegerAttr)
    result = result_def()
    traits = traits_def(WritesCaches())

    @property
    def window_size(self) -> int:
        """The sliding window in positions, 0 for none."""
        return self.window.value.data if self.window is not None else 0

    assembly_format = (
        "$query `,` $key `,` $value `into` $key_cache `,` $value_cache `at` $start attr-dict "
        "`:` functional-type(operands, results)"
    )

    def verify_shapes(self) -> None:
        q, k, v = (shape_of(x.type) for x in (self.query, self.key, self.value))
        kc, vc = shape_of(self.key_cache.type), shape_of(self.value_cache.type)
        for what, s in (
            ("query", q),
            ("key", k),
            ("value", v),
            ("key_cache", kc),
            ("value_cache", vc),
        ):
            _expect_rank(what, s, 4)
        for what, cache in (("key_cache", self.key_cache), ("value_cache", self.value_cache)):
            if not isinstance(cache, BlockArgument):
                raise ShapeError(f"{what} must be a function argument (state the caller owns)")
        _expect_shape("value_cache", vc, kc)
        _expect_shape("key", k, (1, kc[1], q[2], kc[3]))
        _expect_shape("value", v, k)
        _expect_shape("query", q, (1, q[1], k[2], k[3]))
        if kc[1] == 0 or q[1] % kc[1] != 0:
            raise ShapeError(f"query heads {q[1]} are not a multiple of key/value heads {kc[1]}")
        if q[2] > kc[2]:
            raise ShapeError(f"{q[2]} rows do not fit a cache of {kc[2]}")
        _expect_shape("start", shape_of(self.start.type), (1,))
        for what, x in (
            ("key", self.key),
            ("value", self.value),
            ("key_cache", self.key_cache),
            ("value_cache", self.value_cache),
        ):
            _expect_same_element(what, element_type(x.type), element_type(self.query.type))
        _expect_shape("result", shape_of(self.result.type), q)
        if self.window is not None and self.window.value.data < 1:
            raise ShapeError(f"window must be at least 1, got {self.window.value.data}")


# ------------------------------------------------------------------- generic


@irdl_attr_definition
class OperandRefAttr(ParametrizedAttribute):
    """Marks the place of tensor operand `index` among a generic op's ATen arguments."""

    name = "npu.operand"
    index: IntAttr

    def __init__(self, index: int):
        super().__init__(IntAttr(index))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return (IntAttr(parser.parse_integer(allow_negative=False)),)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(str(self.index.data))


@irdl_op_definition
class GenericOp(NpuOp):
    """Any ATen op without a named counterpart; executes as a CPU callable.

    Custom syntax: `npu.generic "aten.cumsum.default"(%x, 1 : i64) : (T) -> T`.
    Positional arguments mix SSA operands and attributes (`unit` is None, `[...]` a
    list); keyword arguments go in `kwargs {...}`.
    """

    name = "npu.generic"
    EFFECT_FLAG: ClassVar[str] = "has_side_effects"
    traits = traits_def(EffectfulWhen())
    opcode_attr = prop_def(StringAttr, prop_name="opcode")
    args = prop_def(ArrayAttr)
    kwargs = opt_prop_def(DictionaryAttr)
    has_side_effects = opt_prop_def(UnitAttr)
    inputs = var_operand_def(Tensor)
    outputs = var_result_def(Tensor)

    def __init__(
        self,
        opcode: str,
        inputs: Sequence[SSAValue],
        args: Sequence[Attribute],
        result_types: Sequence[Attribute],
        kwargs: dict[str, Attribute] | None = None,
        has_side_effects: bool = False,
    ):
        properties: dict[str, Attribute] = {"opcode": StringAttr(opcode), "args": ArrayAttr(args)}
        if kwargs:
            properties["kwargs"] = DictionaryAttr(kwargs)
        if has_side_effects:
            properties["has_side_effects"] = UnitAttr()
        super().__init__(operands=[inputs], result_types=[result_types], properties=properties)

    @property
    def opcode(self) -> str:
        return self.opcode_attr.data

    def verify_shapes(self) -> None:
        seen = _operand_refs(self.args)
        if seen != list(range(len(self.inputs))):
            raise ShapeError(
                f"arguments must reference operands 0..{len(self.inputs) - 1} once each, in "
                f"order; they reference {seen}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> GenericOp:
        opcode = parser.parse_str_literal(" for the ATen opcode")
        operands: list[UnresolvedOperand] = []

        def parse_arg() -> Attribute:
            if (operand := parser.parse_optional_unresolved_operand()) is not None:
                operands.append(operand)
                return OperandRefAttr(len(operands) - 1)
            if parser.parse_optional_punctuation("[") is not None:
                if parser.parse_optional_punctuation("]") is not None:
                    return ArrayAttr([])
                items = [parse_arg()]
                while parser.parse_optional_punctuation(",") is not None:
                    items.append(parse_arg())
                parser.parse_punctuation("]")
                return ArrayAttr(items)
            return parser.parse_attribute()

        args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parse_arg, "argument")
        properties: dict[str, Attribute] = {"opcode": StringAttr(opcode), "args": ArrayAttr(args)}
        if parser.parse_optional_keyword("kwargs") is not None:
            kwargs = parser.parse_attribute()
            if not isinstance(kwargs, DictionaryAttr):
                parser.raise_error("expected a dictionary of keyword arguments after 'kwargs'")
            properties["kwargs"] = kwargs
        if parser.parse_optional_keyword("side_effects") is not None:
            properties["has_side_effects"] = UnitAttr()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_start = parser.pos
        func_type = parser.parse_function_type()
        if len(func_type.inputs) != len(operands):
            parser.raise_error(
                f"{len(operands)} operands but {len(func_type.inputs)} operand types",
                type_start,
                parser.pos,
            )
        values = parser.resolve_operands(operands, func_type.inputs.data, parser.pos)
        op = cls.create(
            operands=values,
            result_types=func_type.outputs.data,
            properties=properties,
            attributes=attributes,
        )
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.opcode)

        def print_arg(arg: Attribute) -> None:
            if isinstance(arg, OperandRefAttr):
                printer.print_operand(self.inputs[arg.index.data])
            elif isinstance(arg, ArrayAttr):
                printer.print_string("[")
                printer.print_list(arg.data, print_arg)
                printer.print_string("]")
            else:
                printer.print_attribute(arg)

        printer.print_string("(")
        printer.print_list(self.args.data, print_arg)
        printer.print_string(")")
        if self.kwargs is not None:
            printer.print_string(" kwargs ")
            printer.print_attribute(self.kwargs)
        if self.has_side_effects is not None:
            printer.print_string(" side_effects")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_function_type(self.inputs.types, self.outputs.types)


ATEN_VIEW_OPCODES = frozenset(
    {
        "aten.alias.default",
        "aten.as_strided.default",
        "aten.chunk.default",
        "aten.detach.default",
        "aten.diagonal.default",
        "aten.expand.default",
        "aten.expand_as.default",
        "aten.movedim.int",
        "aten.narrow.default",
        "aten.permute.default",
        "aten.select.int",
        "aten.slice.Tensor",
        "aten.split.Tensor",
        "aten.split_with_sizes.default",
        "aten.squeeze.dim",
        "aten.t.default",
        "aten.transpose.int",
        "aten.unbind.int",
        "aten.unflatten.int",
        "aten.unfold.default",
        "aten.unsqueeze.default",
        "aten.view.default",
        "aten.view.dtype",
        "aten.view_as.default",
        "aten.view_as_real.default",
    }
)
"""ATen opcodes whose results are views of their first tensor operand (storage shared):
liveness extends the root's lifetime over them and layout derives their strides."""


def _operand_refs(attr: Attribute) -> list[int]:
    if isinstance(attr, OperandRefAttr):
        return [attr.index.data]
    if isinstance(attr, ArrayAttr):
        return [i for item in attr.data for i in _operand_refs(item)]
    return []


# ------------------------------------------------------------------- dialect

NAMED_OPS: tuple[type[NpuOp], ...] = (
    NegOp, AbsOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp, TanhOp, SinOp, CosOp, ErfOp,
    ReluOp, SigmoidOp, SiluOp, GeluOp, ContiguousOp, DropoutOp,
    AddOp, SubOp, MulOp, DivOp, PowOp, MaximumOp, MinimumOp,
    EqOp, NeOp, LtOp, LeOp, GtOp, GeOp, AndOp, OrOp, WhereOp, CastOp, ConstantOp,
    MatmulOp, LinearOp, AddmmOp, FusedLinearOp, SDPAOp,
    SoftmaxOp, LayerNormOp, RMSNormOp, MeanOp, SumOp, EmbeddingOp,
    ViewOp, ReshapeOp, TransposeOp, PermuteOp, ExpandOp, SliceOp, UnsqueezeOp, SqueezeOp,
    CatOp, SplitOp, CacheUpdateOp, RunStartOp, CachedAttentionOp,
)  # fmt: skip

NPU = Dialect("npu", [*NAMED_OPS, GenericOp], [OperandRefAttr])

__all__ = ["NAMED_OPS", "NPU", "BoolAttr", "FunctionType", "GenericOp", "NpuOp", "i64"]
