"""The op-capability table: which `npu` ops NNFactory can run, and under which conditions.

Placement (`npu-place-devices`) asks this table, never op or target names. Engineers
extend it from Python without touching the pass:

    from forge.conversion.capabilities import Capability, register_capability
    register_capability("aten.cumsum.default", Capability(max_rank=4))

Keys are op names (`"npu.matmul"`) or, for `npu.generic`, ATen opcodes. An op whose key
is absent, or whose conditions fail, runs on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation

from forge.dialects import npu
from forge.dialects.shapes import DYNAMIC, is_float

NPU_FLOATS = frozenset({"f32", "f16", "bf16"})


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
            element = str(t.get_element_type())
            if index not in self.any_dtype_operands and element not in self.dtypes:
                return f"element type {element}"
        return self.check(op) if self.check is not None else None


def _static_mask(op: Operation) -> str | None:
    assert isinstance(op, npu.SDPAOp)
    if op.mask is not None and not is_float(op.mask.type.get_element_type()):  # type: ignore[attr-defined]
        return "boolean attention mask"
    return None


COMPUTE = Capability()
SHAPE = Capability()
EMBEDDING = Capability(any_dtype_operands=frozenset({1}))

CAPABILITIES: dict[str, Capability] = {
    # contractions and fused ops
    "npu.matmul": COMPUTE,
    "npu.linear": COMPUTE,
    "npu.addmm": COMPUTE,
    "npu.fused_linear": COMPUTE,
    "npu.sdpa": Capability(min_rank=3, check=_static_mask),
    # normalization and reductions (reduce_mean / power / eltwise in NNFactory)
    "npu.softmax": COMPUTE,
    "npu.layer_norm": COMPUTE,
    "npu.rms_norm": COMPUTE,
    "npu.mean": COMPUTE,
    "npu.sum": COMPUTE,
    "npu.embedding": EMBEDDING,
    # elementwise
    **{
        f"npu.{name}": COMPUTE
        for name in [
            "neg",
            "abs",
            "exp",
            "log",
            "sqrt",
            "rsqrt",
            "reciprocal",
            "tanh",
            "sin",
            "cos",
            "erf",
            "relu",
            "sigmoid",
            "silu",
            "add",
            "sub",
            "mul",
            "div",
            "pow",
            "maximum",
            "minimum",
        ]
    },
    "npu.gelu": COMPUTE,  # erf and tanh forms: NNFactory's gelu_erf and gelu
    "npu.cast": COMPUTE,
    "npu.constant": COMPUTE,
    # data movement (Reshape / Transpose / Slice / Concat / Gather nodes)
    **{
        f"npu.{name}": SHAPE
        for name in [
            "view",
            "reshape",
            "transpose",
            "permute",
            "expand",
            "slice",
            "unsqueeze",
            "squeeze",
            "cat",
            "split",
            "contiguous",
            "dropout",
        ]
    },
}
"""The default table. Comparisons, `where`, boolean logic and `npu.generic` ops are
absent: they run on the CPU."""

NEUTRAL_OPS: tuple[type[npu.NpuOp], ...] = (
    npu.ShapeOp,
    npu.SplitOp,
    npu.CatOp,
    npu.ContiguousOp,
    npu.DropoutOp,
)
"""Data movement costs the same on either side, so placement keeps it on its producer's
device instead of paying a transition."""


def register_capability(key: str, capability: Capability) -> None:
    """Declare that NNFactory runs `key` (an op name or an ATen opcode) under `capability`."""
    CAPABILITIES[key] = capability


def unregister_capability(key: str) -> None:
    CAPABILITIES.pop(key, None)


def capability_key(op: Operation) -> str:
    return op.opcode if isinstance(op, npu.GenericOp) else op.name


def npu_rejects(op: Operation) -> str | None:
    """Why `op` must run on the CPU, or None when NNFactory can run it."""
    capability = CAPABILITIES.get(capability_key(op))
    if capability is None:
        return "not in the capability table"
    return capability.rejects(op)
