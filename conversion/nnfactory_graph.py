"""Lowering of a segment of NPU-placed `npu` ops to one compiled NNFactory graph.

A segment is a run of consecutive ops that placement sent to the NPU. Compiling each
op as its own graph would pay one OpenVINO compile and one dispatch per op; one graph
per segment pays them once and lets the compiler fuse across ops. Values read from
outside the segment (activations and weights alike) become graph parameters, bound
per call in first-use order; values used after the segment become graph results.

Ops NNFactory has a node for lower natively (matmul, softmax, gather, the
activations, reductions, reshape/transpose/slice/concat, and the maximum/minimum
scripts/build_nnfactory.sh binds); the rest are composed from them (attention, layer/RMS
norm, subtraction, rsqrt, expand).
Anything else raises `NoNpuLowering`, so the caller can run the op on the CPU.

Compiled graphs are cached by the segment's structure (ops, properties, wiring),
its input/output types, the precision and the build options it was given
(`forge.conversion.kernel_choice.BuildOptions`), so identical segments (the layers of a
transformer) compile once. A compiled graph is called through
`forge.conversion.graph_call.GraphCall`.
"""

from __future__ import annotations

import ctypes
import importlib
import math
import time
import weakref
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from forge.conversion import weight_spill
from forge.conversion.graph_call import GraphCall, GraphInput
from forge.conversion.kernel_choice import (
    DYNAMIC_QUANTIZATION_ENV,
    INT8_APART,
    KERNEL_REASONS,
    OWN_KERNEL,
    SNIPPETS_ENV,
    BuildOptions,
    Decision,
    graph_rows,
    linear_kernel,
    linear_rows,
    nnfactory_env,
)
from forge.conversion.nnfactory_backend import PACKAGE, bindings, load_backend
from forge.dialects import contract, dtypes, npu
from forge.dialects.dtypes import check_precision
from forge.dialects.shapes import DYNAMIC, is_bool, is_float
from forge.support.diagnostics import ForgeError
from forge.target.capabilities import Lowering, LoweringFunction, lowering_of
from forge.target.cpu_kernels import torch_dtype

Node = Any
"""An NNFactory `Tensor` (a node of the graph under construction)."""

INT32_MAX = (1 << 31) - 1
"""A StridedSlice stop that means "to the end" (what torch.export and OpenVINO write)."""

ACTIVATION_DTYPES: dict[str, type[np.floating]] = {
    precision: np.float32 for precision in dtypes.PROGRAM_PRECISIONS
}
"""Program precision (`forge.dialects.dtypes.PROGRAM_PRECISIONS`) -> the numpy dtype of the
graph's float activations: fp32 at every precision, as this CPU has no fp16 arithmetic
(OpenVINO's CPU plugin runs an fp16 graph in fp32 anyway, after converting every weight
back to fp32 at compile: measured 11 s per GPT-2 program and a slower decode).

The precision says how linear weights are stored. `fp16` keeps them fp16 behind a
Convert marked as a decompression, except where the host profile measured the fp32
weights faster for the rows reading them, which then run as they are (`graph_input`,
`forge.conversion.kernel_choice.FP16_KERNELS`). `int8` stores every linear weight as
int8 with one scale per output channel (weight-only quantization, the graph NNFactory's
quantized `linear` builds: Convert, Multiply by the scale, MatMul). `mixed` does the
same except for weights whose op carries `precision = "fp16"` or `"fp32"` (set by
npu-assign-precision from a per-layer sensitivity measure), which are stored that way.
"""

QUANTIZED_PRECISIONS = dtypes.QUANTIZED_PRECISIONS


def graph_input(
    value: SSAValue, precision: str, options: BuildOptions, constant: bool = False
) -> GraphInput:
    """The binding of segment input `value` under `precision` and `options`.

    Only linear weights are quantized or kept narrow, at the precision
    `contract.weight_storage` gives (the `precision` attributes npu-assign-precision wrote,
    under `mixed`); every use of the value inside the graph then sees the dequantized
    tensor, so a tied embedding and LM head agree.
    """
    dtype = numpy_dtype(value, ACTIVATION_DTYPES[precision])
    if contract.written_in_place(value):
        return GraphInput(dtype, written=True)
    stored = contract.weight_storage(value, precision)
    if stored is None or stored == "fp32":
        return GraphInput(dtype, constant=constant)
    if stored == "fp16":
        rows = max(linear_rows(op) for op in contract.weight_users(value))
        if options.fp16_form(rows) == "wide":  # fp32 kernels on the weights as they are: no copy
            return GraphInput(dtype, constant=constant)
        transposed = constant and _only_in_out_weight(value)
        return GraphInput(dtype, "fp16", constant=constant, transposed=transposed)
    reduce_dim = 0 if npu.weight_in_out(contract.weight_users(value)[0]) else 1  # the scale's axis
    return GraphInput(dtype, "int8", reduce_dim=reduce_dim, constant=constant)


def _only_in_out_weight(value: SSAValue) -> bool:
    """Whether every use of `value` is as the [in, out] weight of a linear, which can
    then read it stored [out, in] (`GraphInput.transposed`)."""
    users = contract.weight_users(value)
    return len(users) == sum(1 for _ in value.uses) and all(map(npu.weight_in_out, users))


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
    copies: list[np.ndarray] = field(default_factory=list)
    """Those of `keepalive` made for the graph (converted or quantized weights), not the
    model's own memory."""
    spilled: list[tuple[int, int]] = field(default_factory=list)
    """The `weight_spill` regions of `keepalive` this graph moved out of memory."""
    baked: list[weakref.ref[torch.Tensor]] = field(default_factory=list)
    """The tensors baked in as constants, by weak reference: the cache key names them by
    `id` and address, which a tensor made after one of them died can take over."""
    decisions: tuple[Decision, ...] = ()
    """What the builder chose for the segment's ops and the graph (`GraphBuilder.decide`):
    every segment sharing the graph shares them."""

    def bakes(self, tensors: Sequence[torch.Tensor]) -> bool:
        """Whether the graph's constants were made of `tensors` themselves (all still
        alive), not of tensors that died and left their id and address to these."""
        if len(tensors) != len(self.baked):
            return False
        return all(ref() is tensor for ref, tensor in zip(self.baked, tensors, strict=True))

    def spill_weights(self, folder: Path, copies_only: bool = False) -> int:
        """Move the memory of the constants (or only of the `copies` made for the graph)
        out of the resident set (`weight_spill`), once OpenVINO holds its packed copy;
        the bytes moved. Raises `SpillUnavailable` or OSError when nothing could move."""
        if self.factory is None:
            return 0
        if not self.spilled:
            weakref.finalize(self, _release_regions, self.spilled).atexit = False
        moved = 0
        for array in self.copies if copies_only else self.keepalive:
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
def _constant_shared() -> Any:
    """The backend's `constant_shared` (added by scripts/build_nnfactory.sh): a Constant
    over the caller's memory instead of a copy; None on a build without it."""
    backend = bindings()
    fn = getattr(backend.lib, "constant_shared", None)
    if fn is None:
        return None
    fn.argtypes = backend.lib.constant.argtypes
    fn.restype = backend.handler
    return fn


def _marking_binding(name: str) -> Any:
    """The backend's `name`, one of the marks scripts/build_nnfactory.sh adds (a handle
    in, nothing out); None on a build without it."""
    backend = bindings()
    fn = getattr(backend.lib, name, None)
    if fn is None:
        return None
    fn.argtypes = [backend.handler]
    fn.restype = None
    return fn


@cache
def _mark_llm() -> Any:
    """`mark_llm(factory)`: a one-element state through a ScaledDotProductAttention,
    OpenVINO's CPU plugin's test for a large language model, the only kind whose fp16
    weights its FullyConnected keeps fp16."""
    return _marking_binding("mark_llm")


@cache
def _mark_decompression() -> Any:
    """`mark_decompression(convert)`: `ov::mark_as_decompression` on a Convert node."""
    return _marking_binding("mark_decompression")


@cache
def _nan_propagating(name: str) -> Any:
    """The backend's `eltwise_max` or `eltwise_min` (added by scripts/build_nnfactory.sh):
    OpenVINO's Maximum/Minimum, NaN where either operand is NaN, as torch; None on a build
    without them."""
    backend = bindings()
    fn = getattr(backend.lib, name, None)
    if fn is None:
        return None
    fn.argtypes = [backend.handler] * 3
    fn.restype = backend.handler
    return fn


@cache
def _strided_slice() -> Any:
    """The backend's `slice`, declared right. The library declares its `size_t` mask
    lengths as `c_int`; the second one is passed on the stack, its upper half is
    garbage, and `NNFactory.slice` dies in `std::bad_alloc`. `lib[...]` returns a fresh
    function pointer, so the library's own declaration stays untouched."""
    backend = bindings()
    fn = backend.lib["slice"]
    mask = backend.c_u32_array
    fn.argtypes = [backend.handler] * 5 + [ctypes.c_size_t, mask, ctypes.c_size_t, mask]
    fn.restype = backend.handler
    return fn


# ----------------------------------------------------------------------- segment


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

    @property
    def decisions(self) -> tuple[Decision, ...]:
        """What the builder chose for this segment's ops (`Decision.index` into `ops`)."""
        return self.graph.decisions if self.graph is not None else ()

    def __call__(
        self, *tensors: torch.Tensor, out: Sequence[torch.Tensor | None] = ()
    ) -> tuple[torch.Tensor, ...]:
        return self.call(*tensors, out=out)


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
    options: BuildOptions | None = None,
    *,
    trace: GraphTrace | None = None,
    constants: Mapping[SSAValue, torch.Tensor] | None = None,
) -> Segment:
    """Lower `ops` (consecutive, NPU-placed) into one NNFactory graph, compiled once,
    under `options` (default: `BuildOptions()`, OpenVINO's own kernels), at the
    precision the IR states (`program_precision_of`).

    Inputs in `constants` (weights) are baked into the graph; the others become
    parameters bound per call. With `trace`, the graph is built afresh, bypassing the
    cache both ways, so that every NNFactory call it takes is shown to `trace`.
    """
    constants = constants or {}
    options = options if options is not None else BuildOptions()
    precision = program_precision_of(ops)
    inputs, outputs = segment_boundary(ops)
    if not outputs:
        return Segment(ops, inputs, outputs, precision, None, cached=False)
    specs = [graph_input(v, precision, options, constant=v in constants) for v in inputs]
    # Baked tensors are part of what the graph computes: key them by identity, and check
    # on a hit that they are the very tensors (an id and an address outlive a tensor).
    tensors = [constants[v] for v in inputs if v in constants]
    key = _cache_key(ops, inputs, outputs, precision, options, specs), baked_key(tensors)
    graph = _GRAPHS.get(key) if trace is None else None
    if graph is not None and graph.bakes(tensors):
        STATS.hits += 1
        return Segment(ops, inputs, outputs, precision, graph, cached=True)
    build = _Build(ops, inputs, outputs, precision, options, specs)
    graph = _compile(build, trace, constants)
    if trace is not None:
        return Segment(ops, inputs, outputs, precision, graph, cached=False)
    graph.baked = [weakref.ref(t) for t in tensors]
    _GRAPHS[key] = graph
    STATS.compiles += 1
    STATS.compile_seconds += graph.compile_seconds
    return Segment(ops, inputs, outputs, precision, graph, cached=False)


def program_precision_of(ops: Sequence[Operation]) -> str:
    """The precision npu-assign-precision recorded on the function holding `ops` (fp32
    where it did not run): the IR is the one carrier of the precision."""
    parent = ops[0].parent_op() if ops else None
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    recorded = contract.program_precision(parent) if parent is not None else None
    return check_precision(recorded) if recorded is not None else "fp32"


def baked_key(tensors: Sequence[torch.Tensor]) -> tuple[tuple[int, int], ...]:
    """The baked tensors' part of a graph's cache key: each one's id and address."""
    return tuple((id(t), t.data_ptr()) for t in tensors)


def _cache_key(
    ops: Sequence[Operation],
    inputs: list[SSAValue],
    outputs: list[SSAValue],
    precision: str,
    options: BuildOptions,
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
        options.graph_key(),
        tuple(specs),
        tuple(v.type for v in inputs),
        tuple(body),
        tuple(where[v] for v in outputs),
    )


class GraphTrace(Protocol):
    """Watches a graph being built (`forge.tools.plan_to_python` prints it)."""

    def wrap(self, factory: Any) -> Any:
        """What the builder calls instead of `factory` (a recording proxy)."""
        ...

    def lowering(self, op: Operation) -> None:
        """The builder's next calls lower `op`."""
        ...


@dataclass(frozen=True)
class _Build:
    """What one graph is built from: its ops and boundary, the precision and options."""

    ops: Sequence[Operation]
    inputs: list[SSAValue]
    outputs: list[SSAValue]
    precision: str
    options: BuildOptions
    specs: list[GraphInput]


def _compile(
    build: _Build,
    trace: GraphTrace | None = None,
    constants: Mapping[SSAValue, torch.Tensor] | None = None,
) -> CompiledGraph:
    """Build and compile the graph; the time covers both (what a cache hit saves)."""
    start = time.perf_counter()
    factory = load_backend().NNFactory()
    builder = GraphBuilder(
        trace.wrap(factory) if trace is not None else factory,
        ACTIVATION_DTYPES[build.precision],
        share_weights=trace is None,  # a traced build prints `constant`, which copies
        options=build.options,
        precision=build.precision,
    )
    for v, spec in zip(build.inputs, build.specs, strict=True):
        builder.add_parameter(v, spec, (constants or {}).get(v))
    for index, op in enumerate(build.ops):
        if trace is not None:
            trace.lowering(op)
        builder.index = index
        builder.lower(op)
    # NNFactory guesses results as "nodes nobody consumed"; a segment's results are
    # the values used after it, which may also be consumed inside it. An output that
    # is an input unchanged (contiguous, eval dropout, float casts) passes through in
    # Python, exact and free; outputs sharing a node share one Result.
    parameters = {_address(builder.node(v)): i for i, v in enumerate(build.inputs)}
    results: dict[int, int] = {}
    sources: list[tuple[bool, int]] = []
    for v in build.outputs:
        address = _address(builder.node(v))
        if address in parameters:
            sources.append((False, parameters[address]))
        else:
            sources.append((True, results.setdefault(address, len(results))))
    graph = CompiledGraph(
        None, 0.0, tuple(build.specs), tuple(sources), builder.keepalive, copies=builder.copies
    )
    if results:
        nodes = {_address(builder.node(v)): builder.node(v).node for v in build.outputs}
        builder.factory.output_nodes = [nodes[address] for address in results]
        if builder.decompressed and (mark_llm := _mark_llm()) is not None:
            mark_llm(builder.factory._mm)
        with nnfactory_env(**_settings(build, builder)):
            builder.factory.compile()
        graph.factory = factory
    else:
        graph.copies = []
    graph.decisions = tuple(builder.decisions)
    graph.compile_seconds = time.perf_counter() - start
    return graph


def _settings(build: _Build, builder: GraphBuilder) -> dict[str, str]:
    """NNFactory's settings for this graph's compile (`BuildOptions.settings`), the
    snippets mode and quantization group each recorded as the builder's decision."""
    storages = builder.storages.values()
    fp32 = builder.float_dtype is np.float32 and all(s == "float" for s in storages)
    int8 = any(storage == "int8" for storage in storages)
    settings = build.options.settings(build.ops, fp32, int8)
    rows = graph_rows(build.ops) or 0
    for kind, name in (
        ("snippets", SNIPPETS_ENV),
        ("quantization group", DYNAMIC_QUANTIZATION_ENV),
    ):
        builder.decisions.append(Decision(-1, "graph", rows, kind, settings[name], name))
    return settings


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

    def __init__(
        self,
        factory: Any,
        float_dtype: type[np.floating],
        share_weights: bool = False,
        options: BuildOptions | None = None,
        precision: str = "fp32",
    ):
        self.factory = factory
        self.float_dtype = float_dtype
        self.options = options if options is not None else BuildOptions()
        """The build choices this graph follows."""
        self.precision = precision
        """The program's precision (the IR's, npu-assign-precision's)."""
        self.decisions: list[Decision] = []
        """Each choice the lowering made, in op order (`decide`)."""
        self.index = 0
        """The position in its segment of the op being lowered."""
        self.values: dict[SSAValue, Node] = {}
        self.storages: dict[SSAValue, str] = {}
        """How each segment input is stored (`GraphInput.storage`)."""
        self.transposed: set[SSAValue] = set()
        """Inputs whose node holds their transpose (`GraphInput.transposed`)."""
        self.copies: list[np.ndarray] = []
        """Those of `keepalive` made for the graph, not the model's memory
        (`CompiledGraph.copies`)."""
        self.decompressed = False
        """Whether a Convert of fp16 weights was marked as a decompression: the graph is
        then compiled marked as a language model's (`_mark_llm`), so that OpenVINO
        keeps those weights fp16 (`forge.conversion.kernel_choice.FP16_KERNELS`)."""
        self.share_weights = share_weights
        self.keepalive: list[np.ndarray] = []
        self.narrowed: dict[SSAValue, torch.Tensor] = {}
        """Constant inputs stored fp16 -> the tensor they were narrowed from."""
        self.tables: dict[SSAValue, Node] = {}
        """`embedding_table`'s constants."""

    # -- values

    def numpy_dtype(self, value: SSAValue) -> np.dtype:
        return numpy_dtype(value, self.float_dtype)

    def decide(self, op: Operation, rows: int, kind: str, kernel: str, reason: str) -> None:
        """Record that the op being lowered took `kernel` for its `kind` of choice."""
        self.decisions.append(Decision(self.index, op.name, rows, kind, kernel, reason))

    def add_parameter(
        self, value: SSAValue, spec: GraphInput, tensor: torch.Tensor | None = None
    ) -> None:
        """Bind a segment input: one parameter, or a stored weight widened in-graph;
        with `spec.constant`, `tensor`'s data as constants instead of parameters."""
        shape = _shape(value)
        self.storages[value] = spec.storage
        if spec.constant:
            assert tensor is not None, "a constant input needs its tensor"
            stored = [self.weight_of(tensor, array) for array in spec.arrays(tensor)]
            if spec.transposed:
                self.transposed.add(value)
            if spec.storage == "fp16":
                self.narrowed[value] = tensor
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
            stored = [self.widen(stored[0], decompression=spec.constant)]
        self.values[value] = stored[0]

    def node(self, value: SSAValue) -> Node:
        return self.values[value]

    def embedding_table(self, value: SSAValue) -> Node:
        """The node a Gather reads `value` from. For a weight kept fp16 (a tied
        embedding and LM head), its fp32 tensor as it is (the model's memory, no copy):
        OpenVINO's CPU plugin turns a Gather of fp16 constants into an fp32 table at
        compile, touching 11x its size (GPT-2's 50257x768 table: 1.6 GB, 1.2 s), where
        the head keeps reading the fp16 weights. The rows gathered are the exact ones."""
        tensor = self.narrowed.get(value)
        if tensor is None:
            return self.node(value)
        if value not in self.tables:
            (array,) = GraphInput(self.numpy_dtype(value), constant=True).arrays(tensor)
            self.tables[value] = self.weight_of(tensor, array)
        return self.tables[value]

    def widen(self, narrow: Node, decompression: bool) -> Node:
        """`narrow` converted to the graph's float dtype. A Convert of constant weights
        is marked as a decompression (`mark_decompression`, added by
        scripts/build_nnfactory.sh), so that OpenVINO keeps the weights narrow and its
        FullyConnected reads them as they are; unmarked, the plugin folds it into a
        wide copy at compile."""
        wide = self.factory.to(narrow, self.float_dtype)
        mark = _mark_decompression() if decompression else None
        if mark is not None:
            mark(wide.node)
            self.decompressed = True
        return wide

    def weight_of(self, tensor: torch.Tensor, array: np.ndarray) -> Node:
        """`weight` for an array `GraphInput.arrays` made of `tensor`: a copy (for the
        graph, `copies`) unless it lies in the tensor's own memory."""
        start = tensor.data_ptr()
        return self.weight(array, copy=not start <= array.ctypes.data < start + tensor.nbytes)

    def weight(self, array: np.ndarray, copy: bool = False) -> Node:
        """A weight baked in as a constant. Shared with `array` when the backend can
        (OpenVINO packs it into its kernels' layout at compile time anyway): copying
        GPT-2's 500 MB first cost about a third of a second per compile."""
        shared = _constant_shared() if self.share_weights else None
        if shared is None:
            return self.factory.constant(array)
        array = np.ascontiguousarray(array)
        self.keepalive.append(array)
        if copy:  # made for the graph, not the model's memory
            self.copies.append(array)
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

    def slice(
        self,
        x: Node,
        begin: list[int],
        end: list[int],
        stride: list[int],
        masks: np.ndarray | None = None,
    ) -> Node:
        """StridedSlice through the corrected binding (see `_strided_slice`); `masks`
        (begin and end alike) default to none."""
        if masks is None:
            masks = np.zeros(len(begin), dtype=np.uint32)
        bounds = [self.constant(v, np.int64).node for v in (begin, end, stride)]
        node = _strided_slice()(
            self.factory._mm, x.node, *bounds, masks.size, masks, masks.size, masks
        )
        return importlib.import_module(f"{PACKAGE}.backend.tensor").Tensor(self.factory, node)

    def axis_slice(self, x: Node, rank: int, axis: int, bounds: slice, size: int) -> Node:
        """x[..., start:stop:step, ...] along `axis` (of `size`), as a StridedSlice whose
        other axes are masked whole and whose stop at the axis's end is INT32_MAX: the
        same values as explicit bounds, and the form OpenVINO's RoPE fusion matches in a
        rotate_half (RoPEFusionGPTNEOX), which then runs as one RoPE node."""
        start, stop, step = bounds.indices(size)
        begin, end, stride = [0] * rank, [0] * rank, [1] * rank
        begin[axis], stride[axis] = start, step
        end[axis] = INT32_MAX if step > 0 and stop >= size else stop
        masks = np.ones(rank, dtype=np.uint32)
        masks[axis] = 0
        return self.slice(x, begin, end, stride, masks)

    def extreme(self, name: str, x: Node, y: Node) -> Node:
        """`eltwise_max` or `eltwise_min` of `x` and `y` (see `_nan_propagating`). Without
        the binding the op runs on the CPU: composing it from Relu and subtraction cancels
        when the operands differ in magnitude."""
        fn = _nan_propagating(name)
        if fn is None:
            raise NoNpuLowering(f"NNFactory build without '{name}'")
        node = fn(self.factory._mm, x.node, y.node)
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
        if value in self.transposed:
            return self.node(value), True
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
        case npu.NegOp():
            # x * -1 is -x exactly; a rotate_half's negation in this form is what
            # OpenVINO's RoPE fusion matches (RoPEFusionGPTNEOX).
            return b.factory.eltwise_mul(x, b.constant(-1.0))
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
        case npu.MaximumOp():
            return b.extreme("eltwise_max", x, y)
        case npu.MinimumOp():
            return b.extreme("eltwise_min", x, y)
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
    return _onednn_switch(b, y) if _linear_kernel(b, op, activation=False) == "onednn" else y


def lower_addmm(b: GraphBuilder, op: npu.AddmmOp) -> Node:
    b.require_float(op)
    y = b.linear(op.input, op.weight, op.bias, weight_in_out=True)
    return _onednn_switch(b, y) if _linear_kernel(b, op, activation=False) == "onednn" else y


def lower_fused_linear(b: GraphBuilder, op: npu.FusedLinearOp) -> Node:
    b.require_float(op)
    y = b.linear(op.input, op.weight, op.bias, weight_in_out=op.weight_in_out is not None)
    activation = ACTIVATIONS[op.activation.data]
    kernel = _linear_kernel(b, op, activation=activation is not None)
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


FP16_REASONS = {
    "narrow": "kept fp16 in OpenVINO's kernel",
    "wide": "run as the fp32 weights, with the fp32 kernels",
}


def _linear_kernel(
    b: GraphBuilder, op: npu.LinearOp | npu.AddmmOp | npu.FusedLinearOp, activation: bool
) -> str:
    """The kernel the options' rule asks for (fp32 weights in an fp32 graph choose among
    `LINEAR_KERNELS`, MLAS takes no other; int8 weights among `INT8_KERNELS`), recorded
    with the form the weights took (`GraphBuilder.decide`). `activation`: whether the
    linear fuses one (only then is "apart" a change, and "onednn" only without one)."""
    storage = b.storages.get(op.weight, "float")
    rows = linear_rows(op)
    if contract.weight_storage(op.weight, b.precision) == "fp16":
        form = "narrow" if storage == "fp16" else "wide"
        b.decide(op, rows, "fp16 weights", form, FP16_REASONS[form])
    if b.float_dtype is not np.float32 or storage not in ("float", "int8"):
        return "fused"
    kernel = linear_kernel(b.options.kernel_rule(storage), rows)
    moved = kernel == ("apart" if activation else "onednn")
    if storage == "int8":
        b.decide(op, rows, "int8 kernel", kernel, INT8_APART if moved else OWN_KERNEL)
    else:
        b.decide(op, rows, "kernel", kernel, KERNEL_REASONS[kernel] if moved else OWN_KERNEL)
    return kernel


def _fusion_barrier(b: GraphBuilder, y: Node) -> Node:
    """`max(y, y)` (`eltwise_max`), which is `y` bit for bit, NaN and infinities
    included: a Maximum of a node with itself is no FullyConnected post-op, so OpenVINO
    keeps the MatMul apart and fuses the activation into one small Eltwise. It replaced
    `(y + y) * 0.5`, which overflows to inf where |y| > 2^127, at the same speed (GPT-2
    MLP, 768 -> 3072 with GELU, 1 row: 2.37 vs 2.46 ms; 128 rows: 22.1 vs 24.0 ms; AMD
    EPYC, 2 shared cores under load). That form remains for a build without the binding."""
    if _nan_propagating("eltwise_max") is None:
        return b.factory.eltwise_mul(b.factory.eltwise_add(y, y), b.constant(0.5))
    return b.extreme("eltwise_max", y, y)


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
    return b.factory.gather(b.embedding_table(op.weight), b.node(op.indices), axis, 0)


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
            bounds = slice(_int(op.start), _int(op.end), _int(op.step))
            return b.axis_slice(x, len(shape), d, bounds, shape[d])
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
    rank = len(_shape(op.result))
    axis = _axis(_int(op.dim), rank)
    nodes = [b.node(v) for v in op.inputs]
    out = nodes[0]
    for node in nodes[1:]:  # NNFactory's Concat takes two inputs
        if axis == rank - 1:
            # Axis -1, as exported (NNFactory's `concat` would normalize it): OpenVINO's
            # RoPE fusion matches a rotate_half's Concat by it.
            out = b.factory._call_backend_op("concat", out, node, np.int64(-1))
        else:
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
    "STATS",
    "CacheStats",
    "GraphBuilder",
    "NoNpuLowering",
    "Segment",
    "build_segment",
    "clear_cache",
    "graph_input",
    "segment_boundary",
]
