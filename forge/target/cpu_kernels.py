"""Lowering of `npu` ops to pre-resolved CPU callables (ATen kernels).

`cpu_kernel(op)` is called once per op at plan-build time; it resolves the ATen
overload and binds every property, so running the op is one Python call with
tensors only (no lookup by string at run time).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    UnitAttr,
)
from xdsl.ir import Attribute, Operation

from forge.dialects import npu
from forge.dialects.dtypes import TORCH_DTYPES
from forge.dialects.shapes import DYNAMIC, numel
from forge.support.diagnostics import ForgeError

aten = torch.ops.aten
Kernel = Callable[..., Any]


class NoKernel(ForgeError):
    """An op the CPU path cannot execute (its opcode names no ATen overload)."""


def resolve_overload(opcode: str) -> torch._ops.OpOverload:
    """`"aten.cumsum.default"` -> `torch.ops.aten.cumsum.default`, once, at build time."""
    try:
        namespace, name, overload = opcode.split(".")
        return getattr(getattr(getattr(torch.ops, namespace), name), overload)
    except (ValueError, AttributeError, RuntimeError) as e:
        raise NoKernel(f"'{opcode}' does not name an ATen overload") from e


def torch_dtype(element: Attribute) -> torch.dtype:
    if element not in TORCH_DTYPES:
        raise NoKernel(f"no torch dtype for element type {element}")
    return TORCH_DTYPES[element]


def static_shape(value_type: Attribute) -> list[int]:
    """A shape for view/expand: one `?` becomes -1 (inferred), as ATen allows."""
    assert isinstance(value_type, TensorType)
    shape = [-1 if d == DYNAMIC else d for d in value_type.get_shape()]
    if shape.count(-1) > 1:
        raise NoKernel(f"cannot materialize a shape with several dynamic dims: {value_type}")
    return shape


def _scalar(attr: Attribute) -> int | float | bool:
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        return bool(value) if attr.type.width.data == 1 else value
    assert isinstance(attr, FloatAttr)
    return attr.value.data


def _ints(attr: Attribute) -> list[int]:
    return list(attr.get_values())  # type: ignore[attr-defined]


def _int(attr: IntegerAttr) -> int:
    return attr.value.data


SCALAR_OVERLOADS: dict[type[npu.BinaryOp], Kernel] = {
    npu.AddOp: aten.add.Tensor,
    npu.SubOp: aten.sub.Tensor,
    npu.MulOp: aten.mul.Tensor,
    npu.DivOp: aten.div.Tensor,
    npu.PowOp: aten.pow.Tensor_Scalar,
    npu.EqOp: aten.eq.Scalar,
    npu.NeOp: aten.ne.Scalar,
    npu.LtOp: aten.lt.Scalar,
    npu.LeOp: aten.le.Scalar,
    npu.GtOp: aten.gt.Scalar,
    npu.GeOp: aten.ge.Scalar,
}

ACTIVATIONS: dict[str, Kernel | None] = {
    "none": None,
    "relu": aten.relu.default,
    "gelu": aten.gelu.default,
    "gelu_tanh": lambda x: aten.gelu.default(x, approximate="tanh"),
    "silu": aten.silu.default,
    "sigmoid": aten.sigmoid.default,
}


def unary_kernel(op: npu.UnaryOp) -> Kernel:
    fn = resolve_overload(op.opcode)
    if isinstance(op, npu.GeluOp) and op.approximate is not None:
        approximate = op.approximate.data
        return lambda x: fn(x, approximate=approximate)
    if isinstance(op, npu.DropoutOp):
        p, train = op.p.value.data, op.train is not None
        return lambda x: fn(x, p, train)
    return fn


def binary_kernel(op: npu.BinaryOp) -> Kernel:
    if op.scalar is None:
        return resolve_overload(op.opcode)
    scalar = _scalar(op.scalar)
    fn = SCALAR_OVERLOADS.get(type(op))
    if fn is None:
        raise NoKernel(f"'{op.name}' has no scalar form on the CPU")
    return lambda x: fn(x, scalar)


def where_kernel(op: npu.WhereOp) -> Kernel:
    if op.scalar is None:
        return aten.where.self
    scalar = _scalar(op.scalar)
    return lambda c, x: aten.where.ScalarOther(c, x, scalar)


def cast_kernel(op: npu.CastOp) -> Kernel:
    dtype = torch_dtype(op.result.type.get_element_type())
    return lambda x: aten._to_copy.default(x, dtype=dtype)


def constant_kernel(op: npu.ConstantOp) -> Kernel:
    value: DenseIntOrFPElementsAttr = op.value
    result_type = op.result.type
    assert isinstance(result_type, TensorType)
    data = torch.tensor(list(value.get_values()), dtype=torch_dtype(result_type.get_element_type()))
    shape = list(result_type.get_shape())
    tensor = data.reshape(shape) if data.numel() > 1 else data.reshape([]).expand(shape).clone()
    return lambda: tensor


def fused_linear_kernel(op: npu.FusedLinearOp) -> Kernel:
    act = ACTIVATIONS[op.activation.data]
    in_out = op.weight_in_out is not None

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        y = aten.matmul.default(x, w) if in_out else aten.linear.default(x, w)
        if b is not None:
            y = aten.add.Tensor(y, b)
        return act(y) if act is not None else y

    return run


def packed_gemm_available() -> bool:
    """Whether this torch has MKL's packed fp32 GEMM (x86 builds do)."""
    return torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")


class PackedLinear:
    """`x @ W^T + b` (then the activation) with W packed once by MKL
    (`cblas_sgemm_pack`) for the row count the plan fixes. MKL then skips packing W at
    every call, which on GPT-2's LM head made it ~15% faster than an unpacked GEMM or
    OpenVINO's (docs/executor.md). Other row counts or dtypes take `aten.linear`."""

    def __init__(self, weight: torch.Tensor, in_out: bool, rows: int, activation: str = "none"):
        self.weight = (weight.t() if in_out else weight).contiguous()
        self.rows = rows
        self.activation = ACTIVATIONS[activation]
        self.packed: torch.Tensor | None = None
        if self.weight.dtype == torch.float32 and packed_gemm_available():
            self.packed = torch.ops.mkl._mkl_reorder_linear_weight(self.weight, rows)

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        features = x.shape[-1]
        if self.packed is None or x.dtype != torch.float32 or x.numel() != self.rows * features:
            y = aten.linear.default(x, self.weight, bias)
        else:
            flat = x.reshape(self.rows, features)
            y = torch.ops.mkl._mkl_linear(flat, self.packed, self.weight, bias, self.rows)
            y = y.view(*x.shape[:-1], self.weight.shape[0])
        return self.activation(y) if self.activation is not None else y


def packed_linear_spec(op: npu.LinearOp | npu.AddmmOp | npu.FusedLinearOp) -> dict[str, Any]:
    """`PackedLinear`'s arguments besides the weight, for `op` (the executor and the
    printed plan build it alike)."""
    x_type = op.input.type
    assert isinstance(x_type, TensorType)
    rows = numel(x_type.get_shape()[:-1])
    assert rows is not None, "a packed linear needs a static input shape"
    activation = op.activation.data if isinstance(op, npu.FusedLinearOp) else "none"
    return {"in_out": npu.weight_in_out(op), "rows": rows, "activation": activation}


def packed_linear_kernel(
    op: npu.LinearOp | npu.AddmmOp | npu.FusedLinearOp, weight: torch.Tensor
) -> Kernel:
    """`op`'s CPU callable with its constant `weight` packed (`PackedLinear`); it takes
    the op's operands, as `cpu_kernel(op)` does, and ignores the weight operand."""
    linear = PackedLinear(weight, **packed_linear_spec(op))
    if isinstance(op, npu.AddmmOp):
        return lambda bias, x, w: linear(x, bias)
    return lambda x, w, bias=None: linear(x, bias)


def sdpa_kernel(op: npu.SDPAOp) -> Kernel:
    kwargs: dict[str, Any] = {"is_causal": op.is_causal is not None}
    if op.scale is not None:
        kwargs["scale"] = op.scale.value.data
    q_type, k_type = op.query.type, op.key.type
    assert isinstance(q_type, TensorType) and isinstance(k_type, TensorType)
    q_shape, k_shape = q_type.get_shape(), k_type.get_shape()
    if len(q_shape) >= 3 and q_shape[-3] != k_shape[-3]:
        kwargs["enable_gqa"] = True
    fn = aten.scaled_dot_product_attention.default
    if op.mask is None:
        return lambda q, k, v: fn(q, k, v, **kwargs)
    return lambda q, k, v, mask: fn(q, k, v, attn_mask=mask, **kwargs)


def layer_norm_kernel(op: npu.LayerNormOp) -> Kernel:
    shape, eps = _ints(op.normalized_shape), op.eps.value.data
    has_w, has_b = op.weight is not None, op.bias is not None

    def run(x: torch.Tensor, *affine: torch.Tensor) -> torch.Tensor:
        w = affine[0] if has_w else None
        b = affine[-1] if has_b else None
        return aten.layer_norm.default(x, shape, w, b, eps)

    return run


def rms_norm_kernel(op: npu.RMSNormOp) -> Kernel:
    shape, eps = _ints(op.normalized_shape), op.eps.value.data
    return lambda x, w=None: aten.rms_norm.default(x, shape, w, eps)


def reduce_kernel(op: npu.ReduceOp) -> Kernel:
    fn = resolve_overload(op.opcode)
    dims, keepdim = _ints(op.dims), op.keepdim is not None
    return lambda x: fn(x, dims, keepdim)


def shape_kernel(op: npu.ShapeOp) -> Kernel:
    fn = resolve_overload(op.opcode)
    match op:
        case npu.ViewOp():
            # torch.export records `view` where *its* strides allowed one (an SDPA output
            # is laid out transposed); Forge's kernels return other layouts, so view
            # when it can and copy when it must, as reshape does.
            shape = static_shape(op.result.type)
            return lambda x: aten.reshape.default(x, shape)
        case npu.ReshapeOp() | npu.ExpandOp():
            shape = static_shape(op.result.type)
            return lambda x: fn(x, shape)
        case npu.TransposeOp():
            d0, d1 = _int(op.dim0), _int(op.dim1)
            return lambda x: fn(x, d0, d1)
        case npu.PermuteOp():
            dims = _ints(op.dims)
            return lambda x: fn(x, dims)
        case npu.SliceOp():
            args = (_int(op.dim), _int(op.start), _int(op.end), _int(op.step))
            return lambda x: fn(x, *args)
        case npu.UnsqueezeOp() | npu.SqueezeOp():
            dim = _int(op.dim)
            return lambda x: fn(x, dim)
    raise NoKernel(f"no CPU kernel for '{op.name}'")


def cat_kernel(op: npu.CatOp) -> Kernel:
    dim = _int(op.dim)
    return lambda *xs: aten.cat.default(list(xs), dim)


def cache_update_kernel(op: npu.CacheUpdateOp) -> Kernel:
    """Writes the rows into the caller's cache and returns that cache (the op's result
    is its storage): O(rows), no copy of the cache."""
    dim = _int(op.dim)
    return lambda cache, positions, update: aten.index_copy_.default(cache, dim, positions, update)


def check_run(positions: torch.Tensor, capacity: int) -> torch.Tensor:
    """positions[0] as a [1] tensor, once the positions are checked to be a run of
    consecutive positions in a cache of `capacity`: what `npu.cached_attention` writes at."""
    count = positions.numel()
    start = int(positions[0]) if count == 1 else _first_of_run(positions.long())
    if start is None or start < 0 or start + count > capacity:
        shown = positions[:8].tolist()
        raise ForgeError(
            f"cache positions {shown}{'...' if count > 8 else ''} are not {count} "
            f"consecutive positions within the cache's {capacity}"
        )
    return positions[:1].clone()


def attend_cached(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    start: torch.Tensor,
    scale: float,
    window: int = 0,
) -> torch.Tensor:
    """Rows start.. of both caches become the new keys and values, in place; then the
    query attends over the cache up to its own position (the rows after it are hidden,
    so they are not read), with a `window` W over its last W positions only."""
    first, rows = int(start[0]), q.shape[2]
    end = first + rows
    key_cache[:, :, first:end].copy_(k)
    value_cache[:, :, first:end].copy_(v)
    behind = torch.arange(first, end)[:, None] - torch.arange(end)
    seen = (behind >= 0) & (behind < window) if window else behind >= 0
    return aten.scaled_dot_product_attention.default(
        q,
        key_cache[:, :, :end],
        value_cache[:, :, :end],
        attn_mask=seen,
        scale=scale,
        enable_gqa=q.shape[1] != key_cache.shape[1],
    )


CACHED_ROW_POSITIONS = 256
"""Positions whose row views `cache_updates_kernel` keeps (2 x layers views each)."""


def cache_updates_kernel(dim: int) -> Kernel:
    """Several `npu.cache_update`s at the same positions and `dim` as one call,
    `run(positions, cache0, update0, cache1, update1, ...) -> (cache0, cache1, ...)`.

    A decode step writes one row into each of a model's 2 x layers caches: as executor
    steps of their own they cost about 9 us each (a fifth of GPT-2's host time per
    token), in one step's loop 3.3 us (`Tensor.index_copy_`; the `aten` overload object
    costs 4.5 us a call, and views through `narrow` or NumPy cost more than the copy).
    A one-row write goes faster still through `torch._foreach_copy_` into each cache's
    row at that position (GPT-2's 24 writes 76 -> 22 us, warm), with the row views made
    once per position (`_RowViews`) and kept for the first `CACHED_ROW_POSITIONS`.
    Where the caches are slices of one tensor at a constant step (`StaticCacheLM`
    stacks them) and so are the rows (the executor pins them, `GraphCall.pin`), the
    rows go in as one strided copy: after a decode graph has streamed the weights
    through the CPU's caches, GPT-2's 24 writes took 242 us as 24 copies and 145 us as
    one (AMD EPYC Zen 3). A prefill chunk's positions are consecutive, so its rows are
    one slice of each cache (`_RowViews.write_run`): GPT-2's 24 writes of 100 rows took
    0.94 ms as `index_copy_` and 0.52 ms as one strided copy (Intel Xeon with AMX).
    `cache_update_kernel` stays the one-op form on the overload: the printed plan
    (`forge-opt -t python`) records the overload each CPU kernel calls."""
    views = _RowViews(dim)

    def run(positions: torch.Tensor, *pairs: torch.Tensor) -> Any:
        caches, updates = pairs[0::2], pairs[1::2]
        if len(caches) > 1:
            block = views.block(positions, caches, updates)
            if block is not None:
                block[0].copy_(block[1])
                return caches
            rows = views.at(positions, caches, updates)
            if rows is not None:
                torch._foreach_copy_(rows, list(updates))
                return caches
        if not views.write_run(positions, caches, updates):
            for cache, update in zip(caches, updates, strict=True):
                cache.index_copy_(dim, positions, update)
        return caches if len(caches) > 1 else caches[0]  # one output: the value itself

    run.row_views = views  # type: ignore[attr-defined]
    return run


class _RowViews:
    """Per position, each cache's row there (`narrow(dim, position, 1)`), for the
    caches of the last call. None where a write is not one in-range row of the update's
    shape and dtype: `index_copy_` then writes it, and fails as it fails."""

    def __init__(self, dim: int):
        self.dim = dim
        self.caches: tuple[torch.Tensor, ...] = ()
        self.rows: dict[int, list[torch.Tensor] | None] = {}
        self.updates: tuple[int, ...] = ()
        """The addresses of the last call's updates."""
        self.source: torch.Tensor | None = None
        """The updates of the last call as one strided view, when they are one block."""
        self.whole: torch.Tensor | None = None
        """The caches of the last call as one strided view, when they are one block."""
        self.blocks: dict[int, torch.Tensor | None] = {}
        """Per position, the caches' rows there as one strided view (None: apart)."""

    def block(
        self,
        positions: torch.Tensor,
        caches: tuple[torch.Tensor, ...],
        updates: tuple[torch.Tensor, ...],
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(the rows at the position, the updates), each one strided view over the
        2 x layers tensors, or None where the caches or the updates are not slices of
        one storage at a constant step, or the write is not one in-range row."""
        if positions.numel() != 1 or positions.dtype != torch.long:
            return None
        self._same_caches(caches)
        self._same_updates(updates)
        if self.source is None:
            return None
        position = int(positions)
        if position in self.blocks:
            rows = self.blocks[position]
        else:
            rows = self._make_block(position)
            if len(self.blocks) < CACHED_ROW_POSITIONS:
                self.blocks[position] = rows
        if rows is None or rows.shape != self.source.shape or rows.dtype != self.source.dtype:
            return None
        return rows, self.source

    def write_run(
        self,
        positions: torch.Tensor,
        caches: tuple[torch.Tensor, ...],
        updates: tuple[torch.Tensor, ...],
    ) -> bool:
        """Write a run of consecutive positions (a prefill chunk's) as slices: one
        strided copy where the caches and the updates are each one block, else a copy per
        cache. False, writing nothing, where the positions are not such a run or a slice
        would not be exactly what `index_copy_` writes (out of range, another shape)."""
        first = _first_of_run(positions)
        if first is None:
            return False
        count = positions.numel()
        slices = []
        for cache, update in zip(caches, updates, strict=True):
            if self.dim >= cache.dim() or first + count > cache.shape[self.dim]:
                return False
            rows = cache.narrow(self.dim, first, count)
            if rows.shape != update.shape or rows.dtype != update.dtype:
                return False
            slices.append(rows)
        if len(caches) > 1:
            self._same_caches(caches)
            self._same_updates(updates)
            whole, source = self.whole, self.source
            if whole is not None and source is not None and not _shares_storage(whole, source):
                whole.narrow(self.dim, first, count).copy_(source)
                return True
        torch._foreach_copy_(slices, list(updates))
        return True

    def _same_updates(self, updates: tuple[torch.Tensor, ...]) -> None:
        """Make `source` the view over `updates` (by address: holding the updates would
        keep a graph's pooled results from being reused, `ResultPool`; `source`, when
        set, keeps their memory alive)."""
        addresses = tuple(update.data_ptr() for update in updates)
        if addresses != self.updates:
            self.updates, self.source = addresses, _as_block(updates)
            self.blocks = {}

    def _same_caches(self, caches: tuple[torch.Tensor, ...]) -> None:
        """Forget the views made for other caches than `caches`."""
        if len(caches) != len(self.caches) or any(
            a is not b for a, b in zip(caches, self.caches, strict=True)
        ):
            self.caches, self.rows, self.blocks = tuple(caches), {}, {}
            self.whole = _as_block(caches) if self.dim > 0 else None

    def _make_block(self, position: int) -> torch.Tensor | None:
        whole, source = self.whole, self.source
        if whole is None or source is None or not 0 <= position < whole.shape[self.dim]:
            return None
        if _shares_storage(whole, source):
            return None  # rows read from the caches themselves: one copy is not the same
        return whole.narrow(self.dim, position, 1)

    def at(
        self,
        positions: torch.Tensor,
        caches: tuple[torch.Tensor, ...],
        updates: tuple[torch.Tensor, ...],
    ) -> list[torch.Tensor] | None:
        if positions.numel() != 1 or positions.dtype != torch.long:
            return None
        self._same_caches(caches)
        position = int(positions)
        if position in self.rows:
            rows = self.rows[position]
        else:
            rows = self._make(position, caches)
            if len(self.rows) < CACHED_ROW_POSITIONS:
                self.rows[position] = rows
        if rows is None or any(
            r.shape != u.shape or r.dtype != u.dtype for r, u in zip(rows, updates, strict=True)
        ):
            return None
        return rows

    def _make(self, position: int, caches: tuple[torch.Tensor, ...]) -> list[torch.Tensor] | None:
        if not all(0 <= position < cache.shape[self.dim] for cache in caches):
            return None
        return [cache.narrow(self.dim, position, 1) for cache in caches]


def _first_of_run(positions: torch.Tensor) -> int | None:
    """The first of `positions` when they are two or more consecutive increasing
    integers (a prefill chunk's), else None."""
    if positions.dim() != 1 or positions.dtype != torch.long or positions.numel() < 2:
        return None
    first = int(positions[0])
    if first < 0 or int(positions[-1]) - first != positions.numel() - 1:
        return None
    return first if bool((positions.diff() == 1).all()) else None


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _as_block(tensors: Sequence[torch.Tensor]) -> torch.Tensor | None:
    """`tensors` (each with a leading dim of 1) as one view [n, ...] over their common
    storage, when they are disjoint contiguous slices of it at a constant step, of one
    shape and dtype; else None."""
    first = tensors[0]
    if first.dim() == 0 or first.shape[0] != 1 or not first.is_contiguous():
        return None
    size = first.element_size()
    step, remainder = divmod(tensors[1].data_ptr() - first.data_ptr(), size)
    if remainder or step < first.numel():
        return None
    storage = first.untyped_storage().data_ptr()
    for k, tensor in enumerate(tensors):
        if (
            tensor.data_ptr() != first.data_ptr() + k * step * size
            or tensor.shape != first.shape
            or tensor.dtype != first.dtype
            or not tensor.is_contiguous()
            or tensor.untyped_storage().data_ptr() != storage
        ):
            return None
    return first.as_strided(
        (len(tensors), *first.shape[1:]), (step, *first.stride()[1:]), first.storage_offset()
    )


def split_kernel(op: npu.SplitOp) -> Kernel:
    sizes, dim = _ints(op.split_sizes), _int(op.dim)
    return lambda x: tuple(aten.split_with_sizes.default(x, sizes, dim))


# ---------------------------------------------------------------- generic ops


def _decode(attr: Attribute, arg_type: str) -> Any:
    """An attribute back to the Python value the ATen schema expects."""
    if isinstance(attr, UnitAttr):
        return None
    if isinstance(attr, ArrayAttr):
        return [_decode(a, arg_type) for a in attr.data]
    if isinstance(attr, IntegerAttr | FloatAttr):
        return _scalar(attr)
    if isinstance(attr, StringAttr):
        text = attr.data
        if "Device" in arg_type:
            return torch.device(text)
        if "Layout" in arg_type or "MemoryFormat" in arg_type:
            return getattr(torch, text)
        return text
    return torch_dtype(attr)


class _Operand:
    """Placeholder for the i-th tensor operand inside a decoded argument list."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def _decode_arg(attr: Attribute, arg_type: str) -> Any:
    if isinstance(attr, npu.OperandRefAttr):
        return _Operand(attr.index.data)
    if isinstance(attr, ArrayAttr):
        return [_decode_arg(a, arg_type) for a in attr.data]
    return _decode(attr, arg_type)


def _fill(template: Any, tensors: tuple[torch.Tensor, ...]) -> Any:
    if isinstance(template, _Operand):
        return tensors[template.index]
    if isinstance(template, list):
        return [_fill(t, tensors) for t in template]
    return template


def generic_kernel(op: npu.GenericOp) -> Kernel:
    fn = resolve_overload(op.opcode)
    schema = fn._schema.arguments
    types = {a.name: str(a.real_type) for a in schema}
    positional_types = [str(a.real_type) for a in schema]
    args = [
        _decode_arg(a, positional_types[i] if i < len(positional_types) else "")
        for i, a in enumerate(op.args.data)
    ]
    # A CPU kernel makes its tensors on the CPU, whatever device the graph named
    # (Forge decides placement, and "npu" is no torch device).
    kwargs = {
        k: torch.device("cpu") if k == "device" else _decode_arg(v, types.get(k, ""))
        for k, v in (op.kwargs.data.items() if op.kwargs is not None else ())
    }
    n_results = len(op.outputs)

    def run(*tensors: torch.Tensor) -> Any:
        result = fn(*_fill(args, tensors), **{k: _fill(v, tensors) for k, v in kwargs.items()})
        if n_results == 1 and isinstance(result, list | tuple):
            return result[0]
        return result

    return run


THREADED_OPCODES = ("aten.conv", "aten.mm", "aten.bmm", "aten.baddbmm")
"""Generic ops (by opcode prefix) with enough arithmetic per byte for torch's pool."""


def wants_threads(op: Operation) -> bool:
    """Whether `op`'s CPU kernel is compute-bound enough to run on torch's whole thread
    pool next to NNFactory graphs (`forge.runtime.threads`): matmuls, linears,
    attention and convolutions. Copies, masks, elementwise and index ops are not: on one
    thread they cost microseconds, and a parallel one leaves OpenMP workers spinning on
    the cores the next graph needs."""
    if isinstance(op, (npu.MatmulOp, npu.SDPAOp, *npu.WEIGHTED_LINEAR_OPS)):
        return True
    return isinstance(op, npu.GenericOp) and op.opcode_attr.data.startswith(THREADED_OPCODES)


def cpu_kernel(op: Operation) -> Kernel:
    """The pre-resolved callable that executes `op` on the CPU."""
    match op:
        case npu.GenericOp():
            return generic_kernel(op)
        case npu.UnaryOp():
            return unary_kernel(op)
        case npu.BinaryOp():
            return binary_kernel(op)
        case npu.WhereOp():
            return where_kernel(op)
        case npu.CastOp():
            return cast_kernel(op)
        case npu.ConstantOp():
            return constant_kernel(op)
        case npu.MatmulOp():
            return aten.matmul.default
        case npu.LinearOp():
            return aten.linear.default
        case npu.AddmmOp():
            return aten.addmm.default
        case npu.FusedLinearOp():
            return fused_linear_kernel(op)
        case npu.SDPAOp():
            return sdpa_kernel(op)
        case npu.SoftmaxOp():
            dim = _int(op.dim)
            return lambda x: aten.softmax.int(x, dim)
        case npu.LayerNormOp():
            return layer_norm_kernel(op)
        case npu.RMSNormOp():
            return rms_norm_kernel(op)
        case npu.ReduceOp():
            return reduce_kernel(op)
        case npu.EmbeddingOp():
            return aten.embedding.default
        case npu.ShapeOp():
            return shape_kernel(op)
        case npu.CatOp():
            return cat_kernel(op)
        case npu.CacheUpdateOp():
            return cache_update_kernel(op)
        case npu.RunStartOp():
            capacity = _int(op.capacity)
            return lambda positions: check_run(positions, capacity)
        case npu.CachedAttentionOp():
            scale, window = op.scale.value.data, op.window_size
            return lambda *operands: attend_cached(*operands, scale=scale, window=window)
        case npu.SplitOp():
            return split_kernel(op)
    raise NoKernel(f"no CPU kernel for '{op.name}'")
