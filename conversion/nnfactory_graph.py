"""Lowering of a segment of NPU-placed `npu` ops to one compiled NNFactory graph.

A segment is a run of consecutive ops that placement sent to the NPU. Compiling each
op as its own graph would pay one OpenVINO compile and one dispatch per op; one graph
per segment pays them once and lets the compiler fuse across ops. Values read from
outside the segment (activations and weights alike) become graph parameters, bound
per call in first-use order; values used after the segment become graph results.

Ops NNFactory has a node for lower natively (matmul, softmax, gather, the
activations, reductions, reshape/transpose/slice/concat); the rest are composed from
them (attention, layer/RMS norm, subtraction, rsqrt, maximum/minimum, expand).
Anything else raises `NoNpuLowering`, so the caller can run the op on the CPU.

Compiled graphs are cached by the segment's structure (ops, properties, wiring),
its input/output types and the precision, so identical segments (the layers of a
transformer) compile once.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import importlib
import math
import os
import sys
import time
import weakref
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from forge.conversion import weight_spill
from forge.conversion.capabilities import Lowering, LoweringFunction, lowering_of
from forge.conversion.cpu_kernels import torch_dtype
from forge.conversion.nnfactory_backend import PACKAGE, load_backend
from forge.diagnostics import ForgeError
from forge.dialects import dtypes, npu
from forge.dialects.shapes import DYNAMIC, is_bool, is_float

if TYPE_CHECKING:
    from forge.transforms.host_profile import HostProfile

Node = Any
"""An NNFactory `Tensor` (a node of the graph under construction)."""

PRECISIONS: dict[str, type[np.floating]] = {
    precision: np.float16 if precision == "fp16" else np.float32 for precision in dtypes.PRECISIONS
}
"""Executor precision (`forge.dialects.dtypes.PRECISIONS`) -> the numpy dtype of the
graph's float activations: fp16 at fp16, fp32 at every other precision.

`int8` stores every linear weight as int8 with one scale per output channel (weight-only
quantization, the graph NNFactory's quantized `linear` builds: Convert, Multiply by the
scale, MatMul); activations stay fp32, as this CPU has no fp16 arithmetic. `mixed` does
the same except for weights whose op carries `precision = "fp16"` or `"fp32"` (set by
npu-assign-precision from a per-layer sensitivity measure), which are stored that way.
"""

QUANTIZED_PRECISIONS = dtypes.QUANTIZED_PRECISIONS


@dataclass(frozen=True)
class GraphInput:
    """How a segment input is bound to the graph: one parameter of `dtype`, or (storage
    `int8`) an int8 parameter plus a per-channel scale reduced over `reduce_dim`, or
    (storage `fp16`) an fp16 parameter widened to `dtype` inside the graph."""

    dtype: np.dtype
    storage: str = "float"
    reduce_dim: int = 1
    constant: bool = False
    """Baked into the graph as constants when it is built (weights bound at compile
    time): no parameter, nothing to bind per call, and OpenVINO can pre-pack the
    matrix and use its compressed-weight kernels for int8."""

    def arrays(self, tensor: torch.Tensor) -> list[np.ndarray]:
        """The parameter arrays for `tensor` (they must outlive the graph's run)."""
        t = tensor.detach()
        if self.storage == "int8":
            return list(quantize_int8(t, self.reduce_dim, self.dtype))
        if self.storage == "fp16":
            return [t.to(torch.float16).contiguous().numpy()]
        return [t.to(_torch_for_numpy(self.dtype)).contiguous().numpy()]


def quantize_int8(
    weight: torch.Tensor, reduce_dim: int, scale_dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-channel int8: `weight ~= q * scale`, |q| <= 127.

    max|w| comes from amax and amin, and rounding and clamping work in place, so a
    weight is copied once (w / scale) rather than four times."""
    w = weight.detach().float()
    largest = torch.maximum(w.amax(reduce_dim, keepdim=True), -w.amin(reduce_dim, keepdim=True))
    scale = largest / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.div(w, scale).round_().clamp_(-127, 127).to(torch.int8)
    return q.contiguous().numpy(), scale.to(_torch_for_numpy(scale_dtype)).numpy()


def graph_input(value: SSAValue, precision: str, constant: bool = False) -> GraphInput:
    """The binding of segment input `value` under `precision`.

    Only linear weights are quantized or kept narrow, at the precision
    `npu.weight_storage` gives (the `precision` attributes npu-assign-precision wrote,
    under `mixed`); every use of the value inside the graph then sees the dequantized
    tensor, so a tied embedding and LM head agree.
    """
    dtype = numpy_dtype(value, PRECISIONS[precision])
    stored = npu.weight_storage(value, precision)
    if stored is None or precision not in QUANTIZED_PRECISIONS:
        return GraphInput(dtype, constant=constant)
    if stored != "int8":
        return GraphInput(dtype, "float" if stored == "fp32" else stored, constant=constant)
    reduce_dim = 0 if npu.weight_in_out(npu.weight_users(value)[0]) else 1  # the scale's axis
    return GraphInput(dtype, "int8", reduce_dim=reduce_dim, constant=constant)


class NoNpuLowering(ForgeError):
    """An op (or a form of it) NNFactory cannot run; the caller falls back to the CPU."""


# ------------------------------------------------------------------ compiled graphs


@dataclass
class CompiledGraph:
    """One compiled NNFactory graph, shared by every segment with the same key."""

    factory: Any
    """The compiled NNFactory, or None when every output is a segment input."""
    compile_seconds: float
    inputs: tuple[GraphInput, ...]
    sources: tuple[tuple[bool, int], ...]
    """Per segment output: (from a graph result?, index of the result or the input)."""
    keepalive: list[np.ndarray] = field(default_factory=list)
    """Arrays the graph's constants share memory with (see `GraphBuilder.weight`)."""
    spilled: list[tuple[int, int]] = field(default_factory=list)
    """The `weight_spill` regions of `keepalive` this graph moved out of memory."""

    def spill_weights(self, folder: Path) -> int:
        """Move the memory of the constants out of the resident set (`weight_spill`),
        once OpenVINO holds its packed copy; the bytes moved. Raises
        `SpillUnavailable` or OSError when nothing could move."""
        if self.factory is None:
            return 0
        if not self.spilled:
            weakref.finalize(self, _release_regions, self.spilled).atexit = False
        moved = 0
        for array in self.keepalive:
            if weight_spill.region_of(array) in self.spilled:
                continue
            key = weight_spill.spill(array, folder)
            if key is not None:
                self.spilled.append(key)
                moved += key[1]
        return moved


def _release_regions(keys: list[tuple[int, int]]) -> None:
    for key in keys:
        weight_spill.release(key)


@dataclass
class CacheStats:
    compiles: int = 0
    hits: int = 0
    compile_seconds: float = 0.0


_GRAPHS: dict[Hashable, CompiledGraph] = {}
STATS = CacheStats()
"""Compile/hit counters of the module-level graph cache (tests and reports read them)."""


def clear_cache() -> None:
    """Drop every compiled graph (frees the OpenVINO models) and reset the counters."""
    _GRAPHS.clear()
    STATS.compiles = STATS.hits = 0
    STATS.compile_seconds = 0.0


@cache
def _bindings() -> Any:
    return importlib.import_module(f"{PACKAGE}.backend.bindings")


def _run_graph(factory: Any) -> None:
    """`NNFactory.run` binds input 0 unconditionally; segments may have no inputs."""
    _bindings().lib.run(factory._mm)


@cache
def _constant_shared() -> Any:
    """The backend's `constant_shared` (added by scripts/build_nnfactory.sh): a Constant
    over the caller's memory instead of a copy; None on a build without it."""
    bindings = _bindings()
    fn = getattr(bindings.lib, "constant_shared", None)
    if fn is None:
        return None
    fn.argtypes = bindings.lib.constant.argtypes
    fn.restype = bindings.handler
    return fn


@cache
def _strided_slice() -> Any:
    """The backend's `slice`, declared right. The library declares its `size_t` mask
    lengths as `c_int`; the second one is passed on the stack, its upper half is
    garbage, and `NNFactory.slice` dies in `std::bad_alloc`. `lib[...]` returns a fresh
    function pointer, so the library's own declaration stays untouched."""
    bindings = _bindings()
    fn = bindings.lib["slice"]
    mask = bindings.c_u32_array
    fn.argtypes = [bindings.handler] * 5 + [ctypes.c_size_t, mask, ctypes.c_size_t, mask]
    fn.restype = bindings.handler
    return fn


# ----------------------------------------------------------------------- segment


_ADDRESSES: weakref.WeakKeyDictionary[Any, tuple[dict[int, int], dict[int, int]]] = (
    weakref.WeakKeyDictionary()
)


def _addresses(factory: Any) -> tuple[dict[int, int], dict[int, int]]:
    """What `factory`'s inputs and outputs point at now, by index, shared by every call
    of it (segments with the same key share one factory): an address it holds already
    is not set again (a decode step binds the same 24 cache buffers at every call)."""
    if factory is None:
        return {}, {}
    found = _ADDRESSES.get(factory)
    if found is None:
        found = _ADDRESSES[factory] = ({}, {})
    return found


_OWNERS: weakref.WeakKeyDictionary[Any, object] = weakref.WeakKeyDictionary()
"""Per factory: the token of the `GraphCall` that bound its inputs last."""

STAGE_BYTES = 4096
"""Inputs of at most this size are copied into memory the graph stays bound to."""


class GraphCall:
    """One call of a compiled graph, as the executor's `Segment` and the printed plan
    (`forge-opt -t python`) both make it: each input bound as its `GraphInput` says
    (`GraphInput.arrays`: converted, or quantized to int8 + scale; nothing for a
    weight baked in as constants, or for an input the graph does not read, `None`), one
    run, results in the IR's dtypes (an output that is an input unchanged passes
    through, converted). One implementation, so the printed plan cannot drift."""

    def __init__(
        self,
        factory: Any,
        inputs: Sequence[GraphInput | None],
        results: Sequence[tuple[bool, int]],
        dtypes: Sequence[torch.dtype],
    ):
        self.factory = factory
        """The compiled NNFactory, or None when no output is computed by a graph."""
        self.inputs = list(inputs)
        self.results = list(results)
        """Per output: (a graph result?, index of the graph result or of the input)."""
        self.dtypes = list(dtypes)
        """Per output: its dtype in the IR."""
        self.bound = [
            i for i, spec in enumerate(self.inputs) if spec is not None and not spec.constant
        ]
        """Inputs bound at every call (the others are baked into the graph)."""
        self._frozen: dict[int, list[np.ndarray]] = {}
        self._parameter: dict[int, int] = {}
        """Per bound input: the index of its first graph parameter (int8 inputs bind two:
        values and scales)."""
        for i in self.bound:
            self._parameter[i] = sum(
                2 if self.inputs[j].storage == "int8" else 1  # type: ignore[union-attr]
                for j in self.bound
                if j < i
            )
        self._dynamic: list[int] = list(self.bound)
        """Bound inputs that are not frozen: bound at every call."""
        self._token = object()
        """Marks the factory's bindings as this call's (`_OWNERS`)."""
        self._stages: dict[int, tuple[np.ndarray, int]] = {}
        """Per graph parameter: the array small inputs are copied into (`_stage`)."""
        self._small: dict[int, tuple[torch.Tensor, np.ndarray, int]] = {}
        """Per small input once staged: (its staged array as a tensor, the array, its
        address); later calls copy the input straight in (one `copy_`)."""
        self._views: dict[int, tuple[torch.Tensor | None, int, list[np.ndarray], list[int]]] = {}
        """Per bound input: (tensor, its address, arrays, their addresses) when the arrays
        are the tensor's own memory, so that the next call with the same tensor reuses
        them; (None, 0, arrays, addresses) for a frozen input (a decode step binds the
        same 24 caches at every call)."""
        self._pool = ResultPool()
        self._input_addresses, self._output_addresses = _addresses(factory)
        self._out_dtypes = (
            [_torch_for_numpy(a.dtype) for a in factory.out] if factory is not None else []
        )
        """The torch dtype of each of the factory's outputs."""
        self._out_shapes = [a.shape for a in factory.out] if factory is not None else []
        self._own_addresses = [a.ctypes.data for a in factory.out] if factory is not None else []
        """Where each of the factory's outputs is written by default (its own arrays)."""
        self._plan_out: Sequence[torch.Tensor | None] | None = None
        self._plan: tuple[list[torch.Tensor | None], list[int], bool] | None = None
        self._pinned: dict[int, torch.Tensor] = {}
        """Per graph result written into the same tensor at every run (`pin`)."""
        self._pinned_addresses: dict[int, int] = {}

    def output_shape(self, output: int) -> tuple[int, ...] | None:
        """The shape the graph gives output `output`, or None where it is not a graph
        result (an input passed through)."""
        computed, i = self.results[output]
        return tuple(self._out_shapes[i]) if computed and self.factory is not None else None

    def can_pin(self, output: int, tensor: torch.Tensor) -> bool:
        """Whether `pin(output, tensor)` may bind it: a graph result of `tensor`'s dtype
        and shape of its own (a result two outputs share is not pinned), `tensor`
        contiguous."""
        computed, i = self.results[output]
        if self.factory is None or not computed or not tensor.is_contiguous():
            return False
        if sum(1 for c, j in self.results if c and j == i) != 1:
            return False
        dtype = self.dtypes[output]
        if self._out_dtypes[i] != dtype or tensor.dtype != dtype:
            return False
        return tuple(tensor.shape) == tuple(self._out_shapes[i])

    def pin(self, output: int, tensor: torch.Tensor) -> None:
        """Write output `output` straight into `tensor` at every run, bound once instead
        of a pooled tensor checked at every call. For a result that nothing keeps past
        the executor's call (a decode step's new cache rows, which the next step copies
        into the cache); `tensor` must not be memory the graph reads (`can_pin` checks
        the rest)."""
        if not self.can_pin(output, tensor):
            raise ValueError(f"output {output} cannot be written into that tensor")
        i = self.results[output][1]
        self._pinned[i] = tensor
        self._pinned_addresses[i] = tensor.data_ptr()
        self._plan_out = self._plan = None  # the pooled results change

    def freeze(self, index: int, tensor: torch.Tensor) -> None:
        """Input `index` is always `tensor` (a weight): convert or quantize it once, here,
        instead of at every call. The caller keeps passing it."""
        if index in self.bound:
            self._views.pop(index, None)
            self._small.pop(index, None)
            self._frozen.pop(index, None)
            self._frozen[index] = self._arrays(index, tensor)
            self._dynamic = [i for i in self.bound if i not in self._frozen]
            if self.factory is not None:
                _OWNERS.pop(self.factory, None)  # bind it at the next call

    def _arrays(self, index: int, tensor: torch.Tensor) -> list[np.ndarray]:
        """The arrays bound for input `index`: frozen once, or made of `tensor` now."""
        frozen = self._frozen.get(index)
        if frozen is not None:
            return frozen
        spec = self.inputs[index]
        assert spec is not None, "only inputs in `bound` are bound"
        return spec.arrays(tensor)

    def __call__(
        self, *tensors: torch.Tensor, out: Sequence[torch.Tensor | None] = ()
    ) -> tuple[torch.Tensor, ...]:
        """Run the graph; an output with a tensor in `out` is written there (its arena
        buffer), the others get fresh storage."""
        if len(tensors) != len(self.inputs):
            raise ForgeError(f"segment expects {len(self.inputs)} inputs, got {len(tensors)}")
        factory, computed_results, fresh = self.factory, [], {}
        targets, wanted, direct = self._output_plan(out)
        if factory is not None:
            # The arrays must stay alive until the run: the graph reads them in place.
            arrays = self._bind_inputs(factory, tensors)  # noqa: F841
            fresh = self._bind_outputs(factory, wanted)
            _run_graph(factory)
            if direct:
                return tuple(fresh[i] for _, i in self.results)
            computed_results = factory.out
        # The factory reuses its output buffers on the next run: copy them out, except
        # the ones it wrote straight into fresh tensors.
        outputs = []
        for (computed, i), dtype, target in zip(self.results, self.dtypes, targets, strict=True):
            written = fresh.get(i) if computed else None
            if written is not None and written.dtype == dtype and target is None:
                outputs.append(written)
                continue
            if written is not None:
                value = written
            else:
                value = computed_results[i] if computed else tensors[i]
            value = torch.from_numpy(value) if isinstance(value, np.ndarray) else value
            outputs.append(_copy_out(value, dtype, target))
        return tuple(outputs)

    def _output_plan(
        self, out: Sequence[torch.Tensor | None]
    ) -> tuple[list[torch.Tensor | None], list[int], bool]:
        """(a target per output, the graph results written into pooled tensors, whether
        every output is such a result), for `out`: decided once for an executor step,
        which passes the same `out` at every call."""
        if out is self._plan_out and self._plan is not None:
            return self._plan
        targets = list(out) or [None] * len(self.results)
        pooled = [
            computed
            and target is None
            and i < len(self._out_dtypes)
            and self._out_dtypes[i] == dtype
            for (computed, i), dtype, target in zip(self.results, self.dtypes, targets, strict=True)
        ]
        wanted = sorted(
            {i for (_, i), ok in zip(self.results, pooled, strict=True) if ok} - self._pinned.keys()
        )
        self._plan_out = out
        self._plan = (targets, wanted, all(pooled))
        return self._plan

    def _bind_inputs(self, factory: Any, tensors: Sequence[torch.Tensor]) -> list[np.ndarray]:
        """Point the graph's parameters at the arrays of the bound inputs (an address it
        holds already is not set again; frozen inputs stay bound while no other call of
        the same factory rebinds them); returns the arrays the run reads."""
        held = self._input_addresses
        mine = _OWNERS.get(factory) is self._token
        kept: list[np.ndarray] = []
        for i in self._dynamic if mine else self.bound:
            tensor, index = tensors[i], self._parameter[i]
            small = self._small.get(i)
            if small is not None and tensor.shape == small[0].shape:
                small[0].copy_(tensor.detach())  # converts as `GraphInput.arrays` does
                if held.get(index) != small[2]:
                    factory.set_input_tensor(small[1], index)
                    held[index] = small[2]
                continue
            arrays, addresses = self._input_arrays(i, tensor)
            frozen = i in self._frozen  # bound where it lives: state changes in place
            for array, address in zip(arrays, addresses, strict=True):
                if held.get(index) != address and not frozen:
                    staged, address = self._stage(index, array, address)
                    if staged is not array and len(arrays) == 1:
                        self._small[i] = (torch.from_numpy(staged), staged, address)
                    array = staged
                if held.get(index) != address:
                    factory.set_input_tensor(array, index)
                    held[index] = address
                kept.append(array)
                index += 1
        _OWNERS[factory] = self._token
        return kept

    def _input_arrays(self, i: int, tensor: torch.Tensor) -> tuple[list[np.ndarray], list[int]]:
        """Input `i`'s arrays and their addresses, reused while they are `tensor`'s own
        memory or frozen."""
        view = self._views.get(i)
        if view is not None and (
            view[0] is None or (view[0] is tensor and view[1] == tensor.data_ptr())
        ):
            return view[2], view[3]
        arrays = self._arrays(i, tensor)
        addresses = [array.ctypes.data for array in arrays]
        if i in self._frozen:
            self._views[i] = (None, 0, arrays, addresses)
        elif addresses == [tensor.data_ptr()]:
            self._views[i] = (tensor, addresses[0], arrays, addresses)
        return arrays, addresses

    def _stage(self, index: int, array: np.ndarray, address: int) -> tuple[np.ndarray, int]:
        """A small array (a token id, a position) copied into the same memory at every
        call, so the graph's parameter stays bound to it: OpenVINO's `set_input_tensor`
        costs more than the copy. Larger arrays are bound where they are."""
        if array.nbytes > STAGE_BYTES:
            return array, address
        stage = self._stages.get(index)
        if stage is None or stage[0].shape != array.shape or stage[0].dtype != array.dtype:
            staged = np.empty(array.shape, array.dtype)
            stage = self._stages[index] = (staged, staged.ctypes.data)
        np.copyto(stage[0], array)
        return stage

    def _bind_outputs(self, factory: Any, wanted: Sequence[int]) -> dict[int, torch.Tensor]:
        """Point each graph result at its destination for this run: its tensor for a
        pinned result (`pin`), a pooled tensor for the `wanted` results (the function's
        results, such as the logits, and values no arena buffer holds), so the graph
        writes them in place instead of into its own array plus a copy; the factory's
        own array otherwise. Arena buffers are not
        written in place: linear scan may give an output the buffer of an input of the
        same segment, which the graph still reads while it writes its results."""
        lib = _bindings().lib
        held = self._output_addresses
        fresh: dict[int, torch.Tensor] = dict(self._pinned)
        for i, address in self._pinned_addresses.items():
            if held.get(i) != address:
                lib.set_output(factory._mm, address, i)
                held[i] = address
        take = self._pool.take
        for i in wanted:
            tensor = fresh[i] = take(i, self._out_shapes[i], self._out_dtypes[i])
            address = tensor.data_ptr()
            if held.get(i) != address:
                lib.set_output(factory._mm, address, i)
                held[i] = address
        if len(fresh) < len(self._own_addresses):
            for i, address in enumerate(self._own_addresses):
                if i not in fresh and held.get(i) != address:
                    lib.set_output(factory._mm, address, i)
                    held[i] = address
        return fresh


class Segment:
    """A lowered segment: call it with the tensors of `inputs`, get those of `outputs`
    (the call is its `GraphCall`)."""

    def __init__(
        self,
        ops: Sequence[Operation],
        inputs: list[SSAValue],
        outputs: list[SSAValue],
        precision: str,
        graph: CompiledGraph | None,
        cached: bool,
    ):
        self.ops = list(ops)
        self.inputs = inputs
        self.outputs = outputs
        self.precision = precision
        self.graph = graph
        self.cached = cached
        """True when the graph came from the cache instead of a compile."""
        self.graph_inputs = list(graph.inputs) if graph else []
        """How the call binds each input (the graph's parameter types)."""
        self.output_dtypes = [torch_dtype(_element(v)) for v in outputs]
        """What the call returns: the IR's element types."""
        self.call = (
            GraphCall(graph.factory, graph.inputs, graph.sources, self.output_dtypes)
            if graph is not None
            else GraphCall(None, [None] * len(inputs), (), ())
        )
        self.bound = self.call.bound
        """Inputs bound at every call (the others are baked into the graph)."""

    def freeze(self, index: int, tensor: torch.Tensor) -> None:
        """See `GraphCall.freeze`."""
        self.call.freeze(index, tensor)

    @property
    def compile_seconds(self) -> float:
        return self.graph.compile_seconds if self.graph is not None and not self.cached else 0.0

    def __call__(
        self, *tensors: torch.Tensor, out: Sequence[torch.Tensor | None] = ()
    ) -> tuple[torch.Tensor, ...]:
        return self.call(*tensors, out=out)


class ResultPool:
    """Tensors a graph writes its unbuffered results into, one per result index.

    A result handed to the caller is reused at the next call once nothing else refers
    to it or to its memory (no name, no view, no numpy array): the common loop
    `logits = run(x)` then writes into memory that is already mapped, instead of
    faulting in 25 MB of fresh pages (about 7 ms for GPT-2's logits) at every call.
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[torch.Tensor, int, int, int]] = {}
        """Per index: (tensor, its storage's handle, its reference and storage use
        counts while only the pool holds it)."""

    def take(self, index: int, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        entry = self._entries.get(index)
        if entry is not None:
            tensor, storage, references, uses = entry
            if (
                uses >= 0
                and sys.getrefcount(tensor) == references
                and _storage_uses(storage) == uses
                and tensor.shape == tuple(shape)
                and tensor.dtype == dtype
            ):
                return tensor
        tensor = torch.empty(tuple(shape), dtype=dtype)
        storage = tensor.untyped_storage()._cdata
        # The idle counts are taken as `take` sees them: the pool's entry and a local.
        self._entries[index] = (tensor, storage, 0, 0)
        references = sys.getrefcount(tensor)
        uses = _storage_uses(storage)
        self._entries[index] = (tensor, storage, references, uses)
        return tensor


def _storage_uses(storage: int) -> int:
    """How many tensors and views share a storage (-1 where torch cannot say)."""
    use_count = getattr(torch._C, "_storage_Use_Count", None)
    return use_count(storage) if use_count is not None else -1


def _copy_out(value: torch.Tensor, dtype: torch.dtype, target: torch.Tensor | None) -> torch.Tensor:
    if target is not None and target.shape == value.shape and target.dtype == dtype:
        return target.copy_(value)
    return value.to(dtype, copy=True)


def segment_boundary(ops: Sequence[Operation]) -> tuple[list[SSAValue], list[SSAValue]]:
    """(values read from outside in first-use order, values used outside in def order)."""
    inside = set(ops)
    defined: set[SSAValue] = set()
    inputs: list[SSAValue] = []
    seen: set[SSAValue] = set()
    for op in ops:
        for v in op.operands:
            if v not in defined and v not in seen:
                seen.add(v)
                inputs.append(v)
        defined.update(op.results)
    outputs = [
        r for op in ops for r in op.results if any(u.operation not in inside for u in r.uses)
    ]
    return inputs, outputs


def build_segment(
    ops: Sequence[Operation],
    precision: str = "fp32",
    *,
    trace: GraphTrace | None = None,
    constants: Mapping[SSAValue, torch.Tensor] | None = None,
) -> Segment:
    """Lower `ops` (consecutive, NPU-placed) into one NNFactory graph, compiled once.

    Inputs in `constants` (weights) are baked into the graph; the others become
    parameters bound per call. With `trace`, the graph is built afresh, bypassing the
    cache both ways, so that every NNFactory call it takes is shown to `trace`.
    """
    constants = constants or {}
    if precision not in PRECISIONS:
        raise ForgeError(f"precision must be one of {', '.join(PRECISIONS)}, got '{precision}'")
    inputs, outputs = segment_boundary(ops)
    if not outputs:
        return Segment(ops, inputs, outputs, precision, None, cached=False)
    specs = [graph_input(v, precision, constant=v in constants) for v in inputs]
    # Baked tensors are part of what the graph computes: key them by identity.
    baked = tuple((id(constants[v]), constants[v].data_ptr()) for v in inputs if v in constants)
    key = _cache_key(ops, inputs, outputs, precision, specs), baked
    graph = _GRAPHS.get(key) if trace is None else None
    if graph is not None:
        STATS.hits += 1
        return Segment(ops, inputs, outputs, precision, graph, cached=True)
    graph = _compile(ops, inputs, outputs, PRECISIONS[precision], specs, trace, constants)
    if trace is not None:
        return Segment(ops, inputs, outputs, precision, graph, cached=False)
    _GRAPHS[key] = graph
    STATS.compiles += 1
    STATS.compile_seconds += graph.compile_seconds
    return Segment(ops, inputs, outputs, precision, graph, cached=False)


def _cache_key(
    ops: Sequence[Operation],
    inputs: list[SSAValue],
    outputs: list[SSAValue],
    precision: str,
    specs: list[GraphInput],
) -> Hashable:
    """The segment's structure: op names, properties, operand wiring and all types.

    Attributes compare and hash by value, so they are the key themselves. Discardable
    attributes (device, vreg, live, buffer) are left out: they do not change what the
    graph computes, and they differ between transformer layers.
    """
    where: dict[SSAValue, tuple[int, int]] = {v: (-1, i) for i, v in enumerate(inputs)}
    body = []
    for j, op in enumerate(ops):
        properties = tuple(sorted(op.properties.items(), key=lambda item: item[0]))
        operands = tuple(where[v] for v in op.operands)
        types = tuple(r.type for r in op.results)
        body.append((op.name, properties, operands, types))
        where.update({r: (j, k) for k, r in enumerate(op.results)})
    return (
        precision,
        os.environ.get("NNFACTORY_SNIPPETS_MODE"),
        os.environ.get("NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE", "0"),
        _LINEAR_KERNELS.get(),
        _INT8_KERNELS.get(),
        _SNIPPETS.get(),
        tuple(specs),
        tuple(v.type for v in inputs),
        tuple(body),
        tuple(where[v] for v in outputs),
    )


class GraphTrace(Protocol):
    """Watches a graph being built (`forge.conversion.plan_to_python` prints it)."""

    def wrap(self, factory: Any) -> Any:
        """What the builder calls instead of `factory` (a recording proxy)."""
        ...

    def lowering(self, op: Operation) -> None:
        """The builder's next calls lower `op`."""
        ...


def snippets_mode(ops: Sequence[Operation], measured: bool = True) -> str:
    """How OpenVINO's CPU plugin may use snippets (JIT-fused subgraphs) for this graph:
    NNFACTORY_SNIPPETS_MODE where the user set it, else what the host profile measured
    for a graph of its rows (`snippets_by_rows`; `measured` False for graphs that are
    not fp32 throughout, which the profile did not time), else `DISABLE`.

    Snippets fuse MatMul-Softmax-MatMul(-Transpose) into one MHA kernel and runs of
    elementwise ops into one loop, and in 2024.4 the MHA kernel computes garbage when
    the heads and sequence dims are equal (found by `forge fuzz-models`;
    test_nnfactory_graph has the cases): such graphs are always compiled without
    snippets, whatever the variable or the profile says. They cost compile time (GPT-2's
    graph 0.73 -> 0.83 s on an AMD EPYC Zen 3) and pay off on some hosts and row counts
    only, so the profile decides.
    """
    for op in ops:
        if not isinstance(op, npu.SDPAOp | npu.MatmulOp):
            continue
        for value in [*op.operands, *op.results]:
            shape = value.type.get_shape() if isinstance(value.type, TensorType) else ()
            if len(shape) >= 4 and shape[-3] == shape[-2]:
                return "DISABLE"
    if "NNFACTORY_SNIPPETS_MODE" in os.environ:
        return os.environ["NNFACTORY_SNIPPETS_MODE"]
    rule = _SNIPPETS.get() if measured else ()
    rows = [linear_rows(op) for op in ops if isinstance(op, npu.WEIGHTED_LINEAR_OPS)]
    if not rule or not rows:
        return "DISABLE"
    return "ENABLE" if _nearest(rule, max(rows)) else "DISABLE"


SnippetsRule = tuple[tuple[int, bool], ...]
"""(rows, snippets on) per measured row count (`forge.transforms.host_profile.
KernelTiming.snippets`): an fp32 graph whose largest linear has the nearest row count
(log scale) compiles with OpenVINO's snippets on or off; none measured: off."""

_SNIPPETS: contextvars.ContextVar[SnippetsRule] = contextvars.ContextVar("snippets", default=())


@contextlib.contextmanager
def snippets_by_rows(rule: SnippetsRule) -> Iterator[None]:
    """Graphs compiled inside use OpenVINO's snippets where `rule` says so for their
    rows (`snippets_mode`)."""
    token = _SNIPPETS.set(tuple(rule))
    try:
        yield
    finally:
        _SNIPPETS.reset(token)


@contextlib.contextmanager
def host_choices(profile: HostProfile | None) -> Iterator[None]:
    """Graphs built inside follow `profile`'s measured choices: the fp32 and int8
    linears' kernel forms (`linear_kernels`) and OpenVINO's snippets
    (`snippets_by_rows`); with no profile, OpenVINO's own forms and no snippets."""
    kernels = profile.kernel_rule() if profile else ()
    int8 = profile.int8_kernel_rule() if profile else ()
    snippets = profile.snippets_rule() if profile else ()
    with linear_kernels(kernels, int8=int8), snippets_by_rows(snippets):
        yield


def _nearest(rule: Sequence[tuple[int, Any]], rows: int) -> Any:
    """The value of `rule`'s entry whose row count is nearest `rows` (log scale)."""
    bucket = min(rule, key=lambda entry: abs(math.log(max(rows, 1) / max(entry[0], 1))))
    return bucket[1]


@contextlib.contextmanager
def _nnfactory_env(name: str, value: str) -> Iterator[None]:
    """`name` set to `value` while graphs compile: NNFactory's build reads its settings
    (NNFACTORY_SNIPPETS_MODE, NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE) at every
    compile."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def _snippets_mode(mode: str) -> contextlib.AbstractContextManager[None]:
    return _nnfactory_env("NNFACTORY_SNIPPETS_MODE", mode)


DYNAMIC_QUANTIZATION_GROUP = 32
"""Activations per scale when OpenVINO quantizes them at run time (its CPU default)."""


def dynamic_quantization(enabled: bool) -> contextlib.AbstractContextManager[None]:
    """Graphs compiled inside quantize the activations of their int8-weight MatMuls to
    int8 at run time, in groups of `DYNAMIC_QUANTIZATION_GROUP` (OpenVINO's dynamic
    quantization: int8 x int8 products, about twice as fast as weight-only int8 for a
    prompt here, and further from the fp32 logits); off (0) by default."""
    group = DYNAMIC_QUANTIZATION_GROUP if enabled else 0
    return _nnfactory_env("NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE", str(group))


KernelRule = tuple[tuple[int, str], ...]
"""(rows, kernel) per measured row count (`forge.transforms.host_profile.KernelTiming`),
kernel one of `LINEAR_KERNELS`; a linear takes the nearest one's (log scale), none
measured: "fused"."""

LINEAR_KERNELS = ("fused", "apart", "onednn")
"""How an fp32 linear reaches OpenVINO. "fused": as it is (OpenVINO fuses an activation
into the FullyConnected, which then runs oneDNN's kernel; a plain linear runs MLAS).
"apart": activations kept out of the FullyConnected, so every linear runs MLAS.
"onednn": activations fused and every plain linear given an exact post-op, so every
linear runs oneDNN's kernel."""

_LINEAR_KERNELS: contextvars.ContextVar[KernelRule] = contextvars.ContextVar(
    "linear_kernels", default=()
)


_INT8_KERNELS: contextvars.ContextVar[KernelRule] = contextvars.ContextVar(
    "int8_linear_kernels", default=()
)

INT8_KERNELS = ("fused", "apart")
"""How an int8-weight linear with an activation reaches OpenVINO (its kernel is oneDNN's
either way): the activation fused into the FullyConnected, or computed after it."""


@contextlib.contextmanager
def linear_kernels(rule: KernelRule, int8: KernelRule = ()) -> Iterator[None]:
    """Graphs built inside lower each fp32 linear for the kernel `rule` gives its row
    count (`LINEAR_KERNELS`), and each int8-weight linear for the form `int8` gives it
    (`INT8_KERNELS`).

    A FullyConnected with a post-op (a fused activation) cannot take OpenVINO's MLAS
    kernel: with fp32 weights it runs oneDNN's brgemm/brgconv instead. Which wins
    depends on the host and the rows: on an AMD EPYC Zen 4 (2 cores) MLAS reads a
    one-row (decode) product's weights about 20% faster (12 GPT-2 MLPs 8.5 -> 7.0 ms),
    and oneDNN computes a 100-row (prompt) product about 12% faster (24 GPT-2 linears
    55.0 -> 48.4 ms). `forge doctor --profile` measures it."""
    unknown = [kernel for _rows, kernel in rule if kernel not in LINEAR_KERNELS]
    unknown += [kernel for _rows, kernel in int8 if kernel not in INT8_KERNELS]
    if unknown:
        raise ForgeError(f"unknown linear kernel(s) {', '.join(unknown)}")
    token = _LINEAR_KERNELS.set(tuple(rule))
    int8_token = _INT8_KERNELS.set(tuple(int8))
    try:
        yield
    finally:
        _INT8_KERNELS.reset(int8_token)
        _LINEAR_KERNELS.reset(token)


def linear_kernel(rule: KernelRule, rows: int) -> str:
    """`rule`'s kernel for a product of `rows` rows: the nearest measured row count's."""
    return _nearest(rule, rows) if rule else "fused"


def _compile(
    ops: Sequence[Operation],
    inputs: list[SSAValue],
    outputs: list[SSAValue],
    float_dtype: type[np.floating],
    specs: list[GraphInput],
    trace: GraphTrace | None = None,
    constants: Mapping[SSAValue, torch.Tensor] | None = None,
) -> CompiledGraph:
    """Build and compile the graph; the time covers both (what a cache hit saves)."""
    start = time.perf_counter()
    factory = load_backend().NNFactory()
    builder = GraphBuilder(
        trace.wrap(factory) if trace is not None else factory,
        float_dtype,
        share_weights=trace is None,  # a traced build prints `constant`, which copies
    )
    for v, spec in zip(inputs, specs, strict=True):
        builder.add_parameter(v, spec, (constants or {}).get(v))
    for op in ops:
        if trace is not None:
            trace.lowering(op)
        builder.lower(op)
    # NNFactory guesses results as "nodes nobody consumed"; a segment's results are
    # the values used after it, which may also be consumed inside it. An output that
    # is an input unchanged (contiguous, eval dropout, float casts) passes through in
    # Python, exact and free; outputs sharing a node share one Result.
    parameters = {_address(builder.node(v)): i for i, v in enumerate(inputs)}
    results: dict[int, int] = {}
    sources: list[tuple[bool, int]] = []
    for v in outputs:
        address = _address(builder.node(v))
        if address in parameters:
            sources.append((False, parameters[address]))
        else:
            sources.append((True, results.setdefault(address, len(results))))
    if not results:
        return CompiledGraph(
            None, time.perf_counter() - start, tuple(specs), tuple(sources), builder.keepalive
        )
    nodes = {_address(builder.node(v)): builder.node(v).node for v in outputs}
    builder.factory.output_nodes = [nodes[address] for address in results]
    fp32 = float_dtype is np.float32 and all(s == "float" for s in builder.storages.values())
    with _snippets_mode(snippets_mode(ops, measured=fp32)):
        builder.factory.compile()
    return CompiledGraph(
        factory, time.perf_counter() - start, tuple(specs), tuple(sources), builder.keepalive
    )


def _address(node: Node) -> int:
    return ctypes.cast(node.node, ctypes.c_void_p).value or 0


# ------------------------------------------------------------------- the builder


def _element(value: SSAValue) -> Attribute:
    t = value.type
    if not isinstance(t, TensorType):
        raise NoNpuLowering(f"non-tensor value of type {t}")
    return t.get_element_type()


def _shape(value: SSAValue) -> list[int]:
    t = value.type
    assert isinstance(t, TensorType)
    shape = list(t.get_shape())
    if DYNAMIC in shape:
        raise NoNpuLowering(f"dynamic shape {t}")
    return shape


def numpy_dtype(value: SSAValue, float_dtype: type[np.floating]) -> np.dtype:
    """The graph dtype of `value`: `float_dtype` for floats, the same-width int else."""
    element = _element(value)
    if is_float(element):
        return np.dtype(float_dtype)
    if isinstance(element, IntegerType) and not is_bool(element):
        width = element.width.data
        if width in (8, 16, 32, 64):
            return np.dtype(f"int{width}")
    raise NoNpuLowering(f"no NNFactory dtype for element type {element}")


def _torch_for_numpy(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=dtype)).dtype


def _int(attr: IntegerAttr) -> int:
    return attr.value.data


def _ints(attr: Any) -> list[int]:
    return list(attr.get_values())


def _scalar(attr: FloatAttr | IntegerAttr) -> float:
    return float(attr.value.data)


def _axis(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


class GraphBuilder:
    """Maps SSA values to NNFactory nodes while lowering one op at a time.

    Every float tensor of the graph has one dtype (`float_dtype`): the IR's float
    types only matter at the segment boundary, where `Segment.__call__` converts.
    """

    def __init__(self, factory: Any, float_dtype: type[np.floating], share_weights: bool = False):
        self.factory = factory
        self.float_dtype = float_dtype
        self.values: dict[SSAValue, Node] = {}
        self.storages: dict[SSAValue, str] = {}
        """How each segment input is stored (`GraphInput.storage`)."""
        self.share_weights = share_weights
        self.keepalive: list[np.ndarray] = []

    # -- values

    def numpy_dtype(self, value: SSAValue) -> np.dtype:
        return numpy_dtype(value, self.float_dtype)

    def add_parameter(
        self, value: SSAValue, spec: GraphInput, tensor: torch.Tensor | None = None
    ) -> None:
        """Bind a segment input: one parameter, or a stored weight widened in-graph;
        with `spec.constant`, `tensor`'s data as constants instead of parameters."""
        shape = _shape(value)
        self.storages[value] = spec.storage
        if spec.constant:
            assert tensor is not None, "a constant input needs its tensor"
            stored = [self.weight(array) for array in spec.arrays(tensor)]
        elif spec.storage == "int8":
            scale_shape = [1 if d == spec.reduce_dim else n for d, n in enumerate(shape)]
            stored = [
                self.factory.parameter(shape, np.int8),
                self.factory.parameter(scale_shape, self.float_dtype),
            ]
        elif spec.storage == "fp16":
            stored = [self.factory.parameter(shape, np.float16)]
        else:
            stored = [self.factory.parameter(shape, self.numpy_dtype(value))]
        if spec.storage == "int8":
            quantized, scale = stored
            stored = [self.factory.eltwise_mul(self.factory.to(quantized, self.float_dtype), scale)]
        elif spec.storage == "fp16":
            stored = [self.factory.to(stored[0], self.float_dtype)]
        self.values[value] = stored[0]

    def node(self, value: SSAValue) -> Node:
        return self.values[value]

    def weight(self, array: np.ndarray) -> Node:
        """A weight baked in as a constant. Shared with `array` when the backend can
        (OpenVINO packs it into its kernels' layout at compile time anyway): copying
        GPT-2's 500 MB first cost about a third of a second per compile."""
        shared = _constant_shared() if self.share_weights else None
        if shared is None:
            return self.factory.constant(array)
        array = np.ascontiguousarray(array)
        self.keepalive.append(array)
        shape = np.array(array.shape, dtype=np.uint32)
        dtype = self.factory.get_backend_dtype(array.dtype)
        node = shared(self.factory._mm, shape.size, shape, dtype, array.ctypes.data)
        return importlib.import_module(f"{PACKAGE}.backend.tensor").Tensor(self.factory, node)

    def constant(self, data: Any, dtype: np.dtype | type | None = None) -> Node:
        return self.factory.constant(np.asarray(data, dtype=dtype or self.float_dtype))

    # -- lowering

    def lower(self, op: Operation) -> None:
        lowering = _lowering_for(op)
        if lowering is None:
            raise NoNpuLowering(f"no NNFactory lowering for '{op.name}'")
        nodes = lowering(self, op)
        if not isinstance(nodes, list):
            nodes = [nodes]
        self.values.update(zip(op.results, nodes, strict=True))

    def require_float(self, op: Operation) -> None:
        """Arithmetic lowers only on floats: OpenVINO's integer Divide truncates, ATen's
        promotes, and NNFactory has no boolean ops."""
        for v in [*op.operands, *op.results]:
            if not is_float(_element(v)):
                raise NoNpuLowering(f"'{op.name}' on element type {_element(v)}")

    # -- building blocks shared by several ops

    def sub(self, a: Node, b: Node) -> Node:
        return self.factory.eltwise_add(a, self.factory.negative(b))

    def reciprocal(self, x: Node) -> Node:
        return self.factory.eltwise_div(self.constant(1.0), x)

    def power(self, x: Node, exponent: Node) -> Node:
        # `NNFactory.power` insists on equal shapes; the backend op broadcasts.
        return self.factory._call_backend_op("power", x, exponent)

    def slice(self, x: Node, begin: list[int], end: list[int], stride: list[int]) -> Node:
        """StridedSlice through the corrected binding (see `_strided_slice`)."""
        masks = np.zeros(len(begin), dtype=np.uint32)
        bounds = [self.constant(v, np.int64).node for v in (begin, end, stride)]
        node = _strided_slice()(
            self.factory._mm, x.node, *bounds, masks.size, masks, masks.size, masks
        )
        return importlib.import_module(f"{PACKAGE}.backend.tensor").Tensor(self.factory, node)

    def reshape(self, x: Node, shape: Sequence[int]) -> Node:
        return self.factory.reshape(x, list(shape))

    def matmul(self, a: SSAValue, b: SSAValue, transpose_b: bool = False) -> Node:
        """`a @ b` (`a @ b^T` with `transpose_b`), folding a transpose of the last two
        dims that produced either operand into MatMul's transpose flags."""
        a_node, transpose_a = self._untransposed(a)
        b_node, folded_b = self._untransposed(b)
        return self.factory.matmul(a_node, b_node, transpose_a, transpose_b != folded_b)

    def _untransposed(self, value: SSAValue) -> tuple[Node, bool]:
        owner = value.owner
        if (
            isinstance(owner, npu.TransposeOp)
            and owner.input in self.values
            and len(_shape(owner.input)) >= 2
        ):
            rank = len(_shape(owner.input))
            dims = {_axis(_int(owner.dim0), rank), _axis(_int(owner.dim1), rank)}
            if dims == {rank - 2, rank - 1}:
                return self.node(owner.input), True
        return self.node(value), False

    def linear(self, x: SSAValue, w: SSAValue, bias: SSAValue | None, weight_in_out: bool) -> Node:
        y = self.matmul(x, w, transpose_b=not weight_in_out)
        return self.factory.eltwise_add(y, self.node(bias)) if bias is not None else y


# ----------------------------------------------------------------- elementwise

UNARY: dict[type[npu.UnaryOp], str] = {
    npu.NegOp: "negative",
    npu.AbsOp: "abs",
    npu.ExpOp: "exp",
    npu.LogOp: "log",
    npu.SqrtOp: "sqrt",
    npu.TanhOp: "tanh",
    npu.SinOp: "sin",
    npu.CosOp: "cos",
    npu.ErfOp: "erf",
    npu.ReluOp: "relu",
    npu.SigmoidOp: "sigmoid",
    npu.SiluOp: "swish",
}
"""Unary ops with an NNFactory node of their own (the factory's method names)."""

ACTIVATIONS: dict[str, str | None] = {
    "none": None,
    "relu": "relu",
    "gelu": "gelu_erf",
    "gelu_tanh": "gelu",  # NNFactory's `gelu` is the tanh approximation
    "silu": "swish",
    "sigmoid": "sigmoid",
}


def lower_unary(b: GraphBuilder, op: npu.UnaryOp) -> Node:
    x = b.node(op.input)
    match op:
        case npu.ContiguousOp():
            return x
        case npu.DropoutOp():
            if op.train is not None:
                raise NoNpuLowering("training-mode 'npu.dropout' (random masks)")
            return x
    b.require_float(op)
    match op:
        case npu.GeluOp():
            approximate = op.approximate.data if op.approximate is not None else "none"
            return b.factory.gelu(x) if approximate == "tanh" else b.factory.gelu_erf(x)
        case npu.RsqrtOp():
            return b.reciprocal(b.factory.sqrt(x))
        case npu.ReciprocalOp():
            return b.reciprocal(x)
    name = UNARY.get(type(op))
    if name is None:
        raise NoNpuLowering(f"no NNFactory lowering for '{op.name}'")
    return getattr(b.factory, name)(x)


def lower_binary(b: GraphBuilder, op: npu.BinaryOp) -> Node:
    b.require_float(op)
    x = b.node(op.lhs)
    y = b.node(op.rhs) if op.rhs is not None else b.constant(_scalar(op.scalar))
    f = b.factory
    match op:
        case npu.AddOp():
            return f.eltwise_add(x, y)
        case npu.SubOp():
            return b.sub(x, y)
        case npu.MulOp():
            return f.eltwise_mul(x, y)
        case npu.DivOp():
            return f.eltwise_div(x, y)
        case npu.PowOp():
            return b.power(x, y)
        case npu.MaximumOp():  # max(x, y) = x + relu(y - x)
            return f.eltwise_add(x, f.relu(b.sub(y, x)))
        case npu.MinimumOp():  # min(x, y) = x - relu(x - y)
            return b.sub(x, f.relu(b.sub(x, y)))
    raise NoNpuLowering(f"no NNFactory lowering for '{op.name}'")


def lower_cast(b: GraphBuilder, op: npu.CastOp) -> Node:
    """Float-to-float casts are the identity inside the graph: the whole graph runs in
    one precision (OpenVINO also folds a Convert round trip, so the narrow type's
    rounding could not be emulated anyway); the boundary converts to the IR types."""
    if not (is_float(_element(op.input)) and is_float(_element(op.result))):
        raise NoNpuLowering(f"cast {_element(op.input)} -> {_element(op.result)}")
    return b.node(op.input)


def lower_constant(b: GraphBuilder, op: npu.ConstantOp) -> Node:
    value: DenseIntOrFPElementsAttr = op.value
    dtype = b.numpy_dtype(op.result)
    shape = _shape(op.result)
    data = np.asarray(list(value.get_values()), dtype=dtype)
    data = data.reshape(shape) if data.size == math.prod(shape) else np.full(shape, data[0])
    return b.constant(data, dtype)


# ---------------------------------------------------------------- contractions


def lower_matmul(b: GraphBuilder, op: npu.MatmulOp) -> Node:
    b.require_float(op)
    return b.matmul(op.lhs, op.rhs)


def lower_linear(b: GraphBuilder, op: npu.LinearOp) -> Node:
    b.require_float(op)
    y = b.linear(op.input, op.weight, op.bias, weight_in_out=False)
    return _onednn_switch(b, y) if _linear_kernel(b, op) == "onednn" else y


def lower_addmm(b: GraphBuilder, op: npu.AddmmOp) -> Node:
    b.require_float(op)
    y = b.linear(op.input, op.weight, op.bias, weight_in_out=True)
    return _onednn_switch(b, y) if _linear_kernel(b, op) == "onednn" else y


def lower_fused_linear(b: GraphBuilder, op: npu.FusedLinearOp) -> Node:
    b.require_float(op)
    y = b.linear(op.input, op.weight, op.bias, weight_in_out=op.weight_in_out is not None)
    activation = ACTIVATIONS[op.activation.data]
    kernel = _linear_kernel(b, op)
    if activation is None:
        return _onednn_switch(b, y) if kernel == "onednn" else y
    if kernel == "apart":
        y = _fusion_barrier(b, y)
        if op.activation.data == "gelu_tanh":
            return _gelu_tanh_by_sigmoid(b, y)
    return getattr(b.factory, activation)(y)


GELU_TANH_K = math.sqrt(2.0 / math.pi)
GELU_TANH_A = 0.044715


def _gelu_tanh_by_sigmoid(b: GraphBuilder, x: Node) -> Node:
    """`x * sigmoid(x * (2k + 2ka * x^2))`, the tanh GELU rewritten
    (`0.5 * (1 + tanh(z)) == sigmoid(2z)`) for where OpenVINO computes it apart from the
    FullyConnected: its Tanh is an expensive elementwise kernel, its Sigmoid a cheap one
    (on an AMD EPYC Zen 3, per 128x3072 tensor: Gelu 1.43 ms, this form 0.51 ms)."""
    f = b.factory
    cubic = f.eltwise_mul(f.eltwise_mul(x, x), b.constant(2 * GELU_TANH_K * GELU_TANH_A))
    slope = f.eltwise_add(cubic, b.constant(2 * GELU_TANH_K))
    return f.eltwise_mul(x, f.sigmoid(f.eltwise_mul(x, slope)))


def _linear_kernel(b: GraphBuilder, op: npu.LinearOp | npu.AddmmOp | npu.FusedLinearOp) -> str:
    """The kernel `linear_kernels` asks for: fp32 weights in an fp32 graph choose among
    `LINEAR_KERNELS` (MLAS takes no other), int8 weights among `INT8_KERNELS`."""
    storage = b.storages.get(op.weight, "float")
    if b.float_dtype is not np.float32 or storage not in ("float", "int8"):
        return "fused"
    rule = _LINEAR_KERNELS.get() if storage == "float" else _INT8_KERNELS.get()
    return linear_kernel(rule, linear_rows(op))


def linear_rows(op: npu.LinearOp | npu.AddmmOp | npu.FusedLinearOp) -> int:
    """The rows of a linear's product (its input's dims but the last)."""
    return math.prod(_shape(op.input)[:-1])


def _fusion_barrier(b: GraphBuilder, y: Node) -> Node:
    """`(y + y) * 0.5`, which is `y` bit for bit (doubling and halving are exact): an
    Add of a node with itself is no FullyConnected post-op, so OpenVINO keeps the
    MatMul apart and fuses the halving and the activation into one small Eltwise."""
    return b.factory.eltwise_mul(b.factory.eltwise_add(y, y), b.constant(0.5))


def _onednn_switch(b: GraphBuilder, y: Node) -> Node:
    """`PRelu(y, 1)`, which is `y` bit for bit (NaN and infinities included): a post-op
    OpenVINO fuses into the FullyConnected, which then runs oneDNN's kernel, not MLAS.
    (A Multiply by ones or an Add of zeros is not fused; a Clamp to the float range
    would turn NaN into a number.)"""
    return b.factory.prelu(y, b.constant(np.ones(1)))


# ----------------------------------------------------- normalization, reductions


def lower_softmax(b: GraphBuilder, op: npu.SoftmaxOp) -> Node:
    b.require_float(op)
    return b.factory.softmax(b.node(op.input), _axis(_int(op.dim), len(_shape(op.input))))


def _norm_axes(op: npu.NormOp) -> list[int]:
    rank, k = len(_shape(op.operands[0])), len(_ints(op.normalized_shape))
    return list(range(rank - k, rank))


def lower_layer_norm(b: GraphBuilder, op: npu.LayerNormOp) -> Node:
    """(x - mean) / sqrt(var + eps) * w + b, with the biased variance, as ATen.

    The square is Power(., 2), not a Multiply: OpenVINO's MVNFusion then matches the
    whole chain and the CPU runs one MVN node (about 10x faster than the chain)."""
    b.require_float(op)
    f, axes = b.factory, _norm_axes(op)
    x = b.node(op.input)
    centered = b.sub(x, f.reduce_mean(x, axes, True))
    variance = f.reduce_mean(b.power(centered, b.constant(2.0)), axes, True)
    std = f.sqrt(f.eltwise_add(variance, b.constant(op.eps.value.data)))
    y = f.eltwise_div(centered, std)
    if op.weight is not None:
        y = f.eltwise_mul(y, b.node(op.weight))
    if op.bias is not None:
        y = f.eltwise_add(y, b.node(op.bias))
    return y


def lower_rms_norm(b: GraphBuilder, op: npu.RMSNormOp) -> Node:
    """x / sqrt(mean(x^2) + eps) * w."""
    b.require_float(op)
    f, axes = b.factory, _norm_axes(op)
    x = b.node(op.input)
    mean_square = f.reduce_mean(f.eltwise_mul(x, x), axes, True)
    y = f.eltwise_div(x, f.sqrt(f.eltwise_add(mean_square, b.constant(op.eps.value.data))))
    return f.eltwise_mul(y, b.node(op.weight)) if op.weight is not None else y


def lower_reduce(b: GraphBuilder, op: npu.ReduceOp) -> Node:
    b.require_float(op)  # ATen sums integers into i64
    rank = len(_shape(op.input))
    axes = [_axis(d, rank) for d in _ints(op.dims)] or list(range(rank))
    reduce = b.factory.reduce_mean if isinstance(op, npu.MeanOp) else b.factory.reduce_sum
    return reduce(b.node(op.input), axes, op.keepdim is not None)


def lower_embedding(b: GraphBuilder, op: npu.EmbeddingOp) -> Node:
    axis = b.constant(0, np.int64)
    return b.factory.gather(b.node(op.weight), b.node(op.indices), axis, 0)


# --------------------------------------------------------------- data movement


def lower_shape(b: GraphBuilder, op: npu.ShapeOp) -> Node:
    x, shape = b.node(op.input), _shape(op.input)
    result = _shape(op.result)
    if 0 in shape or 0 in result:
        raise NoNpuLowering(f"'{op.name}' on an empty tensor")
    match op:
        case npu.ViewOp() | npu.ReshapeOp() | npu.SqueezeOp() | npu.UnsqueezeOp():
            # OpenVINO's Squeeze drops every unit dim; a reshape to the known result
            # shape is exact for all four.
            return x if shape == result else b.reshape(x, result)
        case npu.TransposeOp():
            order = list(range(len(shape)))
            d0, d1 = _axis(_int(op.dim0), len(shape)), _axis(_int(op.dim1), len(shape))
            order[d0], order[d1] = order[d1], order[d0]
            return b.factory.transpose(x, order)
        case npu.PermuteOp():
            return b.factory.transpose(x, [_axis(d, len(shape)) for d in _ints(op.dims)])
        case npu.ExpandOp():
            return _expand(b, x, shape, result, b.numpy_dtype(op.input))
        case npu.SliceOp():
            d = _axis(_int(op.dim), len(shape))
            start, end, step = slice(_int(op.start), _int(op.end), _int(op.step)).indices(shape[d])
            begin, stop, stride = [0] * len(shape), list(shape), [1] * len(shape)
            begin[d], stop[d], stride[d] = start, end, step
            return b.slice(x, begin, stop, stride)
    raise NoNpuLowering(f"no NNFactory lowering for '{op.name}'")


def _expand(b: GraphBuilder, x: Node, shape: list[int], result: list[int], dtype: np.dtype) -> Node:
    """NNFactory has no Broadcast node: multiply by ones that are only as large as the
    expanded dims (x * 1 is exact), letting Multiply's numpy broadcasting expand."""
    padded = [1] * (len(result) - len(shape)) + shape
    ones_shape = [r if s == 1 else 1 for s, r in zip(padded, result, strict=True)]
    if padded == result:
        return x if len(shape) == len(result) else b.reshape(x, result)
    return b.factory.eltwise_mul(x, b.constant(np.ones(ones_shape), dtype))


def lower_cat(b: GraphBuilder, op: npu.CatOp) -> Node:
    axis = _axis(_int(op.dim), len(_shape(op.result)))
    nodes = [b.node(v) for v in op.inputs]
    out = nodes[0]
    for node in nodes[1:]:  # NNFactory's Concat takes two inputs
        out = b.factory.concat(out, node, axis)
    return out


def lower_split(b: GraphBuilder, op: npu.SplitOp) -> list[Node]:
    x, shape = b.node(op.input), _shape(op.input)
    d = _axis(_int(op.dim), len(shape))
    pieces, start = [], 0
    for size in _ints(op.split_sizes):
        begin, stop = [0] * len(shape), list(shape)
        begin[d], stop[d] = start, start + size
        pieces.append(b.slice(x, begin, stop, [1] * len(shape)))
        start += size
    return pieces


# ----------------------------------------------------------------------- table


def _lowering_for(op: Operation) -> LoweringFunction | None:
    """`op`'s lowering from the one table placement also reads (`forge.conversion.
    capabilities.LOWERINGS`)."""
    lowering = lowering_of(op)
    return resolve_lowering(lowering) if lowering is not None else None


def resolve_lowering(lowering: Lowering) -> LoweringFunction:
    """A row's function: built-in rows name a function of this module, or of another
    module of `forge.conversion` as "module.function"."""
    function = lowering.function
    if not isinstance(function, str):
        return function
    module, _, name = function.rpartition(".")
    if not module:
        return globals()[name]
    return getattr(importlib.import_module(f"forge.conversion.{module}"), name)


__all__ = [
    "INT8_KERNELS",
    "LINEAR_KERNELS",
    "STATS",
    "CacheStats",
    "NoNpuLowering",
    "Segment",
    "SnippetsRule",
    "build_segment",
    "clear_cache",
    "dynamic_quantization",
    "host_choices",
    "linear_kernel",
    "linear_kernels",
    "linear_rows",
    "segment_boundary",
    "snippets_by_rows",
    "snippets_mode",
]
