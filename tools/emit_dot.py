"""`forge-opt --emit=dot`: the function as a Graphviz graph.

Ops are nodes coloured by device (NPU blue, CPU orange, unplaced grey); each maximal
run of NPU ops in the current order, which becomes one NNFactory graph, is a cluster.
Edges are SSA uses; function arguments are small boxes (weights are not drawn, to keep
large models readable).
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, Operation, SSAValue

COLOURS = {"npu": "#9ecae1", "cpu": "#fdae6b", None: "#d9d9d9"}


def _device(op: Operation) -> str | None:
    device = op.attributes.get("device")
    return getattr(device, "data", None)


def _label(op: Operation) -> str:
    opcode = getattr(op, "opcode", op.name)
    name = op.name.removeprefix("npu.")
    shown = f"{name}\\n{opcode}" if op.name == "npu.generic" else name
    types = ", ".join(str(r.type).removeprefix("tensor<").removesuffix(">") for r in op.results)
    return f"{shown}\\n{types}" if types else shown


def function_to_dot(function: func.FuncOp) -> str:
    ops = [op for op in function.body.block.ops if not isinstance(op, func.ReturnOp)]
    ids = {op: f"op{i}" for i, op in enumerate(ops)}
    lines = [f'digraph "{function.sym_name.data}" {{', "  node [shape=box, style=filled];"]
    segment: list[Operation] = []
    segments = 0

    def flush() -> None:
        nonlocal segment, segments
        if not segment:
            return
        lines.append(f'  subgraph cluster_{segments} {{ label="NNFactory graph {segments}";')
        lines.extend(f"    {ids[op]};" for op in segment)
        lines.append("  }")
        segments += 1
        segment = []

    for op in ops:
        device = _device(op)
        colour = COLOURS.get(device, COLOURS[None])
        lines.append(f'  {ids[op]} [label="{_label(op)}", fillcolor="{colour}"];')
        if device == "npu":
            segment.append(op)
        else:
            flush()
    flush()

    def source(value: SSAValue) -> str | None:
        if isinstance(value, BlockArgument):
            return None
        return ids.get(value.owner)

    for op in ops:
        for operand in op.operands:
            src = source(operand)
            if src is not None:
                lines.append(f"  {src} -> {ids[op]};")
    returned = function.body.block.last_op
    if isinstance(returned, func.ReturnOp):
        lines.append('  return [shape=oval, fillcolor="white"];')
        for value in returned.operands:
            if (src := source(value)) is not None:
                lines.append(f"  {src} -> return;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def module_to_dot(module: ModuleOp) -> str:
    return "".join(function_to_dot(f) for f in module.walk() if isinstance(f, func.FuncOp))
