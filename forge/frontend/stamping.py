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

State is stamped as well. The cut program is functionalized first; a traced layer may
write only buffers the model names as that layer's (`layer_state(i)`: a KV cache's keys
and values), inside the layer, and a stamped layer reads and writes its own, its writes
added to the signature in buffer order. Writes around the stack stay as they are.

What would make layers differ is refused up front and the model exported whole: layers
of different classes, shapes or plain settings (other than their index), a config list
with one entry per layer that is not uniform (`layer_types`: sliding and full
attention), layers writing state no `layer_state` names, and any op, edge or write of a
traced layer that does not match the previous one's. Code that
treats a later layer alone (`if i == 5`) is not seen; such models list it in their
config (`layer_types`), which refuses them.
`FORGE_LAYER_STAMPING=0` turns it off.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.export.graph_signature import (
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from torch.fx import Graph, Node

TRACED = 3
"""Layers torch.export traces."""
MIN_LAYERS = TRACED + 1

INDEX_ATTRIBUTES = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "idx"})
"""Plain attributes that name a layer's position and may differ between layers (they
select a KV cache's entry, which `layer_state` maps from layer to layer)."""


def enabled() -> bool:
    return os.environ.get("FORGE_LAYER_STAMPING", "1") != "0"


@dataclass(frozen=True)
class Stack:
    """The decoder stack: its parent module, attribute name and full path."""

    parent: torch.nn.Module
    attribute: str
    path: str
    layers: torch.nn.ModuleList
    state: Callable[[int], tuple[str, ...]] | None = None
    """The buffers (outside the layers) layer i writes, in an order alike for every
    layer: a KV cache's keys and values (`StaticCacheLM.layer_state`)."""

    def counterpart(self, target: str, i: int, j: int) -> str | None:
        """Layer j's name for layer i's parameter or state buffer `target`."""
        own = f"{self.path}.{i}."
        if target.startswith(own):
            return f"{self.path}.{j}." + target[len(own) :]
        names = self.state(i) if self.state is not None else ()
        return self.state(j)[names.index(target)] if target in names else None


def find_stack(model: torch.nn.Module) -> Stack | None:
    """The one outermost ModuleList of `MIN_LAYERS` or more interchangeable layers
    (none for a model that says `layer_stamping = False`)."""
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
    return Stack(parent, attribute, path, layers, getattr(model, "layer_state", None))


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
    raises `Mismatch` (the graph untouched) where the traced layers differ. The graph
    is functional: the caller functionalizes in-place ops first (`capture.mutates`), so
    state writes are the signature's `BUFFER_MUTATION` outputs."""
    graph = exported.graph
    regions = [_region(graph, f"{stack.path}.{i}") for i in range(TRACED)]
    writes = _state_writes(exported, stack, regions)
    weights = {
        spec.arg.name: spec
        for spec in exported.graph_signature.input_specs
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER)
        and isinstance(spec.arg, TensorArgument)
        and spec.target is not None
    }
    plans = [
        _pair(regions[i], regions[i + 1], weights, stack, i, writes) for i in range(TRACED - 1)
    ]
    _copy_layers(exported, stack, regions[-1], plans[-1], weights, writes)


def _state_writes(
    exported: torch.export.ExportedProgram, stack: Stack, regions: list[list[Node]]
) -> dict[Node, str]:
    """The graph's buffer writes ({node: buffer}); `Mismatch` unless every write of a
    layer's state is made by that traced layer (writes around the stack stay as they
    are) and no other kind of output is there."""
    outputs = next(node for node in exported.graph.nodes if node.op == "output").args[0]
    writes: dict[Node, str] = {}
    layer_of = {
        name: i
        for i in range(len(stack.layers))
        for name in (stack.state(i) if stack.state is not None else ())
    }
    for spec, node in zip(exported.graph_signature.output_specs, outputs, strict=True):
        if spec.kind == OutputKind.USER_OUTPUT:
            continue
        if spec.kind != OutputKind.BUFFER_MUTATION or not isinstance(node, Node):
            raise Mismatch("the graph writes state other than buffers")
        target = spec.target or ""
        layer = layer_of.get(target)
        inside = [i for i, region in enumerate(regions) if node in region]
        if (layer is None and inside) or (layer is not None and inside != [layer]):
            raise Mismatch(f"{target} is written outside its layer")
        writes[node] = target
    return writes


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
    first: list[Node],
    second: list[Node],
    weights: dict[str, InputSpec],
    stack: Stack,
    index: int,
    writes: dict[Node, str],
) -> _Plan:
    if len(first) != len(second):
        raise Mismatch("the layers trace different numbers of ops")
    graph_order = {node: i for i, node in enumerate(first[0].graph.nodes)}
    span = range(graph_order[first[0]], graph_order[second[-1]] + 1)
    members = set(first) | set(second)
    if sum(1 for node in first[0].graph.nodes if graph_order[node] in span) != len(members):
        raise Mismatch("other ops run between the layers")
    plan = _Plan({}, {})
    edges = _Edges(plan, set(first), weights, stack, index)
    for node0, node1 in zip(first, second, strict=True):
        if node0.target != node1.target or node0.kwargs.keys() != node1.kwargs.keys():
            raise Mismatch(f"{node0.name} and {node1.name} differ")
        if not _same_value(node0.meta.get("val"), node1.meta.get("val")):
            raise Mismatch(f"{node0.name} and {node1.name} differ in shape")
        edges.pair(node0.args, node1.args)
        edges.pair(node0.kwargs, node1.kwargs)
        plan.counterpart[node0] = node1
        written = writes.get(node0)
        expected = stack.counterpart(written, index, index + 1) if written else None
        if writes.get(node1) != expected:
            raise Mismatch(f"{node0.name} and {node1.name} write different state")
    for node in first:  # the first layer's results feed only the second layer
        if any(user not in members and user.op != "output" for user in node.users):
            raise Mismatch(f"{node.name} of the first layer is read after the second")
    return plan


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype
    return type(a) is type(b)


@dataclass
class _Edges:
    """Pairs the arguments of two corresponding ops of layers `index` and `index + 1`."""

    plan: _Plan
    in_first: set[Node]
    weights: dict[str, InputSpec]
    stack: Stack
    index: int

    def pair(self, a: Any, b: Any) -> None:
        if isinstance(a, list | tuple):
            if not isinstance(b, list | tuple) or len(a) != len(b):
                raise Mismatch("argument lists differ")
            for x, y in zip(a, b, strict=True):
                self.pair(x, y)
            return
        if isinstance(a, dict):
            if not isinstance(b, dict) or a.keys() != b.keys():
                raise Mismatch("keyword arguments differ")
            for key in a:
                self.pair(a[key], b[key])
            return
        if not isinstance(a, Node):
            if isinstance(b, Node) or a != b:
                raise Mismatch(f"constants differ: {a!r} and {b!r}")
            return
        if not isinstance(b, Node):
            raise Mismatch("an edge and a constant")
        self._pair_nodes(a, b)

    def _pair_nodes(self, a: Node, b: Node) -> None:
        plan, in_first = self.plan, self.in_first
        if a is b and a not in in_first:  # a value both layers read (a mask, a shared table)
            return
        if a in in_first:
            if plan.counterpart.get(a) is not b:
                raise Mismatch(f"{a.name}'s edge is not the second layer's")
            return
        if a.name in self.weights:
            target0 = self.weights[a.name].target or ""
            target1 = self.weights[b.name].target if b.name in self.weights else None
            expected = self.stack.counterpart(target0, self.index, self.index + 1)
            if expected is None or target1 != expected:
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
    writes: dict[Node, str],
) -> None:
    graph = exported.graph
    specs = exported.graph_signature.input_specs
    last_traced = TRACED - 1
    prefix1 = f"{stack.path}.{last_traced}."
    own = {  # the second layer's weight placeholders, in signature order
        spec.arg.name: spec
        for spec in specs
        if spec.arg.name in weights and (spec.target or "").startswith(prefix1)
    }
    placeholders = {node.name: node for node in graph.nodes if node.op == "placeholder"}
    by_target = {spec.target: placeholders[name] for name, spec in weights.items()}
    state = stack.state(last_traced) if stack.state is not None else ()
    read_state = [name for name in state if name in by_target]
    for index in range(TRACED, len(stack.layers)):  # checked before the graph changes
        missing = [
            name
            for name in read_state
            if stack.counterpart(name, last_traced, index) not in by_target
        ]
        if missing:
            raise Mismatch(f"layer {index} has no counterpart of {', '.join(missing)}")
    carried_in_second = {b: plan.counterpart[b] for b in plan.carried.values()}
    second_set = set(second)
    output = next(node for node in reversed(graph.nodes) if node.op == "output")
    readers_after = {
        node: [u for u in node.users if u not in second_set and u is not output] for node in second
    }
    written = [(node, target) for node, target in writes.items() if node in second_set]
    new_writes: list[tuple[Node, str]] = []
    after = second[-1].next
    previous: dict[Node, Node] = {node: node for node in second}
    last = next(reversed(own))  # new placeholders and specs go after the last one's
    anchor = placeholders[last]
    spec_at = specs.index(own[last]) + 1
    for index in range(TRACED, len(stack.layers)):
        prefix = f"{stack.path}.{index}."
        current: dict[Node, Node] = {
            by_target[name]: by_target[stack.counterpart(name, last_traced, index)]
            for name in read_state
        }
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
        new_writes += [
            (current[node], stack.counterpart(target, last_traced, index) or "")
            for node, target in written
        ]
        previous = {node: current[node] for node in second}
    for node, readers in readers_after.items():
        for reader in readers:
            reader.replace_input_with(node, previous[node])
    _rewrite_outputs(exported, output, previous, new_writes)


def _rewrite_outputs(
    exported: torch.export.ExportedProgram,
    output: Node,
    previous: dict[Node, Node],
    new_writes: list[tuple[Node, str]],
) -> None:
    """User outputs read the last layer; the stamped layers' state writes join the
    others, ordered as their buffers are (where a whole export puts them)."""
    signature = exported.graph_signature
    entries = list(zip(signature.output_specs, output.args[0], strict=True))
    user = [
        (spec, previous.get(node, node) if isinstance(node, Node) else node)
        for spec, node in entries
        if spec.kind == OutputKind.USER_OUTPUT
    ]
    state = [(spec, node) for spec, node in entries if spec.kind != OutputKind.USER_OUTPUT]
    state += [
        (OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(node.name), target), node)
        for node, target in new_writes
    ]
    order = {spec.target: i for i, spec in enumerate(signature.input_specs)}
    state.sort(key=lambda entry: order.get(entry[0].target, len(order)))
    final = state + user
    output.args = (type(output.args[0])(node for _, node in final),)
    signature.output_specs[:] = [spec for spec, _ in final]


def _placeholder_name(name: str, target: str) -> str:
    kind = name.split("_", 1)[0]
    return f"{kind}_{target.replace('.', '_')}"
