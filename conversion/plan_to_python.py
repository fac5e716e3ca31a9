"""The plan `CompiledNPUExecutor` runs, printed as a Python program (`forge-opt -t python`).

A plan is easiest to review as the code it amounts to: NNFactory graph-building calls
per segment, then a `run(...)` function of segment calls and CPU callables. The
program is recorded, not re-derived, so it cannot drift from the executor:

* steps come from the executor's own grouping (`device_runs`, `npu_groups`), with
  its fallback to the CPU when NNFactory cannot lower a group;
* each segment is built for real by `build_segment`, through a `GraphTrace` whose
  proxy factory records every call the builder makes (and the StridedSlice binding
  it calls directly);
* each CPU step runs its `cpu_kernel` on meta tensors under a `TorchFunctionMode`
  that records the ATen calls it makes.

Executing the program (NNFactory and torch installed) and calling `run` with the
executor's arguments gives the executor's outputs.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import importlib
import itertools
import keyword
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
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

from forge.conversion import nnfactory_graph
from forge.conversion.cpu_kernels import cpu_kernel, torch_dtype
from forge.conversion.nnfactory_graph import NoNpuLowering, build_segment, segment_boundary
from forge.diagnostics import ForgeError, op_error
from forge.dialects.shapes import DYNAMIC
from forge.executor import device_runs, npu_groups
from forge.nnfactory import PACKAGE
from forge.reference import entry_function
from forge.transforms.npu_schedule_affinity import body_ops, check_schedule

PLAN_PRECISIONS = ("fp32", "fp16")
"""The executor precisions whose graphs bind one parameter per segment input."""

GRANULARITIES = ("segment", "op")

RESERVED = {"torch", "np", "run", "GraphCall", "strided_slice", "unpack_array", "NNFactory"}
"""Module-level names of the printed program, which argument names must not shadow."""

_GENERATED = re.compile(r"(v|t|p|seg|build_seg|const_)\d+")

INLINE_ELEMENTS = 16
"""Constants up to this many elements are printed as literals; larger ones packed."""


# ------------------------------------------------------------ runtime helpers


class GraphCall:
    """A segment graph called as `Segment.__call__` calls it: each input converted to
    its parameter's dtype, one run, results copied out in the IR's dtypes (an output
    that is an input unchanged passes through, converted)."""

    def __init__(
        self,
        factory: Any,
        inputs: Sequence[torch.dtype | None],
        results: Sequence[tuple[bool, int]],
        dtypes: Sequence[torch.dtype],
    ):
        self.factory = factory
        self.inputs = list(inputs)
        self.results = list(results)
        self.dtypes = list(dtypes)

    def __call__(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if len(tensors) != len(self.inputs):
            raise ForgeError(f"segment expects {len(self.inputs)} inputs, got {len(tensors)}")
        out: list[np.ndarray] = []
        if self.factory is not None:
            # The arrays must stay alive until the run: the graph reads them in place.
            arrays = [
                t.detach().to(dtype).contiguous().numpy()
                for t, dtype in zip(tensors, self.inputs, strict=True)
            ]
            for i, array in enumerate(arrays):
                self.factory.set_input_tensor(array, i)
            nnfactory_graph._run_graph(self.factory)
            out = self.factory.out
        return tuple(
            torch.from_numpy(out[i]).to(dtype, copy=True) if computed else tensors[i].to(dtype)
            for (computed, i), dtype in zip(self.results, self.dtypes, strict=True)
        )


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
    """A `GraphTrace`: the NNFactory calls of one segment's build, as Python lines."""

    def __init__(self, inputs: Sequence[str]):
        self.inputs = list(inputs)
        self.lines: list[Line] = []
        self.factory: Any = None
        self.parameter_dtypes: list[Any] = []
        self._nodes: dict[int, str] = {}
        self._temps = 0
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
        comment = ""
        name = None
        if method == "parameter":
            index = len(self.parameter_dtypes)
            self.parameter_dtypes.append(args[1] if len(args) > 1 else kwargs.get("dtype"))
            name = f"p{index}"
            comment = self.inputs[index] if index < len(self.inputs) else ""
        if method == "compile":
            self._note_empty_op()
            self._calls_at_op = 0
        target = self._bind(result, name)
        code = f"f.{method}({text})"
        self.lines.append((f"{target} = {code}" if target else code, comment))

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


def _ops_summary(ops: Sequence[Operation]) -> str:
    if len(ops) == 1:
        return describe(ops[0])
    return f"{len(ops)} ops, {describe(ops[0])} .. {describe(ops[-1])}"


def plan_to_python(
    module: ModuleOp | func.FuncOp, precision: str = "fp32", granularity: str = "segment"
) -> str:
    """The Python program of the plan `CompiledNPUExecutor(module, ..., precision,
    granularity)` runs."""
    if precision not in PLAN_PRECISIONS:
        raise ForgeError(
            f"precision must be one of {', '.join(PLAN_PRECISIONS)}, got '{precision}'"
        )
    if granularity not in GRANULARITIES:
        raise ForgeError(
            f"granularity must be one of {', '.join(GRANULARITIES)}, got '{granularity}'"
        )
    function = entry_function(module)
    _check_planned(function)
    names = Names(function)
    program = ProgramText([], [], [])
    graphs: dict[tuple[str, ...], str] = {}
    devices: list[str] = []
    segments = npu_ops = 0

    def add_cpu(op: Operation, note: str = "") -> None:
        program.body.append(f"# cpu: {describe(op)}{note}")
        program.body.extend(cpu_step_lines(op, names, program))
        devices.append("cpu")

    for device, run in device_runs(function):
        if device == "cpu":
            add_cpu(run[0])
            continue
        for group in npu_groups(run, granularity):
            inputs, _ = segment_boundary(group)
            trace = SegmentTrace(names(inputs))
            try:
                with _recording_slices(trace):
                    segment = build_segment(group, precision, trace=trace)
            except NoNpuLowering as e:
                for op in group:
                    add_cpu(op, f" (placed on the NPU; NNFactory cannot lower it: {e.args[0]})")
                continue
            label = f"seg{segments}"
            segments += 1
            npu_ops += len(group)
            devices.append("npu")
            code = _segment_code(segment, trace)
            shared = graphs.get(tuple(code))
            if shared is not None:
                program.builders.append(f"{label} = {shared}  # the same graph (cache hit)")
            else:
                graphs[tuple(code)] = label
                program.builders.append(_builder_text(label, segment, trace))
            program.body.append(f"# npu: {label}: {_ops_summary(group)}")
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
    program.body.append(f"return {_tuple(returned)}")
    transitions = sum(a != b for a, b in itertools.pairwise(devices))
    header = (
        f'"""Forge plan of @{function.sym_name.data} (precision {precision}, granularity '
        f"{granularity}): {len(devices)} steps, {segments} NNFactory segment(s) of "
        f"{npu_ops} op(s), {len(devices) - segments} CPU callable(s), {transitions} "
        "NPU<->CPU transition(s).\n\nPrinted by `forge-opt -t python`; exec() it, then "
        'call run(...) with the inputs and weights."""\n'
    )
    imports = ["import numpy as np", "import torch", ""]
    imports.append(
        "from forge.conversion.plan_to_python import GraphCall, strided_slice, unpack_array"
    )
    if segments:
        imports += [
            "from forge.nnfactory import load_backend",
            "",
            "NNFactory = load_backend().NNFactory",
        ]
    parts = [header, "\n".join(imports) + "\n"]
    if program.constants:
        parts.append("\n".join(program.constants) + "\n")
    parts.extend(program.builders)
    arguments = ", ".join(names(list(function.body.block.args)))
    body = "\n".join(f"    {line}" for line in program.body)
    parts.append(f"@torch.no_grad()\ndef run({arguments}):\n{body}\n")
    return "\n\n".join(p.rstrip("\n") + "\n" for p in parts)


def _tuple(items: Sequence[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _segment_code(segment: Any, trace: SegmentTrace) -> list[str]:
    """The builder's code without comments: equal code, the same graph."""
    graph = segment.graph
    return [code for code, _ in trace.lines if code] + [
        _graph_call(segment, trace) if graph is not None else "",
    ]


def _graph_call(segment: Any, trace: SegmentTrace) -> str:
    graph = segment.graph
    inputs = [
        str(nnfactory_graph._torch_for_numpy(np.dtype(d))) if d is not None else "None"
        for d in trace.parameter_dtypes
    ]
    if graph is None:
        inputs = ["None"] * len(segment.inputs)
    elif len(inputs) != len(segment.inputs):
        raise ForgeError("the plan printer expects one graph parameter per segment input")
    factory = "f" if graph is not None and graph.factory is not None else "None"
    sources = list(graph.sources) if graph is not None else []
    dtypes = [str(d) for d in segment.output_dtypes] if graph is not None else []
    return (
        f"GraphCall({factory}, inputs=[{', '.join(inputs)}], results={sources!r}, "
        f"dtypes=[{', '.join(dtypes)}])"
    )


def _builder_text(label: str, segment: Any, trace: SegmentTrace) -> str:
    lines = [f"def build_{label}() -> GraphCall:"]
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
    lines.append(f"    return {_graph_call(segment, trace)}")
    lines.append("")
    lines.append("")
    lines.append(f"{label} = build_{label}()")
    return "\n".join(lines)


# ------------------------------------------------------------------- target


@dataclass(frozen=True)
class PythonTarget(Target):
    """`forge-opt -t python` / `-t 'python{granularity=op precision=fp16}'`."""

    name = "python"

    granularity: str = "segment"
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise ValueError(
                f"granularity must be one of {', '.join(GRANULARITIES)}, got '{self.granularity}'"
            )
        if self.precision not in PLAN_PRECISIONS:
            raise ValueError(
                f"precision must be one of {', '.join(PLAN_PRECISIONS)}, got '{self.precision}'"
            )

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(plan_to_python(module, self.precision, self.granularity))


__all__ = [
    "GraphCall",
    "Names",
    "PythonTarget",
    "SegmentTrace",
    "describe",
    "literal",
    "plan_to_python",
    "strided_slice",
    "unpack_array",
]
