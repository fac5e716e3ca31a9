"""Recording what the plan printer prints: a segment's NNFactory calls as its builder
makes them (`SegmentTrace`, the `GraphTrace` `build_segment` reports to), and the torch
calls a CPU kernel makes (run on meta tensors)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from forge.conversion import cached_attention, nnfactory_graph
from forge.conversion.graph_call import GraphInput
from forge.dialects.shapes import DYNAMIC
from forge.support.diagnostics import ForgeError, op_error
from forge.target.cpu_kernels import torch_dtype
from forge.tools.plan_text import describe, literal, tuple_text

# ------------------------------------------------------- recording a segment


Line = tuple[str, str]
"""(code, comment): either may be empty."""


def _address(obj: Any) -> int | None:
    """The native node behind an NNFactory `Tensor` or a raw node pointer."""
    node = getattr(obj, "node", obj)
    if not isinstance(node, ctypes._Pointer | ctypes.c_void_p):
        return None
    return ctypes.cast(node, ctypes.c_void_p).value


class _FactoryProxy:
    """Forwards everything to the real NNFactory and reports calls and assignments."""

    __slots__ = ("_forge_factory", "_forge_trace")

    def __init__(self, factory: Any, trace: SegmentTrace):
        object.__setattr__(self, "_forge_factory", factory)
        object.__setattr__(self, "_forge_trace", trace)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._forge_factory, name)
        if name.startswith("__") or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            self._forge_trace.call(name, args, kwargs, result)
            return result

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._forge_factory, name, value)
        self._forge_trace.assign(name, value)


class SegmentTrace:
    """A `GraphTrace`: the NNFactory calls of one segment's build, as Python lines.

    `weight` names the weight a tensor the segment is built with stands for (weights
    baked in as constants); the arrays made of it print as `weight_arrays(W[name], ...)`.
    """

    def __init__(self, inputs: Sequence[str], weight: Callable[[Any], str | None] = lambda _: None):
        self.inputs = list(inputs)
        self.lines: list[Line] = []
        self.factory: Any = None
        self.parameters: list[int] = []
        """The line of each `f.parameter(...)` call, in parameter order."""
        self.weight_name = weight
        self._arrays: dict[int, str] = {}
        self._nodes: dict[int, str] = {}
        self._temps = 0
        self._weight_arrays = 0
        self._keep: list[Any] = []
        self._calls_at_op = 0

    # -- the GraphTrace protocol

    def wrap(self, factory: Any) -> Any:
        self.factory = factory
        return _FactoryProxy(factory, self)

    def lowering(self, op: Operation) -> None:
        self._note_empty_op()
        self.lines.append(("", describe(op)))
        self._calls_at_op = len(self.lines)

    # -- recording

    def _note_empty_op(self) -> None:
        if self._calls_at_op and self._calls_at_op == len(self.lines):
            code, comment = self.lines[-1]
            self.lines[-1] = (code, f"{comment}: no node of its own")

    def _node(self, value: Any) -> str | None:
        """The name of the node behind `value`, if it is one."""
        address = _address(value)
        if address is None:
            return None
        if address not in self._nodes:
            raise ForgeError("the plan printer met an NNFactory node it did not see created")
        return self._nodes[address]

    def _name(self, value: Any) -> str | None:
        if isinstance(value, np.ndarray) and id(value) in self._arrays:
            return self._arrays[id(value)]
        name = self._node(value)
        if name is None:
            return None
        return name if hasattr(value, "node") else f"{name}.node"

    def _bind(self, result: Any, name: str | None = None) -> str | None:
        address = _address(result)
        if address is None:
            return None
        self._keep.append(result)
        if name is None:
            name, self._temps = f"t{self._temps}", self._temps + 1
        self._nodes[address] = name
        return name

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> None:
        text = ", ".join(
            [literal(a, self._name) for a in args]
            + [f"{k}={literal(v, self._name)}" for k, v in kwargs.items()]
        )
        name = None
        if method == "parameter":
            name = f"p{len(self.parameters)}"
            self.parameters.append(len(self.lines))
        code = f"f.{method}({text})"
        if method == "compile":
            self._note_empty_op()
            self._calls_at_op = 0
            # What `_compile` set for this graph (the host profile's choice, or the user's).
            mode = os.environ.get("NNFACTORY_SNIPPETS_MODE", "DISABLE")
            if mode != "DISABLE":
                code = f'compile_with_snippets(f, "{mode}")'
        target = self._bind(result, name)
        self.lines.append((f"{target} = {code}" if target else code, ""))

    def weight(self, spec: GraphInput, tensor: Any, arrays: Sequence[np.ndarray]) -> None:
        """`GraphInput.arrays` made `arrays` of `tensor`: name them, if `tensor` is the
        placeholder of a weight, after the `weight_arrays` call that makes them."""
        weight = self.weight_name(tensor)
        if weight is None:
            return
        names = [f"w{self._weight_arrays + k}" for k in range(len(arrays))]
        self._weight_arrays += len(arrays)
        self._keep.extend(arrays)
        self._arrays.update((id(a), n) for a, n in zip(arrays, names, strict=True))
        storage = "" if spec.storage == "float" else f', "{spec.storage}"'
        if spec.storage == "int8":
            storage += f", reduce_dim={spec.reduce_dim}"
        if spec.transposed:
            storage += ", transposed=True"
        key = f'"{weight}"' if re.fullmatch(r"[\w.\-]*", weight) else repr(weight)
        call = f"weight_arrays(W[{key}], {literal(np.dtype(spec.dtype))}{storage})"
        self.lines.append((f"{tuple_text(names)} = {call}", ""))

    def label_parameters(self, specs: Sequence[GraphInput]) -> None:
        """Name each parameter's segment input in its comment, now that the graph's
        inputs are known (an int8 weight takes two: the int8 matrix and its scale)."""
        labels: list[str] = []
        for name, spec in zip(self.inputs, specs, strict=True):
            if spec.constant:
                continue
            labels += [name, f"{name}: scale"] if spec.storage == "int8" else [name]
        if len(labels) != len(self.parameters):
            raise ForgeError(
                f"the plan printer expects {len(labels)} graph parameter(s), "
                f"the segment made {len(self.parameters)}"
            )
        for line, label in zip(self.parameters, labels, strict=True):
            code, _ = self.lines[line]
            self.lines[line] = (code, label)

    def assign(self, attribute: str, value: Any) -> None:
        self._note_empty_op()
        self._calls_at_op = 0
        self.lines.append((f"f.{attribute} = {literal(value, self._name)}", ""))

    def mark_decompression(self, convert: Any) -> None:
        self.lines.append((f"mark_decompression({self._node(convert) or '?'})", ""))

    def mark_llm(self) -> None:
        self._note_empty_op()
        self._calls_at_op = 0
        self.lines.append(("mark_llm(f)", "OpenVINO then keeps the fp16 weights fp16"))

    def paged_attention(self, args: tuple[Any, ...], node: Any) -> None:
        _, *handles, kv_heads, rows, blocks, size, scale, window = args
        nodes = ", ".join(self._node(n) or "?" for n in handles)
        target = self._bind(node)
        sizes = f"{kv_heads}, {rows}, {blocks}, {size}, {literal(scale)}, {window}"
        self.lines.append(
            (f"{target} = paged_attention(f, {nodes}, {sizes})", "writes the caches in place")
        )

    def extreme(self, name: str, args: tuple[Any, ...], node: Any) -> None:
        _, x, y = args
        nodes = ", ".join(self._node(n) or "?" for n in (x, y))
        target = self._bind(node)
        self.lines.append((f'{target} = eltwise_extreme(f, "{name}", {nodes})', ""))

    def slice(self, args: tuple[Any, ...], node: Any) -> None:
        _, x, begin, end, stride, _, begin_mask, _, end_mask = args
        nodes = ", ".join(self._node(n) or "?" for n in (x, begin, end, stride))
        masks = f"{literal(begin_mask.tolist())}, {literal(end_mask.tolist())}"
        target = self._bind(node)
        self.lines.append((f"{target} = strided_slice(f, {nodes}, {masks})", ""))


@contextlib.contextmanager
def recording(trace: SegmentTrace) -> Iterator[None]:
    """What the builder does besides calling the factory, shown to `trace` while the
    segment is built: the StridedSlice binding it calls directly, and the arrays
    `GraphInput.arrays` makes of the weights it bakes in."""
    arrays = GraphInput.arrays

    def recording_arrays(spec: GraphInput, tensor: torch.Tensor) -> list[np.ndarray]:
        made = arrays(spec, tensor)
        trace.weight(spec, tensor, made)
        return made

    GraphInput.arrays = recording_arrays
    try:
        with (
            _recording_slices(trace),
            _recording_marks(trace),
            _recording_paged(trace),
            _recording_extremes(trace),
        ):
            yield
    finally:
        GraphInput.arrays = arrays


@contextlib.contextmanager
def _recording_marks(trace: SegmentTrace) -> Iterator[None]:
    """`GraphBuilder.widen` and `_compile` mark fp16 weights' Converts and the graph
    through bindings of their own, not the factory: route them through `trace`."""
    originals = {
        "_mark_decompression": (nnfactory_graph._mark_decompression, trace.mark_decompression),
        "_mark_llm": (nnfactory_graph._mark_llm, lambda _mm: trace.mark_llm()),
    }

    def recording(binding: Callable[[], Any], report: Callable[[Any], None]) -> Callable[[], Any]:
        def get() -> Callable[[Any], None] | None:
            fn = binding()
            if fn is None:
                return None

            def call(handle: Any) -> None:
                fn(handle)
                report(handle)

            return call

        return get

    for name, (binding, report) in originals.items():
        setattr(nnfactory_graph, name, recording(binding, report))
    try:
        yield
    finally:
        for name, (binding, _) in originals.items():
            setattr(nnfactory_graph, name, binding)


@contextlib.contextmanager
def _recording_binding(
    module: Any, name: str, trace: SegmentTrace, report: Callable[[tuple[Any, ...], Any], None]
) -> Iterator[None]:
    """Route the calls of `module.name`, a binding the builder calls directly instead of
    through the factory, through `report` while the segment is built."""
    original = getattr(module, name)

    def recording() -> Callable[..., Any] | None:
        fn = original()
        if fn is None:
            return None

        def call(*args: Any) -> Any:
            node = fn(*args)
            if trace.factory is not None and args[0] is trace.factory._mm:
                report(args, node)
            return node

        return call

    setattr(module, name, recording)
    try:
        yield
    finally:
        setattr(module, name, original)


def _recording_slices(trace: SegmentTrace) -> contextlib.AbstractContextManager[None]:
    """`GraphBuilder.slice` calls the StridedSlice binding directly."""
    return _recording_binding(nnfactory_graph, "_strided_slice", trace, trace.slice)


@contextlib.contextmanager
def _recording_extremes(trace: SegmentTrace) -> Iterator[None]:
    """`GraphBuilder.extreme` calls the Maximum/Minimum bindings directly."""
    original = nnfactory_graph._nan_propagating

    def recording(name: str) -> Callable[..., Any] | None:
        fn = original(name)
        if fn is None:
            return None

        def call(*args: Any) -> Any:
            node = fn(*args)
            if trace.factory is not None and args[0] is trace.factory._mm:
                trace.extreme(name, args, node)
            return node

        return call

    nnfactory_graph._nan_propagating = recording
    try:
        yield
    finally:
        nnfactory_graph._nan_propagating = original


def _recording_paged(trace: SegmentTrace) -> contextlib.AbstractContextManager[None]:
    """`lower_cached_attention` calls the paged-attention binding directly."""
    return _recording_binding(
        cached_attention, "paged_attention_binding", trace, trace.paged_attention
    )


# --------------------------------------------------------- recording a CPU step


class _AtenRecorder(TorchFunctionMode):
    """Records the torch calls a CPU kernel makes, with their arguments and results."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, tuple[Any, ...], dict[str, Any], Any]] = []

    def __torch_function__(
        self,
        fn: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        result = fn(*args, **kwargs)
        self.calls.append((fn, args, kwargs, result))
        return result


def _example(value: SSAValue, device: str) -> torch.Tensor:
    t = value.type
    if not isinstance(t, TensorType) or DYNAMIC in t.get_shape():
        raise ForgeError(f"cannot print a CPU step on a value of type {t}")
    dtype = torch_dtype(t.get_element_type())
    return torch.zeros(list(t.get_shape()), dtype=dtype, device=device)


def run_recorded(op: Operation, kernel: Callable[..., Any]) -> tuple[list[Any], Any, _AtenRecorder]:
    """Run `kernel` on meta tensors (no data, no cost); ops meta cannot run (data-
    dependent shapes) on zeros instead."""
    error: Exception | None = None
    for device in ("meta", "cpu"):
        inputs = [_example(v, device) for v in op.operands]
        recorder = _AtenRecorder()
        try:
            with torch.no_grad(), recorder:
                result = kernel(*inputs)
        except Exception as e:  # retried on real tensors, then reported
            error = e
            continue
        return inputs, result, recorder
    raise op_error(op, f"cannot record its CPU kernel for the plan: {error}")
