"""npu-optimize-layout: give every NPU op the memory layout it wants, with as few copies
as possible.

NNFactory graphs read dense row-major inputs, but ATen's view ops (`transpose`,
`permute`, `expand`, `slice`, `split`) hand out strided aliases. So a strided value that
feeds an op which wants a dense input gets an `npu.contiguous` (a value-preserving copy),
and copies that buy nothing are merged or dropped.

Three parts:

- `PREFERRED_LAYOUT`: per op class (or, for `npu.generic`, per ATen opcode) the layout
  each operand must have. Shape ops accept any layout; CPU-only generic ops too (ATen
  kernels read strides).
- `Contiguity`: a static stride analysis. Block arguments (inputs, weights) and results of
  compute ops are dense; view ops derive their result's strides from their input's
  exactly as ATen does (`view`/`reshape` follow ATen's `computeStride`, and `reshape`
  copies when no view exists), so "is this value contiguous" is answered precisely,
  not by op name: a transpose of a size-1 dim, a slice of the leading dim or a
  same-shape expand stay contiguous.
- Four rewrite patterns: `EnforcePreferredLayout` inserts copies (one per value, placed
  right after the value's definition so every consumer can share it),
  `DropRedundantContiguous` removes copies of already-dense values (which also merges
  `contiguous(contiguous(x))`), `DropCopyBeforeReshape` removes a copy that only
  reshapes read (a reshape of a strided value copies by itself),
  `MergeDuplicateContiguous` keeps one copy per value.

`layout` selects the policy:

- `contiguous`: every operand the table marks `contiguous` is made dense.
- `auto` (default): copies only data that enters from torch. A strided view of a value
  that an NPU op computes becomes a Reshape/Transpose node inside the same NNFactory
  graph, so it needs no copy of its own; a strided view of a function argument (an
  input or a weight) does, since NNFactory reads that buffer as it is. And a consumer
  that handles the strides itself gets none: a transposed-B matmul,
  `matmul(a, transpose(b, -1, -2))`, runs natively as `matmul(a, b, False, True)` when
  `b` is dense; if `b` is strided, `b` is copied instead of its transpose.
- `channels-last`: like `auto`, and in addition the input of a rank-4 convolution
  (`npu.generic "aten.conv2d.default"`) is given NHWC strides, expressed as
  `permute(contiguous(permute(x, [0, 2, 3, 1])), [0, 3, 1, 2])` (same logical NCHW value,
  channels-last memory). The transformer models Forge targets have no 2-D
  convolutions, so there it behaves exactly like `auto`.

The paper also inserts a copy after every embedding; an embedding writes a fresh dense
tensor, so the analysis never finds that copy needed and none is inserted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from xdsl.dialects.builtin import DenseArrayBase, TensorType, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from forge.dialects import npu
from forge.dialects.shapes import DYNAMIC, element_type, normalize_dim, shape_of
from forge.transforms.matchers import swapped_last_two_dims
from forge.transforms.pattern_pass import NpuPatternPass

CONTIGUOUS = "contiguous"
"""The operand must be dense row-major."""
ANY = "any"
"""The operand may have any strides."""
CHANNELS_LAST = "channels-last"
"""With layout=channels-last, a rank-4 operand should have NHWC strides; otherwise: any."""

LAYOUTS = ("auto", CONTIGUOUS, CHANNELS_LAST)

LayoutClass = type[npu.NpuOp] | str

PREFERRED_LAYOUT: dict[LayoutClass, tuple[str, ...]] = {
    # NPU compute (NNFactory reads dense row-major buffers).
    npu.MatmulOp: (CONTIGUOUS, CONTIGUOUS),
    npu.LinearOp: (CONTIGUOUS, CONTIGUOUS, CONTIGUOUS),
    npu.AddmmOp: (CONTIGUOUS, CONTIGUOUS, CONTIGUOUS),
    npu.FusedLinearOp: (CONTIGUOUS, CONTIGUOUS, CONTIGUOUS),
    npu.SDPAOp: (CONTIGUOUS, CONTIGUOUS, CONTIGUOUS, CONTIGUOUS),
    npu.SoftmaxOp: (CONTIGUOUS,),
    npu.NormOp: (CONTIGUOUS,),  # layer_norm, rms_norm: input and affine parameters
    npu.ReduceOp: (CONTIGUOUS,),  # mean, sum
    npu.EmbeddingOp: (CONTIGUOUS, CONTIGUOUS),
    npu.UnaryOp: (CONTIGUOUS,),  # elementwise
    npu.BinaryOp: (CONTIGUOUS,),  # elementwise, comparisons, logical ops
    npu.WhereOp: (CONTIGUOUS,),
    npu.CastOp: (CONTIGUOUS,),
    # The copy itself, the eval-mode identity and data movement: any layout.
    npu.ContiguousOp: (ANY,),
    npu.DropoutOp: (ANY,),
    npu.ShapeOp: (ANY,),  # view, reshape, transpose, permute, expand, slice, (un)squeeze
    npu.CatOp: (ANY,),
    npu.SplitOp: (ANY,),
    # Generic ops run as ATen kernels on the CPU and read strides (default: any).
    "aten.conv2d.default": (CHANNELS_LAST, ANY, ANY),
}
"""Op class (matched along the MRO) or generic opcode -> layout per operand; the last
entry repeats for further operands. Ops not listed accept any layout."""


def preferred_layouts(op: Operation) -> tuple[str, ...]:
    """The layout `PREFERRED_LAYOUT` asks for, one per operand of `op`.

    Looked up once per op class (per opcode for `npu.generic`) and operand count: the
    layout pass asks it of every op in every sweep."""
    kind: LayoutClass | type[Operation] = op.opcode if isinstance(op, npu.GenericOp) else type(op)
    return _preferred(kind, len(op.operands))


@cache
def _preferred(kind: LayoutClass | type[Operation], operands: int) -> tuple[str, ...]:
    wants: tuple[str, ...] = ()
    if isinstance(kind, str):
        wants = PREFERRED_LAYOUT.get(kind, ())
    else:
        for cls in kind.__mro__:
            if cls in PREFERRED_LAYOUT:
                wants = PREFERRED_LAYOUT[cls]
                break
    if not wants:
        return (ANY,) * operands
    return tuple(wants[min(i, len(wants) - 1)] for i in range(operands))


# ----------------------------------------------------------------- contiguity analysis

Strides = tuple[int, ...]

ATEN_VIEW_OPCODES = npu.ATEN_VIEW_OPCODES
"""Generic opcodes whose results alias their input (the importer names most views; these
are the fallbacks). `aten.alias` keeps the strides; the others count as unknown strides,
hence not contiguous."""

ATEN_DENSE_RESULTS: tuple[type[npu.NpuOp], ...] = (
    npu.MatmulOp,
    npu.LinearOp,
    npu.AddmmOp,
    npu.FusedLinearOp,
    npu.EmbeddingOp,
    npu.LayerNormOp,
    npu.RMSNormOp,
    npu.SoftmaxOp,
    npu.ContiguousOp,
    npu.ConstantOp,
)
"""Ops whose ATen kernel writes a dense result whatever its inputs' strides (checked
against torch). Other ATen ops (pointwise, where, casts, sdpa's flash path, generic
kernels) may keep a strided input's layout, so their result counts as dense in ATen
only when all their inputs are."""


def row_major(shape: Sequence[int]) -> Strides | None:
    """Dense row-major strides of a static shape (None when a dim is dynamic)."""
    if DYNAMIC in shape:
        return None
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def is_row_major(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """ATen's `is_contiguous()`: size-1 dims may have any stride, empty tensors are dense."""
    if 0 in shape:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def is_channels_last(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """ATen's `is_contiguous(memory_format=torch.channels_last)` for a rank-4 tensor."""
    order = (0, 2, 3, 1)
    return is_row_major([shape[d] for d in order], [strides[d] for d in order])


def view_strides(old: Sequence[int], strides: Sequence[int], new: Sequence[int]) -> Strides | None:
    """ATen's `computeStride`: the strides `view(new)` gives a tensor of shape `old` with
    `strides`, or None when no view exists (`view` raises, `reshape` copies)."""
    if not old:
        return (1,) * len(new)
    if 0 in old:
        return row_major(new) if tuple(old) != tuple(new) else tuple(strides)
    result = [0] * len(new)
    view_d = len(new) - 1
    chunk_base = strides[-1]
    tensor_numel = view_numel = 1
    for tensor_d in range(len(old) - 1, -1, -1):
        tensor_numel *= old[tensor_d]
        chunk_ends = tensor_d == 0 or (
            old[tensor_d - 1] != 1 and strides[tensor_d - 1] != tensor_numel * chunk_base
        )
        if not chunk_ends:
            continue
        while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
            result[view_d] = view_numel * chunk_base
            view_numel *= new[view_d]
            view_d -= 1
        if view_numel != tensor_numel:
            return None
        if tensor_d > 0:
            chunk_base = strides[tensor_d - 1]
            tensor_numel = view_numel = 1
    return tuple(result) if view_d == -1 else None


def expand_strides(old: Sequence[int], strides: Sequence[int], new: Sequence[int]) -> Strides:
    """ATen's `inferExpandGeometry`: broadcast dims (and new leading dims) get stride 0."""
    result = [0] * len(new)
    for i in range(len(new) - 1, -1, -1):
        d = i - (len(new) - len(old))
        if d >= 0:
            result[i] = strides[d] if old[d] == new[i] else 0
        elif new[i] == 1:  # a new size-1 dim: any stride; ATen picks the next one's extent
            result[i] = result[i + 1] * new[i + 1] if i + 1 < len(new) else 1
    return tuple(result)


class Contiguity:
    """Static strides of SSA values, following ATen's view semantics.

    With `aten=False` (the NPU contract, used to decide where copies go) every op that
    is not a view writes a dense result, as NNFactory does. With `aten=True` (used before
    removing a copy, which must stay valid for the ATen kernels that run CPU ops and the
    reference executor) only `ATEN_DENSE_RESULTS` are dense unconditionally; other ops
    are dense when all their inputs are. Dense under `aten=True` implies dense under
    `aten=False`, so removing and inserting copies never undo each other.

    Results are memoized, so one instance answers only while the IR does not change
    (`SharedContiguity` keeps one for a pass run's patterns, dropped at each rewrite).
    Memo keys are ids: values and ops outlive the memo, as nothing is erased under it.
    """

    def __init__(self, aten: bool = False):
        self.aten = aten
        self._fresh: dict[int, bool] = {}
        self._contiguous: dict[int, bool] = {}
        self._strides: dict[int, Strides | None] = {}

    def is_contiguous(self, value: SSAValue) -> bool:
        known = self._contiguous.get(id(value))
        if known is None:
            known = self._contiguous[id(value)] = self._is_contiguous(value)
        return known

    def strides(self, value: SSAValue) -> Strides | None:
        """The strides ATen gives `value`, or None when they are not known statically."""
        key = id(value)
        if key not in self._strides:
            self._strides[key] = self._derive_strides(value)
        return self._strides[key]

    def _is_contiguous(self, value: SSAValue) -> bool:
        op = value.owner
        if not isinstance(op, Operation) or self.writes_dense(op):
            return True
        keeps_density = isinstance(op, npu.ReshapeLikeOp | npu.UnsqueezeOp | npu.SqueezeOp)
        if keeps_density and self.is_contiguous(op.input):  # holds for dynamic shapes too
            return True
        strides = self.strides(value)
        return strides is not None and is_row_major(shape_of(value.type), strides)

    def _derive_strides(self, value: SSAValue) -> Strides | None:
        shape = shape_of(value.type)
        op = value.owner
        if not isinstance(op, Operation) or self.writes_dense(op):
            return row_major(shape)
        source = op.operands[0] if op.operands else None
        if source is None or DYNAMIC in shape or DYNAMIC in shape_of(source.type):
            return None
        x, s = shape_of(source.type), self.strides(source)
        if s is None:
            return None
        return _derived_strides(op, x, s, shape)

    def writes_dense(self, op: Operation) -> bool:
        """Whether `op` writes a fresh dense result rather than aliasing its input."""
        kind = _result_kind(type(op))
        if kind is _ALIAS or (kind is _GENERIC and op.opcode in ATEN_VIEW_OPCODES):
            return False
        if not self.aten or kind is _DENSE_IN_ATEN:
            return True
        key = id(op)
        if key not in self._fresh:
            self._fresh[key] = False  # cycle guard; IR in SSA form has none
            self._fresh[key] = all(self.is_contiguous(v) for v in op.operands)
        return self._fresh[key]


_ALIAS, _GENERIC, _DENSE_IN_ATEN, _OTHER = range(4)


@cache
def _result_kind(cls: type[Operation]) -> int:
    """What an op class's results are: views (`_ALIAS`), up to the opcode (`_GENERIC`),
    dense under ATen's rules too (`_DENSE_IN_ATEN`), or dense on the NPU only. Decided
    once per class: isinstance on the ABC-based op classes is slow, and the analysis
    asks it of every value."""
    if issubclass(cls, npu.ShapeOp | npu.SplitOp):
        return _ALIAS
    if issubclass(cls, npu.GenericOp):
        return _GENERIC
    if issubclass(cls, ATEN_DENSE_RESULTS):
        return _DENSE_IN_ATEN
    return _OTHER


class SharedContiguity:
    """Both analyses (NPU contract and ATen rules) for the patterns of one pass run:
    built when first asked after a change and dropped by the pattern that changes the
    IR, so queries between two rewrites share their memo. A sweep that rewrites
    nothing (every pass run ends with one) then derives each value's strides once,
    not once per consumer."""

    def __init__(self) -> None:
        self._npu: Contiguity | None = None
        self._aten: Contiguity | None = None

    @property
    def npu(self) -> Contiguity:
        if self._npu is None:
            self._npu = Contiguity()
        return self._npu

    @property
    def aten(self) -> Contiguity:
        if self._aten is None:
            self._aten = Contiguity(aten=True)
        return self._aten

    def changed(self) -> None:
        """The IR changed: every memoized answer may be stale."""
        self._npu = self._aten = None

    def copied_into(self, consumer: Operation) -> None:
        """An operand of `consumer` now reads a new dense copy, and nothing else changed.
        Under the NPU contract only a view's strides follow its operands, so the NPU
        memo stands unless `consumer` is a view; under ATen's rules density follows
        operands, so that memo goes."""
        self._aten = None
        if self._npu is not None and not self._npu.writes_dense(consumer):
            self._npu = None


def _derived_strides(
    op: Operation, x: tuple[int, ...], s: Strides, r: tuple[int, ...]
) -> Strides | None:
    """The strides of a view op's result of shape `r` from its input's shape and strides."""
    match op:
        case npu.ViewOp():
            return view_strides(x, s, r)
        case npu.ReshapeOp():
            return view_strides(x, s, r) or row_major(r)  # no view: reshape copies
        case npu.TransposeOp() if x:
            d0, d1 = (
                normalize_dim(op.dim0.value.data, len(x)),
                normalize_dim(op.dim1.value.data, len(x)),
            )
            swapped = list(s)
            swapped[d0], swapped[d1] = s[d1], s[d0]
            return tuple(swapped)
        case npu.TransposeOp():
            return s
        case npu.PermuteOp():
            return tuple(s[normalize_dim(d, len(x))] for d in op.dims.get_values())
        case npu.ExpandOp():
            return expand_strides(x, s, r)
        case npu.SliceOp():
            d = normalize_dim(op.dim.value.data, len(x))
            return (*s[:d], s[d] * op.step.value.data, *s[d + 1 :])
        case npu.SplitOp():
            return s
        case npu.UnsqueezeOp():
            d = normalize_dim(op.dim.value.data, len(x) + 1)
            inserted = 1 if d >= len(x) else x[d] * s[d]
            return (*s[:d], inserted, *s[d:])
        case npu.SqueezeOp():
            d = normalize_dim(op.dim.value.data, len(x))
            return (*s[:d], *s[d + 1 :]) if x and x[d] == 1 else s
        case npu.GenericOp() if op.opcode == "aten.alias.default":
            return s
    return None


# ------------------------------------------------------------------------- patterns


def view_root(value: SSAValue) -> SSAValue:
    """The value a chain of view ops starts from."""
    while isinstance(op := value.owner, Operation) and (
        isinstance(op, npu.ShapeOp | npu.SplitOp)
        or (isinstance(op, npu.GenericOp) and op.opcode in ATEN_VIEW_OPCODES)
    ):
        if not op.operands:
            break
        value = op.operands[0]
    return value


def _contiguous_copy(value: SSAValue, user: Operation, rewriter: PatternRewriter) -> SSAValue:
    """A dense copy of `value` that dominates `user`: an existing one, or a new one placed
    right after `value`'s definition so that later consumers share it."""
    for use in value.uses:
        other = use.operation
        if isinstance(other, npu.ContiguousOp) and other.is_before_in_block(user):
            return other.result
    copy = npu.ContiguousOp(value)
    if isinstance(value.owner, Operation):
        rewriter.insert(copy, InsertPoint.after(value.owner))
    else:
        assert isinstance(value.owner, Block)
        rewriter.insert(copy, InsertPoint.at_start(value.owner))
    return copy.result


def _use_instead(
    user: Operation, index: int, old: SSAValue, new: SSAValue, rewriter: PatternRewriter
) -> None:
    """Make operand `index` of `user` read `new` (same value, other layout)."""
    rewriter.replace_uses_with_if(
        old, new, lambda use: use.operation is user and use.index == index
    )


class SharesContiguity:
    """What this pass's patterns have in common: they read strides through `analyses`,
    which the pass run's patterns share (`SharedContiguity`), and tell it when they
    change the IR."""

    def __init__(self, analyses: SharedContiguity | None = None):
        self.analyses = analyses or SharedContiguity()


class EnforcePreferredLayout(SharesContiguity, RewritePattern):
    """Give each operand the layout `PREFERRED_LAYOUT` asks for, under the `layout` policy."""

    def __init__(self, layout: str, analyses: SharedContiguity | None = None):
        super().__init__(analyses)
        self.layout = layout

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, npu.NpuOp):
            return
        for index, (operand, want) in enumerate(
            zip(op.operands, preferred_layouts(op), strict=True)
        ):
            if want == CONTIGUOUS:
                self.make_contiguous(op, index, operand, rewriter)
            elif want == CHANNELS_LAST and self.layout == CHANNELS_LAST:
                self.make_channels_last(op, index, operand, rewriter)

    def make_contiguous(
        self, op: Operation, index: int, operand: SSAValue, rewriter: PatternRewriter
    ) -> None:
        if self.layout != CONTIGUOUS and not isinstance(view_root(operand).owner, Block):
            return  # a view of an NPU-computed value: free inside the NNFactory graph
        if self.analyses.npu.is_contiguous(operand):  # after the cheap test above: most stop
            return
        native_b = self.layout != CONTIGUOUS and isinstance(op, npu.MatmulOp) and index == 1
        if native_b and (transposed := swapped_last_two_dims(operand)) is not None:
            # NNFactory runs matmul(a, b, False, True): copy b if needed, never b^T.
            view, b = transposed
            if not self.analyses.npu.is_contiguous(b):
                _use_instead(view, 0, b, _contiguous_copy(b, view, rewriter), rewriter)
                self.analyses.copied_into(view)
            return
        _use_instead(op, index, operand, _contiguous_copy(operand, op, rewriter), rewriter)
        self.analyses.copied_into(op)

    def make_channels_last(
        self, op: Operation, index: int, operand: SSAValue, rewriter: PatternRewriter
    ) -> None:
        """NCHW value, NHWC memory: permute to NHWC, copy dense, permute back (a view)."""
        shape = shape_of(operand.type)
        if len(shape) != 4:
            return
        strides = self.analyses.npu.strides(operand)
        if strides is None or is_channels_last(shape, strides):
            return
        nhwc_type = TensorType(element_type(operand.type), [shape[0], shape[2], shape[3], shape[1]])
        to_nhwc = npu.PermuteOp.create(
            operands=[operand],
            result_types=[nhwc_type],
            properties={"dims": DenseArrayBase.from_list(i64, [0, 2, 3, 1])},
        )
        dense = npu.ContiguousOp(to_nhwc.result)
        to_nchw = npu.PermuteOp.create(
            operands=[dense.result],
            result_types=[operand.type],
            properties={"dims": DenseArrayBase.from_list(i64, [0, 3, 1, 2])},
        )
        rewriter.insert([to_nhwc, dense, to_nchw], InsertPoint.before(op))
        _use_instead(op, index, operand, to_nchw.result, rewriter)
        self.analyses.changed()


class DropRedundantContiguous(SharesContiguity, RewritePattern):
    """`contiguous(x)` of an already-dense `x` is `x`: ATen returns `x` itself, and on the
    NPU the copy would be a wasted dispatch. Covers `contiguous(contiguous(x))` too.

    Density is judged by ATen's rules (`Contiguity(aten=True)`), so a copy a later
    `npu.view` relies on is never removed."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.ContiguousOp, rewriter: PatternRewriter) -> None:
        if not self.analyses.aten.is_contiguous(op.input):
            return
        rewriter.replace(op, [], [op.input])
        self.analyses.changed()


class DropCopyBeforeReshape(SharesContiguity, RewritePattern):
    """`reshape(contiguous(x))` is `reshape(x)`: ATen's reshape copies by itself when `x`
    has no view of the new shape, so a copy whose only readers are reshapes is wasted."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.ContiguousOp, rewriter: PatternRewriter) -> None:
        users = [use.operation for use in op.result.uses]
        if not users or not all(isinstance(u, npu.ReshapeOp) for u in users):
            return
        rewriter.replace(op, [], [op.input])
        self.analyses.changed()


class MergeDuplicateContiguous(SharesContiguity, RewritePattern):
    """Several copies of one value are one copy: keep the one earliest in the block."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.ContiguousOp, rewriter: PatternRewriter) -> None:
        for use in op.input.uses:
            other = use.operation
            if other is op or not isinstance(other, npu.ContiguousOp):
                continue
            if other.is_before_in_block(op):
                rewriter.replace(op, [], [other.result])
                self.analyses.changed()
                return


@dataclass(frozen=True)
class NpuOptimizeLayoutPass(NpuPatternPass):
    name = "npu-optimize-layout"

    layout: str = "auto"

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got '{self.layout}'")

    def patterns(self) -> Sequence[RewritePattern]:
        analyses = SharedContiguity()
        return (
            DropRedundantContiguous(analyses),
            DropCopyBeforeReshape(analyses),
            MergeDuplicateContiguous(analyses),
            EnforcePreferredLayout(self.layout, analyses),
        )
