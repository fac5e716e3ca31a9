"""npu-fuse-attention: the eager attention chain becomes one `npu.sdpa`.

Models exported at the ATen level spell attention out as

    scores = q @ transpose(k, -2, -1)          (k possibly repeat_kv'd for GQA)
    scores = scores * scale | scores / d       (either side of the mask)
    scores = scores + mask | where(keep, scores, min)
    probs  = softmax(scores, dim=-1)
    probs  = dropout(probs) (eval) | cast(probs) (identity)
    out    = probs @ v                          (v possibly repeat_kv'd)

Each step materializes an S x L tensor per head; one `npu.sdpa` computes the same
thing in one NNFactory dispatch (or one fused CPU kernel) and lets the kernel do
the head grouping instead of copying K/V `n_rep` times.

Why each guard exists:

- Every value between the two matmuls must have exactly one user: another user
  (an assert, a debugging probe, a second consumer) still needs the intermediate,
  so fusing would compute attention twice. Run `npu-dce` first to drop provably
  dead users such as `aten._assert_tensor_metadata`.
- softmax must run over the last dim and K must be transposed on its last two
  dims: that is what `sdpa` computes, nothing else is.
- Shapes must line up the way `npu.sdpa`'s verifier demands (no batch
  broadcasting between q and k, kv heads dividing q heads, a mask that broadcasts
  to the score shape without growing it), and all shapes must be static.
- `scale` is always set explicitly (1.0 when the graph has none), because sdpa's
  default is 1/sqrt(head_dim).

Masks. Additive masks are passed through as sdpa's float `mask`. A boolean
`where(keep, scores, fill)` is *not* mapped to sdpa's boolean mask: sdpa fills
with -inf, so a fully masked row becomes NaN where eager gives a uniform row.
Instead the pass materializes the additive mask `where(keep, 0, fill)`: then
`scores * scale + mask` equals `fill` exactly at masked positions whenever `fill`
absorbs any finite score (its half-ulp is far above any attention logit), which
holds for -inf and for the dtype minimum of f32/bf16/f64 (half-ulp 2^103 in f32),
so even fully masked rows match eager. A `fill` that does not absorb scores
(e.g. -1e4, or f16's -65504) is left alone. Several mask steps are combined in
their original order; a scale applied after a mask also scales the mask.

`is_causal` is never set: the masks in these graphs combine causality with the
padding `attention_mask`, and a lower-triangular mask can't be proven from
the IR in general, so the mask is kept as an operand.

After fusing, the ops between the two matmuls are erased (each had only the one
user), and so are the consumed producers (K's transpose, a scale folded in from
q or k, the repeat_kv expansions) once nothing else uses them; everything else is
left for `npu-dce`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    TensorType,
    f64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from forge.dialects import npu
from forge.dialects.shapes import (
    DYNAMIC,
    ShapeError,
    broadcast,
    element_type,
    is_float,
    normalize_dim,
    shape_of,
)
from forge.transforms.matchers import (
    erase_unused,
    scalar_value,
    single_use,
    splat_value,
    swapped_last_two_dims,
)
from forge.transforms.pattern_pass import NpuPatternPass

# ----------------------------------------------------------------- helpers


def _static(shape: Sequence[int]) -> bool:
    return DYNAMIC not in shape


def _fits(shape: Sequence[int], target: Sequence[int]) -> bool:
    """`shape` broadcasts to `target` without growing it."""
    try:
        return broadcast(shape, target) == tuple(target)
    except ShapeError:
        return False


def _scalar_factor(op: Operation, x: SSAValue) -> float | None:
    """The factor `op` multiplies `x` by, when `op` is a mul/div of `x` by a scalar
    (a `scalar` property or a splat constant), keeping `x`'s type."""
    if not isinstance(op, npu.MulOp | npu.DivOp) or op.result.type != x.type:
        return None
    if op.rhs is None:
        c = scalar_value(op.scalar) if op.lhs is x else None
    elif op.lhs is x:
        c = splat_value(op.rhs)
    elif isinstance(op, npu.MulOp) and op.rhs is x:
        c = splat_value(op.lhs)
    else:
        c = None
    if c is None or not math.isfinite(c):
        return None
    if isinstance(op, npu.DivOp):
        return 1.0 / c if c != 0.0 else None
    return c


# Mantissa bits (with the implicit one) and the largest finite value per float type.
_FLOAT_FORMATS: dict[type, tuple[int, float]] = {
    Float16Type: (11, 65504.0),
    BFloat16Type: (8, 3.3895313892515355e38),
    Float32Type: (24, 3.4028234663852886e38),
    Float64Type: (53, 1.7976931348623157e308),
}

_LARGEST_LOGIT_EXPONENT = 60
"""A fill absorbs the scores when its half-ulp is at least 2**60: then any logit below
2**59 in magnitude (attention logits are far smaller) rounds away when added to it."""


def fill_absorbs_scores(fill: float, element: Attribute) -> bool:
    """Whether `score + fill == fill` for every plausible score in `element`'s type,
    so an additive mask reproduces `where(keep, score, fill)` bit for bit."""
    fmt = _FLOAT_FORMATS.get(type(element))
    if fmt is None or math.isnan(fill) or fill >= 0.0:
        return False
    mantissa, largest = fmt
    if math.isinf(fill) or -fill > largest:
        return True  # the fill is -inf in this type
    _, exponent = math.frexp(-fill)  # -fill = m * 2**exponent, m in [0.5, 1)
    return (exponent - 1) - mantissa >= _LARGEST_LOGIT_EXPONENT


# ----------------------------------------------------------------- matching


@dataclass
class MaskStep:
    """One step between QK^T and softmax, in program order."""

    kind: str  # "scale" | "add" | "where"
    factor: float = 1.0
    mask: SSAValue | None = None  # "add": the added tensor; "where": the condition
    fill: float = 0.0


@dataclass
class ScoreChain:
    """What lies between the two matmuls, and the ops that can go once fused."""

    qk: npu.MatmulOp
    steps: list[MaskStep] = field(default_factory=list)
    consumed: list[Operation] = field(default_factory=list)  # consumer before producer


def is_identity_on_probs(op: Operation) -> bool:
    """An identity cast (same type in and out) or eval-mode dropout (no `train`, or p = 0)."""
    if isinstance(op, npu.CastOp):
        return op.input.type == op.result.type
    if isinstance(op, npu.DropoutOp):
        return op.train is None or op.p.value.data == 0.0
    return False


def match_probs(value: SSAValue, consumed: list[Operation]) -> npu.SoftmaxOp | None:
    """From the P@V lhs up through identities to a softmax over the last dim."""
    while isinstance(op := value.owner, npu.CastOp | npu.DropoutOp):
        if not single_use(value) or not is_identity_on_probs(op):
            return None
        consumed.append(op)
        value = op.input
    if not isinstance(op, npu.SoftmaxOp) or not single_use(value):
        return None
    rank = len(shape_of(op.input.type))
    if rank < 2 or normalize_dim(op.dim.value.data, rank) != rank - 1:
        return None
    consumed.append(op)
    return op


def match_scale(op: Operation, x: SSAValue) -> MaskStep | None:
    """`x * c`, `c * x` or `x / c` with a scalar `c`."""
    factor = _scalar_factor(op, x)
    return None if factor is None else MaskStep("scale", factor=factor)


def match_mask(op: Operation, x: SSAValue) -> MaskStep | None:
    """An additive mask `x + m` / `m + x`, or a boolean `where(keep, x, fill)`."""
    if op.results[0].type != x.type:
        return None
    if isinstance(op, npu.AddOp) and op.rhs is not None:
        mask = op.rhs if op.lhs is x else op.lhs if op.rhs is x else None
        if mask is None or mask is x or element_type(mask.type) != element_type(x.type):
            return None
        return MaskStep("add", mask=mask)
    if isinstance(op, npu.WhereOp) and op.on_true is x and op.on_false is None:
        fill = scalar_value(op.scalar)  # whether it absorbs the scores: `fills_absorb`
        return None if fill is None else MaskStep("where", mask=op.cond, fill=fill)
    return None


def _chain_candidates(op: Operation) -> Sequence[SSAValue]:
    """The operands of `op` that may continue the score chain upwards."""
    if isinstance(op, npu.WhereOp):
        return (op.on_true,)
    if isinstance(op, npu.MulOp | npu.AddOp):
        return (op.lhs,) if op.rhs is None else (op.lhs, op.rhs)
    if isinstance(op, npu.DivOp):
        return (op.lhs,)
    return ()


def match_scores(value: SSAValue, consumed: list[Operation]) -> ScoreChain | None:
    """From the softmax input up through scale and mask steps to the QK^T matmul.

    Tries both sides of a commutative step (`mask + scores`, `c * scores`): the one
    that doesn't lead to a matmul fails and the other is taken.
    """
    if not single_use(value):
        return None
    op = value.owner
    if isinstance(op, npu.MatmulOp):
        return ScoreChain(op, [], [*consumed, op])
    for x in _chain_candidates(op):
        step = match_scale(op, x) or match_mask(op, x)
        if step is None:
            continue
        chain = match_scores(x, [*consumed, op])
        if chain is not None:
            chain.steps.append(step)  # appended on the way back: program order
            return chain
    return None


def fills_absorb(steps: Sequence[MaskStep], element: Attribute) -> bool:
    """Every `where` fill, scaled by the scales after it, still absorbs the scores."""
    fills: list[float] = []
    for step in steps:
        if step.kind == "scale":
            fills = [f * step.factor for f in fills]
        elif step.kind == "where":
            fills.append(step.fill)
    return all(fill_absorbs_scores(f, element) for f in fills)


def peel_scale(value: SSAValue, consumed: list[Operation]) -> tuple[SSAValue, float]:
    """`x * c` (or `x / c`) used only here: (x, c); anything else: (value, 1)."""
    op = value.owner
    if not isinstance(op, npu.MulOp | npu.DivOp) or not single_use(value):
        return value, 1.0
    factor = _scalar_factor(op, op.lhs)
    x = op.lhs
    if factor is None and isinstance(op, npu.MulOp) and op.rhs is not None:
        factor, x = _scalar_factor(op, op.rhs), op.rhs
    if factor is None:
        return value, 1.0
    consumed.append(op)
    return x, factor


def unwrap_k_transpose(value: SSAValue, consumed: list[Operation]) -> SSAValue | None:
    """`transpose(k, -2, -1)` (or the equivalent permute): k; anything else: None."""
    swapped = swapped_last_two_dims(value)
    if swapped is None:
        return None
    view, k = swapped
    consumed.append(view)
    return k


def _skip_identities(value: SSAValue, chain: list[Operation]) -> SSAValue:
    """ATen spells `x[:, :, None]` with full slices around the unsqueeze, and HF's
    repeat_kv may make the expansion contiguous before its reshape: skip them (each is
    the identity on values)."""
    while isinstance(op := value.owner, npu.SliceOp | npu.ContiguousOp):
        if isinstance(op, npu.SliceOp) and (
            op.input.type != op.result.type or op.step.value.data != 1
        ):
            break
        chain.append(op)
        value = op.input
    return value


def unwrap_repeat_kv(value: SSAValue) -> tuple[SSAValue, list[Operation]] | None:
    """HF's repeat_kv, `x[:, :, None].expand(b, h, n, l, d).reshape(b, h * n, l, d)`:
    (x, the ops of the expansion, consumer first); None when `value` isn't one."""
    chain: list[Operation] = []
    reshape = value.owner
    if not isinstance(reshape, npu.ReshapeOp | npu.ViewOp):
        return None
    chain.append(reshape)
    expanded = _skip_identities(reshape.input, chain)
    expand = expanded.owner
    if not isinstance(expand, npu.ExpandOp):
        return None
    chain.append(expand)
    inserted = _skip_identities(expand.input, chain)
    unsqueeze = inserted.owner
    if not isinstance(unsqueeze, npu.UnsqueezeOp):
        return None
    chain.append(unsqueeze)
    base = _skip_identities(unsqueeze.input, chain)

    x = shape_of(base.type)
    rank = len(x)
    if rank < 3 or not _static(x):
        return None  # repeat_kv needs a heads dim in front of [seq, head_dim]
    if normalize_dim(unsqueeze.dim.value.data, rank + 1) != rank - 2:
        return None
    ones = (*x[:-2], 1, *x[-2:])
    if shape_of(expand.input.type) != ones:
        return None
    big = shape_of(expand.result.type)
    if len(big) != rank + 1 or big[: rank - 2] != x[:-2] or big[-2:] != x[-2:]:
        return None
    n_rep = big[rank - 2]
    if shape_of(reshape.result.type) != (*x[:-3], x[-3] * n_rep, *x[-2:]):
        return None
    return base, chain


def unwrap_kv_pair(
    k: SSAValue, v: SSAValue, consumed: list[Operation]
) -> tuple[SSAValue, SSAValue]:
    """Un-repeat k and v together: sdpa needs their head counts equal."""
    uk, uv = unwrap_repeat_kv(k), unwrap_repeat_kv(v)
    if uk is None or uv is None:
        return k, v
    (k_base, k_chain), (v_base, v_chain) = uk, uv
    if shape_of(k_base.type)[-3] != shape_of(v_base.type)[-3]:
        return k, v
    consumed.extend(k_chain)
    consumed.extend(v_chain)
    return k_base, v_base


def attention_fits(q: SSAValue, k: SSAValue, v: SSAValue, scores: SSAValue, out: SSAValue) -> bool:
    """q, k, v and the two matmul results line up the way `npu.sdpa` requires."""
    qs, ks, vs = shape_of(q.type), shape_of(k.type), shape_of(v.type)
    if not all(_static(s) for s in (qs, ks, vs)):
        return False
    if not (len(qs) == len(ks) == len(vs) >= 2):
        return False
    if ks[:-3] != qs[:-3] or vs[:-3] != qs[:-3]:
        return False  # sdpa does not broadcast batch dims
    if qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        return False
    if len(qs) >= 3 and (ks[-3] != vs[-3] or ks[-3] == 0 or qs[-3] % ks[-3] != 0):
        return False
    if shape_of(scores.type) != (*qs[:-1], ks[-2]) or shape_of(out.type) != (*qs[:-1], vs[-1]):
        return False
    el = element_type(q.type)
    return is_float(el) and all(element_type(x.type) == el for x in (k, v, scores, out))


def mask_fits(steps: Sequence[MaskStep], scores: SSAValue) -> bool:
    """Each mask (or `where` condition) broadcasts to the scores without growing them."""
    target = shape_of(scores.type)
    return all(step.mask is None or _fits(shape_of(step.mask.type), target) for step in steps)


# ----------------------------------------------------------------- building


def build_mask(
    steps: Sequence[MaskStep], element: Attribute, new_ops: list[Operation]
) -> tuple[SSAValue | None, float]:
    """Fold the steps into `scores * scale + mask`: (mask, scale); new ops go to `new_ops`."""
    mask: SSAValue | None = None
    scale = 1.0

    def emit(op: Operation, hint: str = "attn_mask") -> SSAValue:
        new_ops.append(op)
        op.results[0].name_hint = hint
        return op.results[0]

    for step in steps:
        if step.kind == "scale":
            scale *= step.factor
            if mask is not None:  # (s + m) * c == s * c + m * c
                mask = emit(
                    npu.MulOp(
                        operands=[mask, None],
                        result_types=[mask.type],
                        properties={"scalar": FloatAttr(step.factor, f64)},
                    )
                )
            continue
        assert step.mask is not None
        if step.kind == "add":
            if mask is None:
                mask = step.mask
                continue
            shape = broadcast(shape_of(mask.type), shape_of(step.mask.type))
            mask = emit(
                npu.AddOp(operands=[mask, step.mask], result_types=[TensorType(element, shape)])
            )
            continue
        # where(keep, scores + mask, fill) == scores + where(keep, mask, fill), mask or 0
        on_true = mask
        if on_true is None:
            zero = DenseIntOrFPElementsAttr.from_list(TensorType(element, []), [0.0])
            on_true = emit(npu.ConstantOp(zero), "attn_zero")
        shape = broadcast(shape_of(step.mask.type), shape_of(on_true.type))
        mask = emit(
            npu.WhereOp(
                operands=[step.mask, on_true, None],
                result_types=[TensorType(element, shape)],
                properties={"scalar": FloatAttr(step.fill, f64)},
            )
        )
    return mask, scale


# ----------------------------------------------------------------- pattern


class FuseAttention(RewritePattern):
    """`softmax(q @ k^T * scale + mask) @ v` -> `npu.sdpa`, anchored on the P@V matmul."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.MatmulOp, rewriter: PatternRewriter) -> None:
        probs: list[Operation] = []
        softmax = match_probs(op.lhs, probs)
        if softmax is None:
            return
        chain = match_scores(softmax.input, probs)
        if chain is None:
            return
        scores = chain.qk.result
        if softmax.input.type != scores.type or op.lhs.type != scores.type:
            return
        element = element_type(scores.type)
        if not mask_fits(chain.steps, scores) or not fills_absorb(chain.steps, element):
            return

        producers: list[Operation] = []
        q, q_factor = peel_scale(chain.qk.lhs, producers)
        kt, kt_factor = peel_scale(chain.qk.rhs, producers)
        k = unwrap_k_transpose(kt, producers)
        if k is None:
            return
        k, k_factor = peel_scale(k, producers)
        k, v = unwrap_kv_pair(k, op.rhs, producers)
        if not attention_fits(q, k, v, scores, op.result):
            return

        new_ops: list[Operation] = []
        mask, scale = build_mask(chain.steps, element, new_ops)
        sdpa = npu.SDPAOp(
            operands=[q, k, v, mask],
            result_types=[op.result.type],
            properties={"scale": FloatAttr(scale * q_factor * kt_factor * k_factor, f64)},
        )
        rewriter.replace(op, [*new_ops, sdpa])
        erase_unused(chain.consumed, rewriter)
        erase_unused(producers, rewriter)


class FoldRepeatKV(RewritePattern):
    """`npu.sdpa` over repeat_kv'd keys and values -> over the unrepeated ones (GQA).

    Models exported with PyTorch's attention call it on K/V that HF's repeat_kv expanded
    to the query's head count (a copy of each cache per step in a decode graph); sdpa
    groups the query heads over fewer key/value heads itself, with the same values
    (query head h reads key/value head h // n_rep either way)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: npu.SDPAOp, rewriter: PatternRewriter) -> None:
        consumed: list[Operation] = []
        k, v = unwrap_kv_pair(op.key, op.value, consumed)
        if k is op.key:
            return
        rewriter.replace(
            op,
            npu.SDPAOp(
                operands=[op.query, k, v, op.mask],
                result_types=[op.result.type],
                properties=dict(op.properties),
            ),
        )
        erase_unused(consumed, rewriter)


@dataclass(frozen=True)
class NpuFuseAttentionPass(NpuPatternPass):
    """Fuses each eager attention chain into one `npu.sdpa` (scale, mask, GQA kept).

    One rewrite per fused attention; a chain with an extra user, a softmax over
    another dim, a K not transposed on its last two dims, or shapes sdpa can't
    express is left as it is. An `npu.sdpa` over repeat_kv'd keys and values reads
    the unrepeated ones instead (`FoldRepeatKV`).
    """

    name = "npu-fuse-attention"

    def patterns(self) -> Sequence[RewritePattern]:
        return (FuseAttention(), FoldRepeatKV())
