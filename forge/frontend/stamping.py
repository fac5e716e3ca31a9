"""Layer stamping: torch.export traces a transformer's first three layers; the others
are stamped from the third in the exported graph.

Tracing is most of Phase 1 and grows with the layers: GPT-2's export takes 1.3-2.1 s
with its 12 layers and 0.16-0.27 s with one (AMD EPYC Zen 3, one process). A decoder
stack whose layers are one class with the same weights' shapes and the same settings
computes the same ops in every layer, on its own weights. So `capture` exports the
model with the stack cut to three layers, checks that each traced layer's ops are the
previous one's op for op (its weights swapped in, the previous layer's result where
that one read its input) with nothing between them, and copies the third layer's ops
once per further layer onto that layer's weights. Three, not two: code the model runs
between layers only on some of them (`if i % 2`) shows between the second and the
third. The importer then sees the graph a full
export gives: the same ops in the same order, one argument per weight.

What would make layers differ is refused up front and the model exported whole: layers
of different classes, shapes or plain settings (other than their index), a config list
with one entry per layer that is not uniform (`layer_types`: sliding and full
attention), a model that mutates state or returns per-layer values (KV caches, hidden
states), and any op or edge of a traced layer that does not match the previous one's. Code that
treats a later layer alone (`if i == 5`) is not seen; such models list it in their
config (`layer_types`), which refuses them.
`FORGE_LAYER_STAMPING=0` turns it off.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.export.graph_signature import InputKind, InputSpec, OutputKind, TensorArgument
from torch.fx import Graph, Node

TRACED = 3
"""Layers torch.export traces."""
MIN_LAYERS = TRACED + 1

INDEX_ATTRIBUTES = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "idx"})
"""Plain attributes that name a layer's position and may differ between layers (they
select a KV cache's entry, and stamping is only done without caches)."""


def enabled() -> bool:
    return os.environ.get("FORGE_LAYER_STAMPING", "1") != "0"


@dataclass(frozen=True)
class Stack:
    """The decoder stack: its parent module, attribute name and full path."""

    parent: torch.nn.Module
    attribute: str
    path: str
    layers: torch.nn.ModuleList


def find_stack(model: torch.nn.Module) -> Stack | None:
    """The one outermost ModuleList of `MIN_LAYERS` or more interchangeable layers
    (none for a model that says `layer_stamping = False`: one that writes KV caches)."""
    if not getattr(model, "layer_stamping", True):
        return None
    lists = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.ModuleList) and len(module) >= MIN_LAYERS and name
    ]
    outermost = [
        (name, module)
        for name, module in lists
        if not any(name.startswith(other + ".") for other, _ in lists)
    ]
    if len(outermost) != 1:
        return None
    path, layers = outermost[0]
    if not _interchangeable(list(layers)) or not _uniform_config(model, len(layers)):
        return None
    parent_path, _, attribute = path.rpartition(".")
    parent = model.get_submodule(parent_path) if parent_path else model
    return Stack(parent, attribute, path, layers)


def _interchangeable(layers: list[torch.nn.Module]) -> bool:
    first = _signature(layers[0])
    return first is not None and all(_signature(layer) == first for layer in layers[1:])


def _signature(layer: torch.nn.Module) -> list[Any] | None:
    """Classes, tensors' names/shapes/dtypes and plain settings of every submodule; None
    where a setting cannot be compared."""
    described: list[Any] = []
    for name, module in layer.named_modules():
        settings = []
        for key, value in sorted(vars(module).items()):
            if key.startswith("_") or key in INDEX_ATTRIBUTES or key == "training":
                continue
            plain = _plain(value)
            if plain is _UNCOMPARABLE:
                return None
            settings.append((key, plain))
        described.append((name, type(module), module.training, settings))
    for name, tensor in [
        *layer.named_parameters(remove_duplicate=False),
        *layer.named_buffers(remove_duplicate=False),
    ]:
        described.append((name, tuple(tensor.shape), tensor.dtype, tensor.device.type))
    return described


_UNCOMPARABLE = object()


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str | torch.dtype):
        return value
    if isinstance(value, list | tuple):
        items = [_plain(v) for v in value]
        return _UNCOMPARABLE if _UNCOMPARABLE in items else tuple(items)
    if callable(value) or hasattr(value, "to_dict"):  # functions, shared configs
        return ("object", id(value))
    return _UNCOMPARABLE


def _uniform_config(model: torch.nn.Module, layers: int) -> bool:
    """False where the config lists something per layer that differs between layers."""
    config = getattr(model, "config", None)
    if config is None:
        return True
    for value in vars(config).values():
        if (
            isinstance(value, list | tuple)
            and len(value) == layers
            and len(set(map(repr, value))) > 1
        ):
            return False
    return True


@contextlib.contextmanager
def traced_layers(stack: Stack) -> Iterator[None]:
    """The model with its stack cut to its first `TRACED` layers, restored after."""
    setattr(stack.parent, stack.attribute, torch.nn.ModuleList(list(stack.layers)[:TRACED]))
    try:
        yield
    finally:
        setattr(stack.parent, stack.attribute, stack.layers)


class Mismatch(Exception):
    """The traced layers differ: the model is exported whole."""


def stamp(exported: torch.export.ExportedProgram, stack: Stack) -> None:
    """Copy the last traced layer's ops for the other layers of `stack`, in place;
    raises `Mismatch` (the graph untouched) where the traced layers differ. The caller
    refuses graphs with in-place ops (`capture.mutates`) first."""
    signature = exported.graph_signature
    if any(spec.kind != OutputKind.USER_OUTPUT for spec in signature.output_specs):
        raise Mismatch("the graph writes state")
    graph = exported.graph
    regions = [_region(graph, f"{stack.path}.{i}") for i in range(TRACED)]
    weights = {
        spec.arg.name: spec
        for spec in signature.input_specs
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER)
        and isinstance(spec.arg, TensorArgument)
        and spec.target is not None
    }
    plans = [
        _pair(regions[i], regions[i + 1], weights, f"{stack.path}.{i}.", f"{stack.path}.{i + 1}.")
        for i in range(TRACED - 1)
    ]
    _copy_layers(exported, stack, regions[-1], plans[-1], weights)


def _region(graph: Graph, path: str) -> list[Node]:
    nodes = [
        node
        for node in graph.nodes
        if node.op == "call_function"
        and any(entry[0] == path for entry in node.meta.get("nn_module_stack", {}).values())
    ]
    if not nodes:
        raise Mismatch(f"no ops traced in {path}")
    return nodes


@dataclass
class _Plan:
    counterpart: dict[Node, Node]
    """Each node of the first layer -> its node in the second."""
    carried: dict[Node, Node]
    """A value the first layer reads from before the stack -> the first layer's node the
    second layer reads in its place (the stack's input -> the first layer's output)."""


def _pair(
    first: list[Node], second: list[Node], weights: dict[str, InputSpec], prefix0: str, prefix1: str
) -> _Plan:
    if len(first) != len(second):
        raise Mismatch("the layers trace different numbers of ops")
    graph_order = {node: i for i, node in enumerate(first[0].graph.nodes)}
    span = range(graph_order[first[0]], graph_order[second[-1]] + 1)
    members = set(first) | set(second)
    if sum(1 for node in first[0].graph.nodes if graph_order[node] in span) != len(members):
        raise Mismatch("other ops run between the layers")
    plan = _Plan({}, {})
    in_first = set(first)
    for node0, node1 in zip(first, second, strict=True):
        if node0.target != node1.target or node0.kwargs.keys() != node1.kwargs.keys():
            raise Mismatch(f"{node0.name} and {node1.name} differ")
        if not _same_value(node0.meta.get("val"), node1.meta.get("val")):
            raise Mismatch(f"{node0.name} and {node1.name} differ in shape")
        _pair_args(node0.args, node1.args, plan, in_first, weights, prefix0, prefix1)
        _pair_args(node0.kwargs, node1.kwargs, plan, in_first, weights, prefix0, prefix1)
        plan.counterpart[node0] = node1
    for node in first:  # the first layer's results feed only the second layer
        if any(user not in members for user in node.users):
            raise Mismatch(f"{node.name} of the first layer is read after the second")
    return plan


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype
    return type(a) is type(b)


def _pair_args(
    a: Any,
    b: Any,
    plan: _Plan,
    in_first: set[Node],
    weights: dict[str, InputSpec],
    prefix0: str,
    prefix1: str,
) -> None:
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            raise Mismatch("argument lists differ")
        for x, y in zip(a, b, strict=True):
            _pair_args(x, y, plan, in_first, weights, prefix0, prefix1)
        return
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            raise Mismatch("keyword arguments differ")
        for key in a:
            _pair_args(a[key], b[key], plan, in_first, weights, prefix0, prefix1)
        return
    if not isinstance(a, Node):
        if isinstance(b, Node) or a != b:
            raise Mismatch(f"constants differ: {a!r} and {b!r}")
        return
    if not isinstance(b, Node):
        raise Mismatch("an edge and a constant")
    if a is b and a not in in_first:  # a value both layers read (a mask, a shared table)
        return
    if a in in_first:
        if plan.counterpart.get(a) is not b:
            raise Mismatch(f"{a.name}'s edge is not the second layer's")
        return
    if a.name in weights:
        target0 = weights[a.name].target or ""
        target1 = weights[b.name].target or "" if b.name in weights else ""
        if not (target0.startswith(prefix0) and target1 == prefix1 + target0[len(prefix0) :]):
            raise Mismatch(f"{target0} and {target1} are not the layers' own")
        return
    if b not in in_first:
        raise Mismatch(f"{a.name} and {b.name}: the layers read different values")
    if plan.carried.setdefault(a, b) is not b:
        raise Mismatch(f"{a.name} is carried two ways")


def _copy_layers(
    exported: torch.export.ExportedProgram,
    stack: Stack,
    second: list[Node],
    plan: _Plan,
    weights: dict[str, InputSpec],
) -> None:
    graph = exported.graph
    specs = exported.graph_signature.input_specs
    prefix1 = f"{stack.path}.{TRACED - 1}."
    own = {  # the second layer's weight placeholders, in signature order
        spec.arg.name: spec
        for spec in specs
        if spec.arg.name in weights and (spec.target or "").startswith(prefix1)
    }
    placeholders = {node.name: node for node in graph.nodes if node.op == "placeholder"}
    carried_in_second = {b: plan.counterpart[b] for b in plan.carried.values()}
    second_set = set(second)
    readers_after = {node: [u for u in node.users if u not in second_set] for node in second}
    after = second[-1].next
    previous: dict[Node, Node] = {node: node for node in second}
    last = next(reversed(own))  # new placeholders and specs go after the last one's
    anchor = placeholders[last]
    spec_at = specs.index(own[last]) + 1
    for index in range(TRACED, len(stack.layers)):
        prefix = f"{stack.path}.{index}."
        current: dict[Node, Node] = {}
        with graph.inserting_after(anchor):
            for name, spec in reversed(own.items()):
                target = prefix + (spec.target or "")[len(prefix1) :]
                node = graph.placeholder(_placeholder_name(name, target))
                node.meta = dict(placeholders[name].meta)
                current[placeholders[name]] = node
                specs.insert(
                    spec_at,
                    InputSpec(spec.kind, TensorArgument(node.name), target, spec.persistent),
                )
        anchor = current[placeholders[last]]
        spec_at += len(own)

        def mapped(
            arg: Node, current: dict[Node, Node] = current, previous: dict[Node, Node] = previous
        ) -> Node:
            if arg in current:
                return current[arg]
            if arg in carried_in_second:  # the previous layer's output
                return previous[carried_in_second[arg]]
            return arg

        with graph.inserting_before(after):
            for node in second:
                current[node] = graph.node_copy(node, mapped)
        previous = {node: current[node] for node in second}
    for node, readers in readers_after.items():
        for reader in readers:
            reader.replace_input_with(node, previous[node])


def _placeholder_name(name: str, target: str) -> str:
    kind = name.split("_", 1)[0]
    return f"{kind}_{target.replace('.', '_')}"
