"""The lowering table: the ops NNFactory can run, how each lowers, and under which conditions.

Each row pairs an op with the function of `conversion/nnfactory_graph.py` that builds its
NNFactory nodes and the `Capability` (element types, ranks, static shapes, an extra
check) under which it can. Placement (`npu-place-devices`) reads the capabilities and
`build_segment` the functions, never op or target names, so an op goes to the NPU only
when it has a lowering. Extensions add rows from Python, always with their lowering:

    @register_lowering("aten.cumsum.default", Capability(max_rank=4))
    def lower_cumsum(b: GraphBuilder, op: npu.GenericOp) -> Node: ...

(the whole example is in docs/executor.md). Keys are op classes or, for `npu.generic`,
ATen opcodes. An op without a row, or whose conditions fail, runs on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation

from forge.dialects import npu
from forge.dialects.shapes import DYNAMIC, is_float

NPU_FLOATS = frozenset({"f32", "f16", "bf16"})

Key = type[npu.NpuOp] | str
"""An op class, or the ATen opcode of an `npu.generic` op."""

LoweringFunction = Callable[[Any, Any], Any]
"""`(GraphBuilder, op) -> node | list[node]`; typed loosely here, where NNFactory's
types are not imported."""


@dataclass(frozen=True)
class Capability:
    """When NNFactory can run an op: element types, ranks, static shapes, extra check."""

    dtypes: frozenset[str] = NPU_FLOATS
    """Element types every tensor operand and result must have."""
    any_dtype_operands: frozenset[int] = frozenset()
    """Operand positions exempt from `dtypes` (e.g. embedding indices)."""
    min_rank: int = 0
    max_rank: int = 6
    static_shapes: bool = True
    check: Callable[[Operation], str | None] | None = None
    """Extra condition: returns why the NPU cannot run the op, or None."""

    def rejects(self, op: Operation) -> str | None:
        """Why NNFactory cannot run `op`, or None when it can."""
        values = [(i, v) for i, v in enumerate(op.operands)] + [(-1, r) for r in op.results]
        for index, value in values:
            t = value.type
            if not isinstance(t, TensorType):
                return f"non-tensor value of type {t}"
            shape = t.get_shape()
            if not self.min_rank <= len(shape) <= self.max_rank:
                return f"rank {len(shape)} outside [{self.min_rank}, {self.max_rank}]"
            if self.static_shapes and DYNAMIC in shape:
                return "dynamic shape"
            if 0 in shape:
                return "zero-size tensor (NNFactory builds no empty tensors; torch runs it)"
            if any(d > MAX_NNFACTORY_DIM for d in shape):
                return f"a dimension above {MAX_NNFACTORY_DIM} (NNFactory shapes are uint32)"
            element = _element_name(t.get_element_type())
            if index not in self.any_dtype_operands and element not in self.dtypes:
                return f"element type {element}"
        return self.check(op) if self.check is not None else None


_ELEMENT_NAMES: dict[Attribute, str] = {}


def _element_name(element: Attribute) -> str:
    """`str(element)`, remembered: printing an attribute costs more than the whole check."""
    name = _ELEMENT_NAMES.get(element)
    if name is None:
        name = _ELEMENT_NAMES[element] = str(element)
    return name


MAX_NNFACTORY_DIM = (1 << 32) - 1
"""NNFactory passes shapes to OpenVINO as uint32."""

COMPUTE = Capability()
SHAPE = Capability()
EMBEDDING = Capability(any_dtype_operands=frozenset({1}))


@dataclass(frozen=True)
class Lowering:
    """A row of the table: what builds an op's NNFactory nodes, and when it can run."""

    function: str | LoweringFunction
    """A function of `forge.conversion.nnfactory_graph` by name, or of another module of
    `forge.conversion` as "module.function" (the built-in rows: this
    module stays free of torch and NNFactory, which would cost placement seconds of
    start-up), or the function itself (extensions)."""
    capability: Capability = COMPUTE


def _static_mask(op: Operation) -> str | None:
    assert isinstance(op, npu.SDPAOp)
    if op.mask is not None and not is_float(op.mask.type.get_element_type()):  # type: ignore[attr-defined]
        return "boolean attention mask"
    return None


def paged_cache_rejects(op: Operation) -> str | None:
    """Why the paged node cannot hold `op`'s caches (not whole blocks), or None."""
    assert isinstance(op, npu.CachedAttentionOp)
    capacity = op.key_cache.type.get_shape()[2]
    if capacity % PAGED_BLOCK:
        return f"a cache of {capacity} positions is not whole blocks of {PAGED_BLOCK}"
    return None


PAGED_BLOCK = 32
"""Positions per block of OpenVINO's paged f32 cache (conversion/cached_attention.py)."""

LOWERINGS: dict[Key, Lowering] = {
    # contractions and fused ops
    npu.MatmulOp: Lowering("lower_matmul"),
    npu.LinearOp: Lowering("lower_linear"),
    npu.AddmmOp: Lowering("lower_addmm"),
    npu.FusedLinearOp: Lowering("lower_fused_linear"),
    npu.SDPAOp: Lowering("attention.lower_sdpa", Capability(min_rank=3, check=_static_mask)),
    npu.CachedAttentionOp: Lowering(
        "cached_attention.lower_cached_attention",
        Capability(
            dtypes=frozenset({"f32"}), any_dtype_operands=frozenset({5}), check=paged_cache_rejects
        ),
    ),
    # normalization and reductions (reduce_mean / power / eltwise in NNFactory)
    npu.SoftmaxOp: Lowering("lower_softmax"),
    npu.LayerNormOp: Lowering("lower_layer_norm"),
    npu.RMSNormOp: Lowering("lower_rms_norm"),
    npu.MeanOp: Lowering("lower_reduce"),
    npu.SumOp: Lowering("lower_reduce"),
    npu.EmbeddingOp: Lowering("lower_embedding", EMBEDDING),
    # elementwise; gelu in its erf and tanh forms: NNFactory's gelu_erf and gelu
    **{
        op: Lowering("lower_unary")
        for op in [
            npu.NegOp,
            npu.AbsOp,
            npu.ExpOp,
            npu.LogOp,
            npu.SqrtOp,
            npu.RsqrtOp,
            npu.ReciprocalOp,
            npu.TanhOp,
            npu.SinOp,
            npu.CosOp,
            npu.ErfOp,
            npu.ReluOp,
            npu.SigmoidOp,
            npu.SiluOp,
            npu.GeluOp,
        ]
    },
    **{
        op: Lowering("lower_binary")
        for op in [
            npu.AddOp,
            npu.SubOp,
            npu.MulOp,
            npu.DivOp,
            npu.PowOp,
            npu.MaximumOp,
            npu.MinimumOp,
        ]
    },
    npu.CastOp: Lowering("lower_cast"),
    npu.ConstantOp: Lowering("lower_constant"),
    # data movement (Reshape / Transpose / Slice / Concat / Gather nodes)
    **{
        op: Lowering("lower_shape", SHAPE)
        for op in [
            npu.ViewOp,
            npu.ReshapeOp,
            npu.TransposeOp,
            npu.PermuteOp,
            npu.ExpandOp,
            npu.SliceOp,
            npu.UnsqueezeOp,
            npu.SqueezeOp,
        ]
    },
    npu.CatOp: Lowering("lower_cat", SHAPE),
    npu.SplitOp: Lowering("lower_split", SHAPE),
    npu.ContiguousOp: Lowering("lower_unary", SHAPE),
    npu.DropoutOp: Lowering("lower_unary", SHAPE),
}
"""The table. Comparisons, `where`, boolean logic and `npu.generic` ops have no
lowering: they run on the CPU."""

NEUTRAL_OPS: tuple[type[npu.NpuOp], ...] = (
    npu.ShapeOp,
    npu.SplitOp,
    npu.CatOp,
    npu.ContiguousOp,
    npu.DropoutOp,
)
"""Data movement costs the same on either side, so placement keeps it on its producer's
device instead of paying a transition."""


def _checked_key(key: Key) -> Key:
    if isinstance(key, str):
        if key.startswith("npu."):
            raise ValueError(
                f"'{key}': name an `npu` op by its class; string keys are the ATen "
                "opcodes of npu.generic ops"
            )
        return key
    if isinstance(key, type) and issubclass(key, npu.NpuOp) and key is not npu.GenericOp:
        return key
    raise TypeError(f"a lowering key is an npu op class or an ATen opcode, not {key!r}")


def register_lowering(
    key: Key, capability: Capability
) -> Callable[[LoweringFunction], LoweringFunction]:
    """Decorate the function that lowers `key` (an op class or an ATen opcode) to
    NNFactory nodes; NNFactory then runs `key` under `capability`. A capability comes
    only with its lowering, so placement never puts an op on the NPU that
    `build_segment` cannot build."""
    key = _checked_key(key)
    if not isinstance(capability, Capability):
        raise TypeError(f"the capability of {key!r} must be a Capability, not {capability!r}")

    def register(function: LoweringFunction) -> LoweringFunction:
        if not callable(function):
            raise TypeError(
                f"{key!r} needs its lowering, a function (GraphBuilder, op) -> node(s); "
                f"got {function!r}"
            )
        if key in LOWERINGS:
            raise ValueError(f"{key!r} already has a lowering; unregister_lowering it first")
        LOWERINGS[key] = Lowering(function, capability)
        return function

    return register


def unregister_lowering(key: Key) -> None:
    """Remove `key`'s row (tests undo their registrations with it)."""
    LOWERINGS.pop(key, None)


def capability_key(op: Operation) -> str:
    return op.opcode if isinstance(op, npu.GenericOp) else op.name


def lowering_of(op: Operation) -> Lowering | None:
    """`op`'s row: by opcode for `npu.generic`, by exact class otherwise."""
    return LOWERINGS.get(op.opcode if isinstance(op, npu.GenericOp) else type(op))


def npu_rejects(op: Operation) -> str | None:
    """Why `op` must run on the CPU, or None when NNFactory can run it."""
    lowering = lowering_of(op)
    if lowering is None:
        return "not in the capability table"
    return lowering.capability.rejects(op)
