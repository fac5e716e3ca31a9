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

The recording is `plan_trace`'s, the writing of values and names `plan_text`'s, and what
the program imports besides NNFactory and `GraphCall` lives in `plan_runtime`.

Executing the program (NNFactory and torch installed), calling `build(weights)` when
the weights are constants (`weights_as="constants"`, the executor's default) and then
`run` with the executor's inputs and weights gives the executor's outputs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import torch
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.utils.target import Target

from forge.conversion.graph_call import GraphCall, GraphInput
from forge.conversion.kernel_choice import BuildOptions
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
from forge.dialects import contract, npu
from forge.dialects.context import entry_function, infer_num_inputs
from forge.dialects.dtypes import check_precision
from forge.dialects.shapes import DYNAMIC
from forge.support.diagnostics import ForgeError, op_error
from forge.target.cpu_kernels import cpu_kernel, packed_linear_spec, torch_dtype
from forge.tools.plan_text import Names, describe, literal, tuple_text
from forge.tools.plan_trace import SegmentTrace, recording, run_recorded
from forge.transforms.host_profile import load_profile
from forge.transforms.npu_assign_precision import record_precision
from forge.transforms.npu_schedule_affinity import body_ops, check_schedule


@dataclass
class ProgramText:
    """The growing program: module-level constants, segment builders, `run`'s body."""

    constants: list[str]
    builders: list[str]
    body: list[str]


def _kernel_call(op: Operation, names: Names) -> str | None:
    """The CPU steps whose kernels branch on their data (a check, slices at a run-time
    position), printed as calls of those kernels (`plan_runtime`)."""
    operands = ", ".join(names(op.operands))
    if isinstance(op, npu.RunStartOp):
        return f"{names(op.results)[0]} = check_run({operands}, {op.capacity.value.data})"
    if isinstance(op, npu.CachedAttentionOp):
        scale, window = literal(op.scale.value.data), op.window_size
        return f"{names(op.results)[0]} = attend_cached({operands}, scale={scale}, window={window})"
    return None


def cpu_step_lines(op: Operation, names: Names, program: ProgramText) -> list[str]:
    """`op`'s CPU callable as the ATen calls it makes, bound to `op`'s result names."""
    call = _kernel_call(op, names)
    if call is not None:
        return [call]
    inputs, result, recorder = run_recorded(op, cpu_kernel(op))
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


def _state_precision(function: func.FuncOp, precision: str) -> str:
    """The IR carries the precision the graphs are built at: `precision` is recorded in
    IR planned without one; IR that recorded one is printed at it (fp32 asks for
    nothing), and another precision asked for is an error."""
    recorded = contract.program_precision(function)
    if recorded is None:
        record_precision(function, precision)
        return precision
    if precision not in ("fp32", recorded):
        raise ForgeError(
            f"the IR was assigned precision {recorded} (npu-assign-precision), not {precision}"
        )
    return recorded


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
    the linears' kernels, `BuildOptions.for_host`); without, in OpenVINO's default form."""
    check_precision(precision)
    if granularity not in GRANULARITIES:
        raise ForgeError(
            f"granularity must be one of {', '.join(GRANULARITIES)}, got '{granularity}'"
        )
    if weights not in WEIGHT_BINDINGS:
        raise ForgeError(f"weights must be one of {', '.join(WEIGHT_BINDINGS)}, got '{weights}'")
    function = entry_function(module)
    _check_planned(function)
    precision = _state_precision(function, precision)
    options = BuildOptions.for_host(
        load_profile(profile) if profile else None, granularity=granularity, weights_as=weights
    )
    args = list(function.body.block.args)
    if num_inputs is None:
        num_inputs = infer_num_inputs(function)
    if not 0 <= num_inputs <= len(args):
        raise ForgeError(f"num_inputs must lie in [0, {len(args)}], got {num_inputs}")
    constants = weights == "constants"
    writes = contract.write_backs(function)
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
                with recording(trace):
                    segment = build_segment(group, options, trace=trace, constants=placeholders)
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
    for result, arg in contract.copied_write_backs(function):  # not what cache_update did
        program.body.append(f"{names.of[args[arg]]}.copy_({returned[result]})  # {contract.WRITES}")
    program.body.append(f"return {tuple_text(returned[: len(returned) - len(writes)])}")
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
    for helper in (
        "mark_llm",
        "mark_decompression",
        "compile_with_snippets",
        "paged_attention",
        "eltwise_extreme",
    ):
        if any(f"{helper}(" in builder for builder in program.builders):
            helpers.insert(0, helper)
    for helper in ("check_run", "attend_cached"):
        if any(f" = {helper}(" in line for line in program.body):
            helpers.insert(0, helper)
    imports = ["import numpy as np", "import torch", ""]
    if any(line.startswith("pack") for line in instances):
        imports.append("from forge.target.cpu_kernels import PackedLinear")
    imports.append("from forge.conversion.graph_call import GraphCall, GraphInput")
    imports.append(f"from forge.conversion.plan_runtime import {', '.join(helpers)}")
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
    if spec.transposed:
        text += ", transposed=True"
    if spec.written:
        text += ", written=True"
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
        check_precision(self.precision, ValueError)
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


__all__ = ["PythonTarget", "plan_to_python"]
