"""npu-fold-constants: algebraic identities, identity data movement, and compile-time
evaluation of ops whose inputs are all constants.

torch.export leaves many no-ops in the graph: `x + 0` after `arange`, `to(dtype)` to
the dtype a tensor already has, `alias`, views to the shape a tensor already has,
and view chains from decomposed `reshape`s. Causal masks are built at run time from
`arange`/`unsqueeze`/`le`/`new_ones`, although nothing but the sequence length (fixed
at capture) feeds them. This pass removes the no-ops and evaluates the constant parts
with the same CPU kernels the executor uses, so the folded values are bit-identical
to what the run would have computed. Results larger than `max_elements` stay
computed at run time: weights and big masks are never materialized into the IR.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

import torch
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from forge.dialects import npu
from forge.dialects.dtypes import TORCH_DTYPES
from forge.dialects.shapes import DYNAMIC, normalize_dim, numel, shape_of
from forge.target.cpu_kernels import NoKernel, cpu_kernel
from forge.transforms.matchers import (
    constant_of,
    replace_and_erase_producers,
    scalar_value,
    splat_value,
)
from forge.transforms.npu_optimize_layout import view_root
from forge.transforms.pattern_pass import NpuPatternPass, side_effect_free

# ----------------------------------------------------------------------- helpers


def _forward(op: Operation, value: SSAValue, rewriter: PatternRewriter) -> None:
    """Replace `op`'s single result by an existing `value` of the same type, and drop
    what fed only it: a fold must not leave a dead constant or view for npu-dce."""
    replace_and_erase_producers(op, [], [value], rewriter)


def _is_static(value_type: Attribute) -> bool:
    return isinstance(value_type, TensorType) and DYNAMIC not in value_type.get_shape()


# ------------------------------------------------------------- identity arithmetic


class FoldIdentityArithmetic(RewritePattern):
    """`x + 0`, `x - 0`, `x * 1`, `x / 1`, `pow(x, 1)`, and `0 + x`, `1 * x`.

    The neutral element is a `scalar` property or a splat `npu.constant`. The result
    type must equal the kept operand's type, so an identity that broadcasts to a
    larger shape or promotes ints to float is not an identity here.
    """

    RIGHT_NEUTRAL: ClassVar[dict[type[npu.BinaryOp], float]] = {
        npu.AddOp: 0.0,
        npu.SubOp: 0.0,
        npu.MulOp: 1.0,
        npu.DivOp: 1.0,
        npu.PowOp: 1.0,
    }
    LEFT_NEUTRAL: ClassVar[dict[type[npu.BinaryOp], float]] = {
        npu.AddOp: 0.0,
        npu.MulOp: 1.0,
    }

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.BinaryOp, rewriter: PatternRewriter) -> None:
        neutral = self.RIGHT_NEUTRAL.get(type(op))
        if neutral is None:
            return
        if op.scalar is not None:
            if scalar_value(op.scalar) == neutral and op.result.type == op.lhs.type:
                _forward(op, op.lhs, rewriter)
            return
        assert op.rhs is not None
        if splat_value(op.rhs) == neutral and op.result.type == op.lhs.type:
            _forward(op, op.lhs, rewriter)
            return
        left_neutral = self.LEFT_NEUTRAL.get(type(op))
        if (
            left_neutral is not None
            and splat_value(op.lhs) == left_neutral
            and op.result.type == op.rhs.type
        ):
            _forward(op, op.rhs, rewriter)


# ---------------------------------------------------------- identity data movement


class FoldIdentityReshape(RewritePattern):
    """A view, reshape, expand or squeeze to the type its input already has is the input.

    For these ops equal types mean equal shapes, and equal shapes mean nothing moved,
    except that `expand` may grow a `?` that is 1 at run time into a larger `?`.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self,
        op: npu.ViewOp | npu.ReshapeOp | npu.ExpandOp | npu.SqueezeOp,
        rewriter: PatternRewriter,
    ) -> None:
        if op.result.type != op.input.type:
            return
        if isinstance(op, npu.ExpandOp) and not _is_static(op.input.type):
            return
        _forward(op, op.input, rewriter)


class FoldIdentitySlice(RewritePattern):
    """A slice that keeps the whole (static) dimension, e.g. `x[:, -8:]` of a length-8 dim.

    With a step of at least 1, keeping all n elements of a dimension of size n means
    taking them all, in order. A `?` dimension proves nothing: it is left alone.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.SliceOp, rewriter: PatternRewriter) -> None:
        if op.result.type != op.input.type:
            return
        shape = shape_of(op.input.type)
        dim = normalize_dim(op.dim.value.data, len(shape))
        if shape[dim] == DYNAMIC:
            return
        _forward(op, op.input, rewriter)


class FoldEmptyConcatOperands(RewritePattern):
    """`cat(x, y)` where `y` has no elements along the concatenated dimension is `x`.

    Partial rotary embeddings write `cat(rotated, x[..., rotary_dim:])`, and when the
    rotary part is the whole head the second slice is empty (e.g. `tensor<1x4x16x0xf32>`).
    NNFactory cannot build an empty tensor, so such a graph would fall back to the CPU
    whole; dropping the empty operand makes the empty slice dead, and it disappears.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.CatOp, rewriter: PatternRewriter) -> None:
        rank = len(shape_of(op.result.type))
        dim = normalize_dim(op.dim.value.data, rank)
        kept = [x for x in op.inputs if shape_of(x.type)[dim] != 0]
        if len(kept) == len(op.inputs) or not kept:
            return
        if len(kept) == 1:
            _forward(op, kept[0], rewriter)
            return
        cat = npu.CatOp.create(
            operands=kept, result_types=[op.result.type], properties=dict(op.properties)
        )
        replace_and_erase_producers(op, [cat], [cat.result], rewriter)


def _moves_data(shape: Sequence[int], permutation: Sequence[int]) -> bool:
    """Whether permuting a tensor of `shape` reorders its elements.

    Size-1 dimensions carry no data: the permutation is a no-op when the other
    dimensions keep their relative order.
    """
    kept = [d for d in permutation if shape[d] != 1]
    return kept != sorted(kept)


class FoldIdentityTranspose(RewritePattern):
    """`transpose(x, d, d)`, or a swap of two size-1 dims: the data order is unchanged.

    Equal types alone are not enough: transposing a 8x8 tensor keeps its type.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.TransposeOp, rewriter: PatternRewriter) -> None:
        if op.result.type != op.input.type:
            return
        shape = shape_of(op.input.type)
        if shape:
            d0 = normalize_dim(op.dim0.value.data, len(shape))
            d1 = normalize_dim(op.dim1.value.data, len(shape))
            permutation = list(range(len(shape)))
            permutation[d0], permutation[d1] = d1, d0
            if _moves_data(shape, permutation):
                return
        _forward(op, op.input, rewriter)


class FoldIdentityPermute(RewritePattern):
    """A permutation that only moves size-1 dims among themselves (or nothing at all)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.PermuteOp, rewriter: PatternRewriter) -> None:
        if op.result.type != op.input.type:
            return
        shape = shape_of(op.input.type)
        permutation = [normalize_dim(d, len(shape)) for d in op.dims.get_values()]
        if _moves_data(shape, permutation):
            return
        _forward(op, op.input, rewriter)


class FoldIdentityCast(RewritePattern):
    """A cast to the type the input already has (`to(float32)` of a float32 tensor)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.CastOp, rewriter: PatternRewriter) -> None:
        if op.result.type != op.input.type:
            return
        _forward(op, op.input, rewriter)


class FoldIdentityGeneric(RewritePattern):
    """ATen ops that return their input's value: `alias`, `detach`, `lift_fresh_copy`,
    and `clone` that keeps the memory format. A `clone` into the contiguous format of a
    value the graph computes is `npu.contiguous` (the layout pass then keeps or drops
    the copy, and NNFactory runs it inside the graph instead of a CPU hop per layer, as
    HF attention's `.transpose(1, 2).contiguous()` exports in the static-cache programs).

    The IR is functional (nothing writes through an alias), so a copy or an alias of a
    value is that value. State is the exception: a function argument or a cache that
    `npu.cache_update` writes in place, so a contiguous clone of those stays a copy.
    """

    IDENTITIES: ClassVar[frozenset[str]] = frozenset(
        {
            "aten.alias.default",
            "aten.detach.default",
            "aten.lift_fresh_copy.default",
            "aten.clone.default",
        }
    )

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.GenericOp, rewriter: PatternRewriter) -> None:
        if op.opcode not in self.IDENTITIES or op.has_side_effects is not None:
            return
        if len(op.inputs) != 1 or len(op.outputs) != 1:
            return
        if op.outputs[0].type != op.inputs[0].type:
            return
        kwargs = op.kwargs.data if op.kwargs is not None else {}
        memory_format = kwargs.get("memory_format")
        layout = "preserve_format" if memory_format is None else getattr(memory_format, "data", "")
        if layout == "preserve_format":
            _forward(op, op.inputs[0], rewriter)
        elif layout == "contiguous_format" and op.opcode == "aten.clone.default":
            if _is_state(op.inputs[0]):
                return
            rewriter.replace(op, npu.ContiguousOp(op.inputs[0]))


class FoldFunctionalCopy(RewritePattern):
    """`aten.copy(self, src)`, functionalized `self.copy_(src)`, returns `src`'s values
    in `self`'s shape and dtype; when those are `src`'s own, it is `src`. HF's static
    cache exports one per layer per step where each layer keeps its own
    `cumulative_length` (Forge's wrapper sets one shared length); forwarding them lets
    CSE see the layers' identical position arithmetic."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.GenericOp, rewriter: PatternRewriter) -> None:
        if op.opcode != "aten.copy.default" or op.has_side_effects is not None:
            return
        if len(op.inputs) != 2 or len(op.outputs) != 1:
            return
        kwargs = op.kwargs.data if op.kwargs is not None else {}
        if set(kwargs) - {"non_blocking"}:
            return
        source = op.inputs[1]
        if op.outputs[0].type != source.type or not _is_static(source.type):
            return
        _forward(op, source, rewriter)


def _is_state(value: SSAValue) -> bool:
    """`value` is (a view of) a function argument or of a cache updated in place."""
    root = view_root(value).owner
    return not isinstance(root, Operation) or isinstance(root, npu.CacheUpdateOp)


# --------------------------------------------------------------- reshape chains


class FoldReshapeChain(RewritePattern):
    """`view(view(x))` is one `view(x)`; with a `reshape` on either side, one `reshape(x)`.

    A view keeps the contiguous stride chunks of its input, so a shape reachable by two
    views is reachable by one: the merged view is valid wherever the chain was. A
    reshape may have copied, so the merged op stays a reshape (which views when it can).
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.ViewOp | npu.ReshapeOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if not isinstance(inner, npu.ViewOp | npu.ReshapeOp):
            return
        source = inner.input
        if op.result.type == source.type:
            _forward(op, source, rewriter)
            return
        both_views = isinstance(op, npu.ViewOp) and isinstance(inner, npu.ViewOp)
        merged_type = npu.ViewOp if both_views else npu.ReshapeOp
        merged = merged_type.create(operands=[source], result_types=[op.result.type])
        replace_and_erase_producers(op, [merged], merged.results, rewriter)


class FoldUnsqueezeSqueeze(RewritePattern):
    """`squeeze(unsqueeze(x, d), d)` is `x`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.SqueezeOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if not isinstance(inner, npu.UnsqueezeOp):
            return
        rank = len(shape_of(op.input.type))
        if normalize_dim(op.dim.value.data, rank) != normalize_dim(inner.dim.value.data, rank):
            return
        if op.result.type != inner.input.type:
            return
        _forward(op, inner.input, rewriter)


class FoldSqueezeUnsqueeze(RewritePattern):
    """`unsqueeze(squeeze(x, d), d)` is `x` when the squeeze removed a size-1 dim.

    (LFM2's depthwise conv weight goes through this round trip.) When the squeeze kept
    the dim, the unsqueeze adds one and the types differ.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.UnsqueezeOp, rewriter: PatternRewriter) -> None:
        inner = op.input.owner
        if not isinstance(inner, npu.SqueezeOp) or op.result.type != inner.input.type:
            return
        rank = len(shape_of(op.result.type))
        if normalize_dim(op.dim.value.data, rank) != normalize_dim(inner.dim.value.data, rank):
            return
        _forward(op, inner.input, rewriter)


# ------------------------------------------------------------ constant evaluation

_NONDETERMINISTIC = ("rand", "normal", "bernoulli", "uniform", "multinomial", "poisson", "empty")
"""Substrings of ATen op names whose results differ from run to run (or are garbage)."""

_VALUE_INDEPENDENT = frozenset(
    {
        "aten.new_ones.default",
        "aten.new_zeros.default",
        "aten.new_full.default",
        "aten.ones_like.default",
        "aten.zeros_like.default",
        "aten.full_like.default",
    }
)
"""Generic ops that read only their input's type, never its values."""


def _nondeterministic(op: npu.GenericOp) -> bool:
    name = op.opcode.split(".")[1] if op.opcode.count(".") == 2 else op.opcode
    return op.has_side_effects is not None or any(w in name for w in _NONDETERMINISTIC)


def is_deterministic(op: Operation) -> bool:
    """Whether `op` computes the same results from the same operand values, with no
    side effect (the executor's tables of CPU results rely on it)."""
    if isinstance(op, npu.GenericOp) and _nondeterministic(op):
        return False
    return side_effect_free(op)


@cache
def _candidate(cls: type[Operation]) -> bool:
    """An `npu` op other than `npu.constant`; once per class (isinstance on the
    ABC-based op classes is slow, and this is asked of every op)."""
    return issubclass(cls, npu.NpuOp) and not issubclass(cls, npu.ConstantOp)


def _evaluable(op: Operation) -> bool:
    """Whether `op` computes the same value every run from what the IR already holds:
    its operands are constants, or (a generic op) it reads only their types.

    Cheap structural checks come first: this runs on every op of the module, and most
    stop at their first operand that is not a constant."""
    if not op.results or not _candidate(type(op)):
        return False
    operands = op.operands
    generic = isinstance(op, npu.GenericOp)
    if operands and all(constant_of(v) is not None for v in operands):
        if generic and _nondeterministic(op):
            return False
        return (generic and op.opcode in _VALUE_INDEPENDENT) or side_effect_free(op)
    if not generic:
        return False
    value_independent = op.opcode in _VALUE_INDEPENDENT
    if (operands and not value_independent) or _nondeterministic(op):
        return False
    if value_independent:
        return all(_is_static(v.type) for v in operands)
    return side_effect_free(op)  # no operands, e.g. `arange`


def _operand_tensor(value: SSAValue) -> torch.Tensor:
    """A constant operand's value. Any other operand (of a value-independent op) only
    lends its type: a broadcast zero of that type stands in, without allocating it."""
    constant = constant_of(value)
    if constant is not None:
        return cpu_kernel(constant)()
    assert isinstance(value.type, TensorType)
    dtype = TORCH_DTYPES[value.type.get_element_type()]
    return torch.zeros((), dtype=dtype).expand(list(value.type.get_shape()))


def _dense(result_type: TensorType, tensor: torch.Tensor) -> DenseIntOrFPElementsAttr | None:
    """`tensor` as the value of an `npu.constant` of `result_type`, or None when it
    does not have exactly that type or cannot round-trip through text."""
    element = result_type.get_element_type()
    if TORCH_DTYPES.get(element) != tensor.dtype or tensor.device.type != "cpu":
        return None
    if tuple(tensor.shape) != tuple(result_type.get_shape()):
        return None
    flat = tensor.detach().reshape(-1)
    if flat.numel() == 0:
        return None
    if tensor.dtype.is_floating_point:
        values = [float(v) for v in flat.tolist()]
        if not all(math.isfinite(v) for v in values):
            return None  # xDSL prints inf/nan as hex and parses that back as an integer
    else:
        values = [int(v) for v in flat.tolist()]
    if values.count(values[0]) == len(values):
        values = values[:1]  # stored once, printed as a splat `dense<v>`
    return DenseIntOrFPElementsAttr.from_list(result_type, values)


@dataclass
class FoldConstantComputation(RewritePattern):
    """An op whose inputs are all `npu.constant`s (or that has no inputs, like `arange`)
    becomes an `npu.constant`, when every result has at most `max_elements` elements.

    It runs the op's own CPU kernel, so the constant is exactly what the op would have
    computed at run time.
    """

    max_elements: int = 4096

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _evaluable(op):
            return
        result_types: list[TensorType] = []
        for result in op.results:
            if not _is_static(result.type):
                return
            assert isinstance(result.type, TensorType)
            count = numel(result.type.get_shape())
            if count is None or count > self.max_elements:
                return
            result_types.append(result.type)
        if not all(t.get_element_type() in TORCH_DTYPES for t in result_types):
            return
        values = self.evaluate(op)
        if values is None or len(values) != len(result_types):
            return
        attrs = [_dense(t, v) for t, v in zip(result_types, values, strict=True)]
        if any(a is None for a in attrs):
            return
        constants = [npu.ConstantOp(a) for a in attrs if a is not None]
        replace_and_erase_producers(op, constants, [c.result for c in constants], rewriter)

    @staticmethod
    def evaluate(op: Operation) -> list[torch.Tensor] | None:
        """The op's results computed on the CPU, or None if it cannot run here."""
        try:
            kernel = cpu_kernel(op)
            with torch.no_grad():
                out = kernel(*(_operand_tensor(v) for v in op.operands))
        except (NoKernel, RuntimeError, TypeError, ValueError, IndexError, KeyError):
            return None
        outputs = list(out) if isinstance(out, list | tuple) else [out]
        if not all(isinstance(t, torch.Tensor) for t in outputs):
            return None
        return outputs


# ------------------------------------------------------------------------- pass


@dataclass(frozen=True)
class NpuFoldConstantsPass(NpuPatternPass):
    """Identities first (they are cheap and expose constants), evaluation last."""

    name = "npu-fold-constants"

    max_elements: int = 4096
    """Largest result, in elements, that evaluation may turn into an `npu.constant`."""

    def patterns(self) -> Sequence[RewritePattern]:
        return (
            FoldIdentityArithmetic(),
            FoldIdentityReshape(),
            FoldIdentitySlice(),
            FoldEmptyConcatOperands(),
            FoldIdentityTranspose(),
            FoldIdentityPermute(),
            FoldIdentityCast(),
            FoldIdentityGeneric(),
            FoldFunctionalCopy(),
            FoldReshapeChain(),
            FoldUnsqueezeSqueeze(),
            FoldSqueezeUnsqueeze(),
            FoldConstantComputation(self.max_elements),
        )
