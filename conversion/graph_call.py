"""Binding and running one compiled NNFactory graph from torch tensors.

`GraphCall` is how the executor's `Segment` and the printed plan (`forge-opt -t python`)
both call a graph: every bound input pointed at memory the graph reads in place (or
staged, or quantized once when frozen), one run, results written where they are wanted
(a pooled tensor, a pinned buffer, or the factory's own array and a copy). The graphs
themselves are built by `forge.conversion.nnfactory_graph`.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from forge.conversion.nnfactory_backend import bindings
from forge.support.diagnostics import ForgeError


@dataclass(frozen=True)
class GraphInput:
    """How a segment input is bound to the graph: one parameter of `dtype`, or (storage
    `int8`) an int8 parameter plus a per-channel scale reduced over `reduce_dim`, or
    (storage `fp16`) an fp16 parameter widened to `dtype` inside the graph
    (`forge.conversion.kernel_choice.FP16_KERNELS`)."""

    dtype: np.dtype
    storage: str = "float"
    reduce_dim: int = 1
    constant: bool = False
    """Baked into the graph as constants when it is built (weights bound at compile
    time): no parameter, nothing to bind per call, and OpenVINO can pre-pack the
    matrix and use its compressed-weight kernels for int8."""
    transposed: bool = False
    """Stored as the transpose of its last two dims (an fp16 constant [in, out] weight,
    kept [out, in], the form OpenVINO's FullyConnected reads without a Transpose)."""
    written: bool = False
    """The graph writes into it (a cache `npu.cached_attention` updates in place): bound
    where the tensor lives, never converted, copied or staged."""

    def arrays(self, tensor: torch.Tensor) -> list[np.ndarray]:
        """The parameter arrays for `tensor` (they must outlive the graph's run)."""
        t = tensor.detach()
        if self.written:
            if t.dtype != _torch_for_numpy(self.dtype) or not t.is_contiguous():
                raise ForgeError(
                    f"a cache the graph writes in place must be a contiguous {self.dtype} "
                    f"tensor, got {t.dtype} with strides {t.stride()}"
                )
            return [t.numpy()]
        if self.storage == "int8":
            return list(quantize_int8(t, self.reduce_dim, self.dtype))
        if self.storage == "fp16":
            t = t.transpose(-2, -1) if self.transposed else t
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


def _torch_for_numpy(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=dtype)).dtype


def _run_graph(factory: Any) -> None:
    """`NNFactory.run` binds input 0 unconditionally; segments may have no inputs."""
    bindings().lib.run(factory._mm)


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
            # bound where it lives: state changes in place, and a written cache is the
            # caller's own memory
            frozen = i in self._frozen or bool(self.inputs[i] and self.inputs[i].written)
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
        lib = bindings().lib
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
