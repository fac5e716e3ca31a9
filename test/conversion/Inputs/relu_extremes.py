"""A pass plugin for --check-numerics tests: applying `test-relu-extremes` changes no IR
but puts back the old lowering of npu.maximum/npu.minimum (x + relu(y - x), x - relu(x -
y)), which cancels when the operands differ in magnitude: the executable check must
name it. A test device only; Forge's lowering is `GraphBuilder.extreme`."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from forge.conversion.nnfactory_graph import GraphBuilder, Node


def relu_form(b: GraphBuilder, name: str, x: Node, y: Node) -> Node:
    f = b.factory
    if name == "eltwise_max":
        return f.eltwise_add(x, f.relu(b.sub(y, x)))
    return b.sub(x, f.relu(b.sub(x, y)))


@dataclass(frozen=True)
class ReluExtremesPass(ModulePass):
    name = "test-relu-extremes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        GraphBuilder.extreme = relu_form
