"""Complex values in a captured graph, lowered to real pairs before import.

DeepSeek-V2 and Llama 4 apply their rotary embedding as a complex multiply:
`view_as_real(view_as_complex(x) * polar(1, angles))`. Neither the `npu` dialect nor
NNFactory has a complex type, but every complex value of such a graph is a real tensor
with a trailing dimension of 2 (real, imaginary) in disguise. `lower_complex` rewrites
the exported ATen graph so: `view_as_complex` and `view_as_real` disappear (the pair
is the real tensor itself), `polar(r, t)` is `stack(r cos t, r sin t)`, a complex
product is `(ar br - ai bi, ar bi + ai br)`, and shape ops on a complex value act on
its pair with the trailing dimension kept last. A complex op outside this set is one
`unsupported` line naming the op.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.fx import Graph, Node

from forge.support.diagnostics import ForgeError

aten = torch.ops.aten

REAL_OF = {
    torch.complex32: torch.float16,
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
}
"""Complex dtype -> the dtype of its real and imaginary parts."""


def is_complex(value: Any) -> bool:
    val = value.meta.get("val") if isinstance(value, Node) else None
    return isinstance(val, torch.Tensor) and val.dtype.is_complex


def lower_complex(exported: torch.export.ExportedProgram) -> int:
    """Rewrite every complex value of `exported`'s graph as a real pair, in place;
    returns how many complex ops were rewritten (0: the graph is left untouched)."""
    graph = exported.graph_module.graph
    for node in graph.nodes:
        if node.op == "placeholder" and is_complex(node):
            raise ForgeError(
                f"unsupported: complex input '{node.name}' "
                f"({node.meta['val'].dtype}): only complex values computed in the graph "
                "are lowered to real pairs"
            )
    pairs: dict[Node, Node] = {}
    lowered: list[Node] = []
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if not (is_complex(node) or any(is_complex(a) for a in node.all_input_nodes)):
            continue
        with graph.inserting_before(node):
            pair = _lower(_Emitter(graph, pairs), node)
        if pair is None:
            pass  # an assertion on the complex value: dropped
        elif is_complex(node):
            pairs[node] = pair
        else:
            node.replace_all_uses_with(pair)
        lowered.append(node)
    for node in reversed(lowered):
        if not node.users:
            graph.erase_node(node)
    if lowered:
        exported.graph_module.recompile()
    return len(lowered)


class _Emitter:
    """New ATen nodes with their `val` metadata (computed on the meta device)."""

    def __init__(self, graph: Graph, pairs: dict[Node, Node]):
        self.graph = graph
        self.pairs = pairs

    def pair(self, value: Any) -> Any:
        """The real pair standing for a complex node (any other value as it is)."""
        return self.pairs[value] if isinstance(value, Node) and value in self.pairs else value

    def __call__(self, target: Any, *args: Any, **kwargs: Any) -> Node:
        node = self.graph.call_function(target, args, kwargs)
        meta_args = torch.utils._pytree.tree_map(_meta, (args, kwargs))
        node.meta["val"] = target(*meta_args[0], **meta_args[1])
        return node

    def part(self, pair: Node, index: int) -> Node:
        return self(aten.select.int, pair, -1, index)

    def join(self, real: Node, imaginary: Node) -> Node:
        return self(aten.stack.default, [real, imaginary], -1)


def _meta(value: Any) -> Any:
    if not isinstance(value, Node):
        return value
    val = value.meta["val"]
    if not isinstance(val, torch.Tensor):
        return val
    return torch.empty(val.shape, dtype=val.dtype, device="meta")


def _lower(emit: _Emitter, node: Node) -> Node | None:
    rule = RULES.get(node.target)
    if rule is None:
        raise ForgeError(
            f"unsupported: complex values through {node.target} ('{node.name}'): only "
            "rotary-style complex products are lowered to real pairs"
        )
    return rule(emit, node)


def _dim(dim: int) -> int:
    """A dim of a complex value, on its pair (the trailing pair dim stays last)."""
    return dim if dim >= 0 else dim - 1


def _polar(emit: _Emitter, node: Node) -> Node:
    radius, angle = node.args[:2]
    real = emit(aten.mul.Tensor, radius, emit(aten.cos.default, angle))
    imaginary = emit(aten.mul.Tensor, radius, emit(aten.sin.default, angle))
    return emit.join(real, imaginary)


def _mul(emit: _Emitter, node: Node) -> Node:
    a, b = node.args[:2]
    if is_complex(a) and is_complex(b):
        pa, pb = emit.pair(a), emit.pair(b)
        ar, ai, br, bi = emit.part(pa, 0), emit.part(pa, 1), emit.part(pb, 0), emit.part(pb, 1)
        real = emit(aten.sub.Tensor, emit(aten.mul.Tensor, ar, br), emit(aten.mul.Tensor, ai, bi))
        imaginary = emit(
            aten.add.Tensor, emit(aten.mul.Tensor, ar, bi), emit(aten.mul.Tensor, ai, br)
        )
        return emit.join(real, imaginary)
    pair, other = (emit.pair(a), b) if is_complex(a) else (emit.pair(b), a)
    if isinstance(other, complex):
        raise ForgeError(f"unsupported: a complex constant factor in '{node.name}'")
    if isinstance(other, Node):
        other = emit(aten.unsqueeze.default, other, -1)
    return emit(aten.mul.Tensor, pair, other)


def _elementwise(emit: _Emitter, node: Node) -> Node:
    a, b = node.args[:2]
    if not (is_complex(a) and is_complex(b)):
        raise ForgeError(f"unsupported: a complex and a real value added in '{node.name}'")
    return emit(node.target, emit.pair(a), emit.pair(b), **node.kwargs)


def _view_as_complex(emit: _Emitter, node: Node) -> Node:
    return node.args[0]


def _view_as_real(emit: _Emitter, node: Node) -> Node:
    return emit.pair(node.args[0])


def _unsqueeze(emit: _Emitter, node: Node) -> Node:
    value, dim = node.args[:2]
    rank = value.meta["val"].dim()
    return emit(aten.unsqueeze.default, emit.pair(value), dim if dim >= 0 else dim + rank + 1)


def _reshape(emit: _Emitter, node: Node) -> Node:
    value, shape = node.args[:2]
    return emit(node.target, emit.pair(value), [*shape, 2])


def _copy(emit: _Emitter, node: Node) -> Node:
    value = emit.pair(node.args[0])
    dtypes = [a for a in node.args[1:] if isinstance(a, torch.dtype)]
    dtype = node.kwargs.get("dtype", dtypes[0] if dtypes else None)
    if dtype is None or not dtype.is_complex:
        return emit(aten.clone.default, value)
    return emit(aten._to_copy.default, value, dtype=REAL_OF[dtype])


def _transpose(emit: _Emitter, node: Node) -> Node:
    value, first, second = node.args[:3]
    return emit(aten.transpose.int, emit.pair(value), _dim(first), _dim(second))


def _slice(emit: _Emitter, node: Node) -> Node:
    value, dim, *rest = node.args
    return emit(aten.slice.Tensor, emit.pair(value), _dim(dim), *rest)


def _drop(emit: _Emitter, node: Node) -> None:
    return None


RULES: dict[Any, Callable[[_Emitter, Node], Node | None]] = {
    aten._assert_tensor_metadata.default: _drop,
    aten.polar.default: _polar,
    aten.mul.Tensor: _mul,
    aten.add.Tensor: _elementwise,
    aten.sub.Tensor: _elementwise,
    aten.view_as_complex.default: _view_as_complex,
    aten.view_as_real.default: _view_as_real,
    aten.unsqueeze.default: _unsqueeze,
    aten.view.default: _reshape,
    aten.reshape.default: _reshape,
    aten._unsafe_view.default: _reshape,
    aten.clone.default: _copy,
    aten._to_copy.default: _copy,
    aten.to.dtype: _copy,
    aten.to.dtype_layout: _copy,
    aten.to.device: _copy,
    aten.transpose.int: _transpose,
    aten.slice.Tensor: _slice,
}
"""ATen op with a complex operand or result -> its rewrite on real pairs."""
