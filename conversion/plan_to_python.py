"""The plan `CompiledNPUExecutor` runs, printed as a Python program (`forge-opt -t python`).

A plan is easiest to review as the code it amounts to: NNFactory graph-building calls
per segment, then a `run(...)` function of segment calls and CPU callables. The
program is recorded, not re-derived, so it cannot drift from the executor:

* steps come from the executor's own grouping (`device_runs`, `npu_groups`), with
  its fallback to the CPU when NNFactory cannot lower a group;
* each segment is built for real by `build_segment`, through a `GraphTrace` whose
  proxy factory records every call the builder makes (and the StridedSlice binding
  it calls directly); weights baked in as constants are built from placeholders of
  their shape, and the conversion or quantization `GraphInput.arrays` makes of each
  is printed as a `weight_arrays(W["name"], ...)` call on the real weight;
* each CPU step runs its `cpu_kernel` on meta tensors under a `TorchFunctionMode`
  that records the ATen calls it makes;
* each segment is called through `graph_call.GraphCall`, the object the
  executor's `Segment` calls, and the arena buffers the comments name come from
  `segments.arena_layout`, by which the executor binds them.

Executing the program (NNFactory and torch installed), calling `build(weights)` when
the weights are constants (`weights_as="constants"`, the executor's default) and then
`run` with the executor's inputs and weights gives the executor's outputs.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import importlib
import itertools
import keyword
import os
import re
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FileLineColLoc, IntegerAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.utils.target import Target

from forge.conversion import kernel_choice, nnfactory_graph
from forge.conversion.cpu_kernels import cpu_kernel, packed_linear_spec, torch_dtype
from forge.conversion.graph_call import GraphCall, GraphInput
from forge.conversion.kernel_choice import host_choices
from forge.conversion.nnfactory_backend import PACKAGE
from forge.conversion.nnfactory_graph import (
    NoNpuLowering,
    Segment,
    build_segment,
    segment_boundary,
)
from forge.conversion.segments import (
    GRANULARITIES,
    WEIGHT_BINDINGS,
    arena_layout,
    check_memory,
    device_runs,
    npu_groups,
)
from forge.diagnostics import ForgeError, op_error
from forge.dialects import npu
from forge.dialects.context import entry_function, infer_num_inputs
from forge.dialects.dtypes import PRECISIONS
from forge.dialects.shapes import DYNAMIC
from forge.transforms.host_profile import load_profile
from forge.transforms.npu_schedule_affinity import body_ops, check_schedule

RESERVED = {
    "torch",
    "np",
    "run",
    "build",
    "GraphCall",
    "GraphInput",
    "PackedLinear",
    "strided_slice",
    "unpack_array",
    "weight_arrays",
    "NNFactory",
}
"""Module-level names of the printed program, which argument names must not shadow."""

_GENERATED = re.compile(r"(v|t|p|w|seg|build_seg|const_|pack)\d+")

INLINE_ELEMENTS = 16
"""Constants up to this many elements are printed as literals; larger ones packed."""


# ------------------------------------------------------------ runtime helpers
# The printed program calls these and, for each segment, `graph_call.GraphCall`:
# the very object `Segment.__call__` delegates to.


def weight_arrays(
    tensor: torch.Tensor, dtype: Any, storage: str = "float", reduce_dim: int = 1
) -> list[np.ndarray]:
    """A weight as the graph stores it, by `GraphInput.arrays` itself: `[converted]`, or
    `[int8, scale]` (storage int8, one scale per channel kept along `reduce_dim`)."""
    return GraphInput(np.dtype(dtype), storage, reduce_dim).arrays(tensor)


def strided_slice(
    f: Any,
    x: Any,
    begin: Any,
    end: Any,
    stride: Any,
    begin_mask: Sequence[int],
    end_mask: Sequence[int],
) -> Any:
    """`GraphBuilder.slice`'s backend call: StridedSlice through the corrected binding
    (`nnfactory_graph._strided_slice`), which `NNFactory` itself does not offer."""
    begins = np.asarray(begin_mask, dtype=np.uint32)
    ends = np.asarray(end_mask, dtype=np.uint32)
    node = nnfactory_graph._strided_slice()(
        f._mm, x.node, begin.node, end.node, stride.node, begins.size, begins, ends.size, ends
    )
    return importlib.import_module(f"{PACKAGE}.backend.tensor").Tensor(f, node)


def unpack_array(data: str, dtype: Any, shape: Sequence[int]) -> np.ndarray:
    """A constant too large to print as a literal (zlib-compressed, base64)."""
    raw = zlib.decompress(base64.b64decode(data))
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


# -------------------------------------------------------------------- literals


def _float(value: float) -> str:
    if value != value:
        return 'float("nan")'
    if value in (float("inf"), float("-inf")):
        return 'float("inf")' if value > 0 else '-float("inf")'
    return repr(value)


def _numpy_dtype(dtype: np.dtype) -> str:
    return "np.bool_" if dtype == np.bool_ else f"np.{dtype.name}"


def _pack(array: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(array).tobytes(), 9)).decode()


def _ndarray(array: np.ndarray) -> str:
    dtype = _numpy_dtype(array.dtype)
    flat = array.reshape(-1)
    if array.ndim > 0 and flat.size > 1 and bool((flat == flat[0]).all()):
        return f"np.full({list(array.shape)}, {literal(flat[0].item())}, dtype={dtype})"
    if flat.size <= INLINE_ELEMENTS:
        return f"np.array({literal(array.tolist())}, dtype={dtype})"
    return f"unpack_array({_pack(array)!r}, {dtype}, {list(array.shape)})"


def _tensor(tensor: torch.Tensor) -> str:
    dtype = str(tensor.dtype)
    flat = tensor.reshape(-1)
    if tensor.dim() > 0 and flat.numel() > 1 and bool((flat == flat[0]).all()):
        return f"torch.full({list(tensor.shape)}, {literal(flat[0].item())}, dtype={dtype})"
    if flat.numel() <= INLINE_ELEMENTS or tensor.dtype == torch.bfloat16:
        return f"torch.tensor({literal(tensor.tolist())}, dtype={dtype})"
    array = tensor.numpy()
    packed = f"unpack_array({_pack(array)!r}, {_numpy_dtype(array.dtype)}, {list(array.shape)})"
    return f"torch.from_numpy({packed})"


def literal(value: Any, name: Callable[[Any], str | None] = lambda _: None) -> str:
    """`value` as Python source; `name` names the graph nodes and tensors it knows."""
    known = name(value)
    if known is not None:
        return known
    match value:
        case None | bool() | str() | int():
            return repr(value)
        case float():
            return _float(value)
        case np.generic():
            return literal(value.item())
        case np.dtype():
            return _numpy_dtype(value)
        case type() if issubclass(value, np.generic):
            return _numpy_dtype(np.dtype(value))
        case torch.dtype() | torch.layout() | torch.memory_format():
            return str(value)
        case torch.device():
            return f"torch.device({str(value)!r})"
        case list():
            return f"[{', '.join(literal(v, name) for v in value)}]"
        case tuple():
            items = [literal(v, name) for v in value]
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        case np.ndarray():
            return _ndarray(value)
        case torch.Tensor():
            return _tensor(value)
    raise ForgeError(f"cannot print a {type(value).__name__} in the plan")


# ------------------------------------------------------------------- naming


def describe(op: Operation) -> str:
    """`%ctx = npu.sdpa @ line 22`: the op as a reader finds it in the source IR."""
    opcode = getattr(op, "opcode", None) if op.name == "npu.generic" else None
    opcode = opcode.data if isinstance(opcode, StringAttr) else opcode
    what = f'{op.name} "{opcode}"' if isinstance(opcode, str) else op.name
    location = op.location
    if isinstance(location, FileLineColLoc):
        what += f" @ line {location.line.data}"
    names = [f"%{r.name_hint}" for r in op.results if r.name_hint]
    return f"{', '.join(names)} = {what}" if names and len(names) == len(op.results) else what


class Names:
    """Python names of a function's values: arguments after their names (`c_attn.weight`
    -> `c_attn_weight`), op results after their `vreg` (`v12`), as the planned IR shows."""

    def __init__(self, function: func.FuncOp):
        self.of: dict[SSAValue, str] = {}
        taken = set(RESERVED)
        for i, arg in enumerate(function.body.block.args):
            self.of[arg] = self._identifier(arg.name_hint or f"arg{i}", taken)
        ops = body_ops(function.body.block)
        vregs = [op.attributes.get("vreg") for op in ops]
        free = 1 + max((v.value.data for v in vregs if isinstance(v, IntegerAttr)), default=-1)
        for op, vreg in zip(ops, vregs, strict=True):
            if isinstance(vreg, IntegerAttr):
                base = vreg.value.data
            else:
                base, free = free, free + len(op.results)
            for k, result in enumerate(op.results):
                name = f"v{base + k}"
                while name in taken:  # vregs are unique in planned IR; be safe anyway
                    name, free = f"v{free}", free + 1
                taken.add(name)
                self.of[result] = name

    @staticmethod
    def _identifier(hint: str, taken: set[str]) -> str:
        name = re.sub(r"\W", "_", hint)
        if not name or name[0].isdigit():
            name = f"a_{name}"
        while keyword.iskeyword(name) or name in taken or _GENERATED.fullmatch(name):
            name += "_"
        taken.add(name)
        return name

    def __call__(self, values: Sequence[SSAValue]) -> list[str]:
        return [self.of[v] for v in values]


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
        key = f'"{weight}"' if re.fullmatch(r"[\w.\-]*", weight) else repr(weight)
        call = f"weight_arrays(W[{key}], {literal(np.dtype(spec.dtype))}{storage})"
        self.lines.append((f"{_tuple(names)} = {call}", ""))

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

    def slice(self, args: tuple[Any, ...], node: Any) -> None:
        _, x, begin, end, stride, _, begin_mask, _, end_mask = args
        nodes = ", ".join(self._node(n) or "?" for n in (x, begin, end, stride))
        masks = f"{literal(begin_mask.tolist())}, {literal(end_mask.tolist())}"
        target = self._bind(node)
        self.lines.append((f"{target} = strided_slice(f, {nodes}, {masks})", ""))


def compile_with_snippets(factory: Any, mode: str) -> None:
    """`factory.compile()` with OpenVINO's snippets `mode`, as `compile_model` compiled
    the graph (printed programs call it where the host profile turned snippets on)."""
    with kernel_choice.snippets_env(mode):
        factory.compile()


@contextlib.contextmanager
def _recording(trace: SegmentTrace) -> Iterator[None]:
    """What the builder does besides calling the factory, shown to `trace` while the
    segment is built: the StridedSlice binding it calls directly, and the arrays
    `GraphInput.arrays` makes of the weights it bakes in."""
    arrays = GraphInput.arrays

    def recording_arrays(spec: GraphInput, tensor: torch.Tensor) -> list[np.ndarray]:
        made = arrays(spec, tensor)
        trace.weight(spec, tensor, made)
        return made

    GraphInput.arrays = recording_arrays  # type: ignore[method-assign]
    try:
        with _recording_slices(trace):
            yield
    finally:
        GraphInput.arrays = arrays  # type: ignore[method-assign]


@contextlib.contextmanager
def _recording_slices(trace: SegmentTrace) -> Iterator[None]:
    """`GraphBuilder.slice` calls the StridedSlice binding directly, not through the
    factory: route that one call through `trace` while the segment is built."""
    original = nnfactory_graph._strided_slice

    def recording() -> Callable[..., Any]:
        fn = original()

        def call(*args: Any) -> Any:
            node = fn(*args)
            if trace.factory is not None and args[0] is trace.factory._mm:
                trace.slice(args, node)
            return node

        return call

    nnfactory_graph._strided_slice = recording  # type: ignore[assignment]
    try:
        yield
    finally:
        nnfactory_graph._strided_slice = original  # type: ignore[assignment]


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


def _run_recorded(
    op: Operation, kernel: Callable[..., Any]
) -> tuple[list[Any], Any, _AtenRecorder]:
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


@dataclass
class ProgramText:
    """The growing program: module-level constants, segment builders, `run`'s body."""

    constants: list[str]
    builders: list[str]
    body: list[str]


def cpu_step_lines(op: Operation, names: Names, program: ProgramText) -> list[str]:
    """`op`'s CPU callable as the ATen calls it makes, bound to `op`'s result names."""
    inputs, result, recorder = _run_recorded(op, cpu_kernel(op))
    outputs = names(op.results)
    returned = [result] if len(outputs) == 1 else list(result) if outputs else []
    known: dict[int, str] = {id(t): n for t, n in zip(inputs, names(op.operands), strict=True)}
    wanted = {id(t): n for t, n in zip(returned, outputs, strict=True)}
    bound: set[str] = set()
    used: set[str] = set()

    def name(value: Any) -> str | None:
        if isinstance(value, torch.Tensor):
            found = known.get(id(value))
            if found is None:  # a tensor the kernel holds (a constant): hoisted
                found = f"const_{len(program.constants)}"
                program.constants.append(f"{found} = {literal(value)}")
                known[id(value)] = found
            used.add(found.split("[")[0])
            return found
        return None

    steps: list[tuple[str | None, str]] = []
    for k, (fn, args, kwargs, value) in enumerate(recorder.calls):
        if not isinstance(fn, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
            raise op_error(op, f"its CPU kernel calls {fn!r}, which the plan cannot print")
        text = ", ".join(
            [literal(a, name) for a in args]
            + [f"{key}={literal(v, name)}" for key, v in kwargs.items()]
        )
        call = f"torch.ops.{fn}({text})"
        if isinstance(value, torch.Tensor) and id(value) in wanted:
            target = wanted[id(value)]
            bound.add(target)
        elif (
            isinstance(value, list | tuple)
            and value
            and [id(v) for v in value] == [id(t) for t in returned]
        ):
            target = ", ".join(outputs)
            bound.update(outputs)
        else:
            target = f"t{k}"
        known[id(value)] = target
        if isinstance(value, list | tuple):
            for j, v in enumerate(value):
                known.setdefault(id(v), f"{target}[{j}]")
        steps.append((target, call))
    # Outputs no call returned directly (inputs, list items, constants) are bound last;
    # name them first, so that the temporaries they read count as used.
    tail = [
        f"{output} = {literal(tensor, name)}"
        for tensor, output in zip(returned, outputs, strict=True)
        if output not in bound
    ]
    lines = [
        f"{target} = {call}" if target in bound or target in used or "," in target else call
        for target, call in steps
    ]
    return lines + tail


def packed_step_line(
    op: npu.LinearOp | npu.AddmmOp | npu.FusedLinearOp,
    names: Names,
    placeholders: _Placeholders,
    instances: list[str],
) -> str:
    """A CPU linear on a baked-in weight, as the executor runs it: a `PackedLinear`
    made in `build(W)`, called with the input and bias."""
    label = f"pack{sum(line.startswith('pack') for line in instances)}"
    spec = ", ".join(f"{key}={value!r}" for key, value in packed_linear_spec(op).items())
    instances.append(f"{label} = PackedLinear(W[{placeholders.names[op.weight]!r}], {spec})")
    arguments = names([op.input] + ([op.bias] if op.bias is not None else []))
    return f"{names(op.results)[0]} = {label}({', '.join(arguments)})"


# ------------------------------------------------------------------ the plan


def _check_planned(function: func.FuncOp) -> None:
    for op in body_ops(function.body.block):
        device = op.attributes.get("device")
        if not isinstance(device, StringAttr):
            raise op_error(
                op,
                "has no 'device': the plan is printed from placed, scheduled IR "
                "(run -p forge-pipeline first)",
            )
    check_schedule(function)
    check_memory(function, None)


def _ops_summary(ops: Sequence[Operation]) -> str:
    if len(ops) == 1:
        return describe(ops[0])
    return f"{len(ops)} ops, {describe(ops[0])} .. {describe(ops[-1])}"


def _arena(function: func.FuncOp) -> dict[SSAValue, str]:
    """Where the executor keeps each intermediate that owns storage: its place in
    `arena_layout`, the rule `CompiledNPUExecutor` binds by. Computed on a copy (an
    allocation writes `buffer` attributes), so that printing leaves the IR as it is."""
    copy = function.clone()
    layout = arena_layout(copy)
    if layout is None:
        return {}
    original = {
        mine: theirs
        for op_copy, op in zip(
            body_ops(copy.body.block), body_ops(function.body.block), strict=True
        )
        for mine, theirs in zip(op_copy.results, op.results, strict=True)
    }
    return {
        original[value]: f"buffer {place.buffer} @ byte {place.offset}"
        for value, place in layout.places.items()
        if value in original
    }


class _Placeholders(Mapping[SSAValue, torch.Tensor]):
    """The `constants` the segments are built with: zeros in each weight's type, made
    when a segment first bakes it in, so that the arrays made of them can be traced
    back to the weight's name."""

    def __init__(self, names: Mapping[SSAValue, str]):
        self.names = dict(names)
        self._tensors: dict[SSAValue, torch.Tensor] = {}
        self._by_id: dict[int, str] = {}

    def __getitem__(self, value: SSAValue) -> torch.Tensor:
        if value not in self.names:
            raise KeyError(value)
        if value not in self._tensors:
            t = value.type
            if not isinstance(t, TensorType) or DYNAMIC in t.get_shape():
                raise NoNpuLowering(f"weight of type {t}")
            dtype = torch_dtype(t.get_element_type())
            tensor = torch.zeros(list(t.get_shape()), dtype=dtype)
            self._tensors[value] = tensor
            self._by_id[id(tensor)] = self.names[value]
        return self._tensors[value]

    def __contains__(self, value: object) -> bool:
        return value in self.names

    def __iter__(self) -> Iterator[SSAValue]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def name_of(self, tensor: Any) -> str | None:
        return self._by_id.get(id(tensor))


def plan_to_python(
    module: ModuleOp | func.FuncOp,
    precision: str = "fp32",
    granularity: str = "segment",
    weights: str = "constants",
    num_inputs: int | None = None,
    profile: str = "",
) -> str:
    """The Python program of the plan `CompiledNPUExecutor(module, W, num_inputs,
    precision, granularity, weights_as=weights)` runs.

    Arguments from `num_inputs` on are the weights (by default those from the first
    whose name has a dot on, as the importer names them by state-dict key). With a host
    `profile` the graphs are built as `compile_model` builds them with it (its rule for
    the linears' kernels, `linear_kernels`); without, in OpenVINO's default form."""
    if precision not in PRECISIONS:
        raise ForgeError(f"precision must be one of {', '.join(PRECISIONS)}, got '{precision}'")
    if granularity not in GRANULARITIES:
        raise ForgeError(
            f"granularity must be one of {', '.join(GRANULARITIES)}, got '{granularity}'"
        )
    if weights not in WEIGHT_BINDINGS:
        raise ForgeError(f"weights must be one of {', '.join(WEIGHT_BINDINGS)}, got '{weights}'")
    function = entry_function(module)
    _check_planned(function)
    host = load_profile(profile) if profile else None
    args = list(function.body.block.args)
    if num_inputs is None:
        num_inputs = infer_num_inputs(function)
    if not 0 <= num_inputs <= len(args):
        raise ForgeError(f"num_inputs must lie in [0, {len(args)}], got {num_inputs}")
    constants = weights == "constants"
    writes = npu.write_backs(function)
    written = {arg for _, arg in writes}
    placeholders = _Placeholders(
        {
            a: a.name_hint or f"arg{i}"
            for i, a in enumerate(args)
            if i >= num_inputs and i not in written  # state: bound at every call
        }
        if constants
        else {}
    )
    names = Names(function)
    arena = _arena(function)
    program = ProgramText([], [], [])
    graphs: dict[tuple[str, ...], str] = {}
    instances: list[str] = []
    devices: list[str] = []
    segments = npu_ops = 0

    def buffers(values: Sequence[SSAValue]) -> str:
        held = [f"{names.of[v]} in {arena[v]}" for v in values if v in arena]
        return f" [arena: {', '.join(held)}]" if held else ""

    def add_cpu(op: Operation, note: str = "") -> None:
        program.body.append(f"# cpu: {describe(op)}{note}{buffers(op.results)}")
        if isinstance(op, npu.WEIGHTED_LINEAR_OPS) and op.weight in placeholders:
            program.body.append(packed_step_line(op, names, placeholders, instances))
        else:
            program.body.extend(cpu_step_lines(op, names, program))
        devices.append("cpu")

    for device, run in device_runs(function):
        if device == "cpu":
            add_cpu(run[0])
            continue
        for group in npu_groups(run, granularity):
            inputs, _ = segment_boundary(group)
            trace = SegmentTrace(names(inputs), placeholders.name_of)
            try:
                with _recording(trace), host_choices(host):
                    segment = build_segment(group, precision, trace=trace, constants=placeholders)
            except NoNpuLowering as e:
                for op in group:
                    add_cpu(op, f" (placed on the NPU; NNFactory cannot lower it: {e.args[0]})")
                continue
            trace.label_parameters(segment.graph_inputs)
            label = f"seg{segments}"
            segments += 1
            npu_ops += len(group)
            devices.append("npu")
            code = _segment_code(segment, trace)
            shared = graphs.get(tuple(code))
            if shared is not None:
                instances.append(f"{label} = {shared}  # the same graph (cache hit)")
            else:
                graphs[tuple(code)] = label
                program.builders.append(_builder_text(label, segment, trace, constants))
                instances.append(f"{label} = build_{label}({'W' if constants else ''})")
            if not constants:
                program.builders.append(instances.pop())
            summary = _ops_summary(group) + buffers(segment.outputs)
            program.body.append(f"# npu: {label}: {summary}")
            outputs = names(segment.outputs)
            call = f"{label}({', '.join(names(segment.inputs))})"
            if not outputs:
                program.body.append(call)
            elif len(outputs) == 1:
                program.body.append(f"({outputs[0]},) = {call}")
            else:
                program.body.append(f"{', '.join(outputs)} = {call}")

    terminator = function.body.block.last_op
    assert isinstance(terminator, func.ReturnOp)
    returned = names(terminator.arguments)
    for result, arg in npu.copied_write_backs(function):  # not what cache_update did
        program.body.append(f"{names.of[args[arg]]}.copy_({returned[result]})  # {npu.WRITES}")
    program.body.append(f"return {_tuple(returned[: len(returned) - len(writes)])}")
    transitions = sum(a != b for a, b in itertools.pairwise(devices))
    usage = (
        "exec() it, call build(weights) with the weights by name, then run(...) with the "
        "inputs and weights"
        if constants
        else "exec() it, then call run(...) with the inputs and weights"
    )
    header = (
        f'"""Forge plan of @{function.sym_name.data} (precision {precision}, granularity '
        f"{granularity}, weights {weights}): {len(devices)} steps, {segments} NNFactory "
        f"segment(s) of {npu_ops} op(s), {len(devices) - segments} CPU callable(s), "
        f"{transitions} NPU<->CPU transition(s).\n\nPrinted by `forge-opt -t python`; "
        f'{usage}."""\n'
    )
    helpers = ["strided_slice", "unpack_array", "weight_arrays"]
    if any("compile_with_snippets(" in builder for builder in program.builders):
        helpers.insert(0, "compile_with_snippets")
    imports = ["import numpy as np", "import torch", ""]
    if any(line.startswith("pack") for line in instances):
        imports.append("from forge.conversion.cpu_kernels import PackedLinear")
    imports.append("from forge.conversion.graph_call import GraphCall, GraphInput")
    imports.append(f"from forge.conversion.plan_to_python import {', '.join(helpers)}")
    if segments:
        imports += [
            "from forge.conversion.nnfactory_backend import load_backend",
            "",
            "NNFactory = load_backend().NNFactory",
        ]
    parts = [header, "\n".join(imports) + "\n"]
    if program.constants:
        parts.append("\n".join(program.constants) + "\n")
    parts.extend(program.builders)
    if constants:
        build = [
            "def build(W):",
            '    """Build and compile every segment with the weights W (name -> tensor) baked',
            '    in as constants, as CompiledNPUExecutor(module, W, ...) does."""',
        ]
        if instances:
            build.append(f"    global {', '.join(i.split(' = ')[0] for i in instances)}")
        build += [f"    {line}" for line in instances]
        parts.append("\n".join(build))
    arguments = ", ".join(names(args))
    body = "\n".join(f"    {line}" for line in program.body)
    parts.append(f"@torch.no_grad()\ndef run({arguments}):\n{body}\n")
    return "\n\n".join(p.rstrip("\n") + "\n" for p in parts)


def _tuple(items: Sequence[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _segment_code(segment: Segment, trace: SegmentTrace) -> list[str]:
    """The builder's code without comments: equal code, the same graph."""
    return [code for code, _ in trace.lines if code] + [
        _graph_call(segment.call) if segment.graph is not None else "",
    ]


def _spec(spec: GraphInput) -> str:
    """`spec` as the `GraphInput(...)` that makes it."""
    text = literal(np.dtype(spec.dtype))
    if spec.storage != "float":
        text += f', "{spec.storage}"'
    if spec.storage == "int8":
        text += f", reduce_dim={spec.reduce_dim}"
    if spec.constant:
        text += ", constant=True"
    return f"GraphInput({text})"


def _graph_call(call: GraphCall) -> str:
    """The segment's own `GraphCall` as the constructor call that rebuilds it."""
    inputs = ", ".join("None" if spec is None else _spec(spec) for spec in call.inputs)
    factory = "None" if call.factory is None else "f"
    dtypes = ", ".join(str(d) for d in call.dtypes)
    return f"GraphCall({factory}, inputs=[{inputs}], results={call.results!r}, dtypes=[{dtypes}])"


def _builder_text(label: str, segment: Segment, trace: SegmentTrace, constants: bool) -> str:
    lines = [f"def build_{label}({'W' if constants else ''}) -> GraphCall:"]
    if segment.graph is None:
        lines.append("    # no value of the segment is used after it: nothing to build")
    else:
        lines.append("    f = NNFactory()")
    for code, comment in trace.lines:
        if code and comment:
            lines.append(f"    {code}  # {comment}")
        elif code:
            lines.append(f"    {code}")
        else:
            lines.append(f"    # {comment}")
    lines.append(f"    return {_graph_call(segment.call)}")
    return "\n".join(lines)


# ------------------------------------------------------------------- target


@dataclass(frozen=True)
class PythonTarget(Target):
    """`forge-opt -t python` / `-t 'python{granularity=op precision=int8 weights=parameters
    profile=host.json}'` (defaults as the executor's: segment, fp32, constants, no
    profile)."""

    name = "python"

    granularity: str = "segment"
    precision: str = "fp32"
    weights: str = "constants"
    profile: str = ""

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise ValueError(
                f"granularity must be one of {', '.join(GRANULARITIES)}, got '{self.granularity}'"
            )
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"precision must be one of {', '.join(PRECISIONS)}, got '{self.precision}'"
            )
        if self.weights not in WEIGHT_BINDINGS:
            raise ValueError(
                f"weights must be one of {', '.join(WEIGHT_BINDINGS)}, got '{self.weights}'"
            )

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(
            plan_to_python(
                module, self.precision, self.granularity, self.weights, profile=self.profile
            )
        )


__all__ = [
    "Names",
    "PythonTarget",
    "SegmentTrace",
    "compile_with_snippets",
    "describe",
    "literal",
    "plan_to_python",
    "strided_slice",
    "unpack_array",
    "weight_arrays",
]
