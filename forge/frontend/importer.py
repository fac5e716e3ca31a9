"""Phase 1: import an `ExportedProgram` into one `func.func` of the `npu` dialect.

IR is built directly with xDSL's Python API (no text round trip). Each FX node
becomes a named `npu` op where one exists and an `npu.generic` op otherwise, so
import never fails on an unknown ATen op; every fallback is recorded in `notes`.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx import Node
from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    Attribute,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    f64,
    i1,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue

from forge.dialects import contract, npu
from forge.dialects.dtypes import DTYPES
from forge.frontend.capture import Captured
from forge.support.collector import collector_paused
from forge.support.diagnostics import ForgeError

aten = torch.ops.aten


def valid_name(name: str) -> str:
    """`name` as an SSA name xDSL accepts ([A-Za-z0-9_$.-], not starting with a digit):
    state-dict keys of Dynamo graphs look like `L['self'].h.0.attn.lifted_tensor_0`, and
    a trailing `_0` would be dropped from the printed name."""
    name = re.sub(r"[^A-Za-z0-9_$.-]", "_", name)
    name = re.sub(r"_(\d+)$", r".\1", name)  # xDSL drops a `_N` suffix from SSA names
    return f"_{name}" if name[:1].isdigit() else name


class UnsupportedGraph(ForgeError):
    """A graph the importer cannot represent at all (not: an unknown op)."""


@dataclass
class ImportedProgram:
    module: ModuleOp
    function: func.FuncOp
    input_names: list[str]
    """User inputs, in function-argument order (they come first)."""
    weight_names: list[str]
    """Canonical weight names, in function-argument order after the inputs."""
    weights: dict[str, torch.Tensor]
    notes: list[str] = field(default_factory=list)
    import_seconds: float = 0.0

    def op_count(self) -> int:
        return sum(1 for _ in self.function.body.walk()) - 1  # not counting func.return


def element_type(dtype: torch.dtype) -> Attribute:
    if dtype not in DTYPES:
        raise UnsupportedGraph(f"unsupported tensor dtype {dtype}")
    return DTYPES[dtype]


def tensor_type(value: Any) -> TensorType:
    shape = tuple(d if isinstance(d, int) else DYNAMIC_INDEX for d in value.shape)
    return _tensor_type(value.dtype, shape)


@functools.lru_cache(maxsize=4096)
def _tensor_type(dtype: torch.dtype, shape: tuple[int, ...]) -> TensorType:
    """One attribute per (dtype, shape): attributes are immutable values, and building and
    verifying a TensorType was a third of the import's time (most ops share a few types)."""
    return TensorType(element_type(dtype), shape)


def is_tensor_node(arg: Any) -> bool:
    return isinstance(arg, Node) and isinstance(arg.meta.get("val"), torch.Tensor)


def scalar_attr(value: Any) -> Attribute:
    if isinstance(value, bool):
        return IntegerAttr(int(value), i1)
    if isinstance(value, int):
        return i64_attr(value)
    return FloatAttr(float(value), f64)


def i64_attr(value: int) -> IntegerAttr:
    """`IntegerAttr(value, i64)`, one attribute per value (dims and indices repeat)."""
    return _i64_attr(type(value), value)


@functools.lru_cache(maxsize=4096)
def _i64_attr(kind: type, value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)  # `kind` keeps True and 1 apart


def i64s(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


Converter = Callable[["FxImporter", Node], "Operation | None"]
CONVERTERS: dict[Any, Converter] = {}


def converts(*targets: Any) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for target in targets:
            CONVERTERS[target] = fn
        return fn

    return register


class FxImporter:
    """Walks the FX graph once, building ops at the end of the function body."""

    def __init__(self, captured: Captured):
        self.captured = captured
        self.values: dict[Node, SSAValue | tuple[SSAValue, ...]] = {}
        self.notes: list[str] = []
        self.fallbacks: Counter[str] = Counter()
        self.builder: Builder

    # ------------------------------------------------------------- helpers

    def value(self, node: Any) -> SSAValue:
        found = self.values.get(node)
        if not isinstance(found, SSAValue):
            raise UnsupportedGraph(f"node {node} does not produce a single tensor")
        return found

    def result_type(self, node: Node) -> TensorType:
        return tensor_type(node.meta["val"])

    def arg(self, node: Node, index: int, name: str, default: Any = None) -> Any:
        if len(node.args) > index:
            return node.args[index]
        return node.kwargs.get(name, default)

    def insert(self, op: Operation) -> Operation:
        self.builder.insert(op)
        return op

    # --------------------------------------------------------------- driver

    def run(self) -> ImportedProgram:
        ep = self.captured.exported
        signature = ep.graph_signature
        kinds = {spec.arg.name: spec for spec in signature.input_specs}
        placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]

        inputs: list[Node] = []
        weights: dict[str, list[Node]] = {}
        for node in placeholders:
            spec = kinds[node.name]
            if spec.kind == InputKind.USER_INPUT:
                if is_tensor_node(node):
                    inputs.append(node)
                else:
                    self.notes.append(
                        f"non-tensor input '{node.name}' = {node.meta.get('val')!r} "
                        "was specialized into the graph"
                    )
                continue
            canonical = self.captured.tied_map.get(spec.target, spec.target)
            weights.setdefault(canonical, []).append(node)

        mutated = {
            self.captured.tied_map.get(s.target, s.target)
            for s in signature.output_specs
            if s.kind == OutputKind.BUFFER_MUTATION
        }
        used_weights = {k: v for k, v in weights.items() if k in mutated or any(n.users for n in v)}
        names = {k: valid_name(k) for k in used_weights}
        arg_nodes = inputs + [nodes[0] for nodes in used_weights.values()]
        block = Block(arg_types=[self.result_type(n) for n in arg_nodes])
        for arg, node in zip(block.args, inputs, strict=False):
            arg.name_hint = node.name
        for arg, name in zip(block.args[len(inputs) :], used_weights, strict=True):
            arg.name_hint = names[name]
        for node, arg in zip(inputs, block.args, strict=False):
            self.values[node] = arg
        for nodes, arg in zip(used_weights.values(), block.args[len(inputs) :], strict=True):
            for node in nodes:
                self.values[node] = arg
        if self.captured.stamped:
            self.notes.append(self.captured.stamped)
        tied = [name for name, nodes in weights.items() if len(nodes) > 1]
        if tied:
            self.notes.append(f"tied weights share one argument: {', '.join(tied)}")

        self.builder = Builder(InsertPoint.at_end(block))
        results: list[SSAValue] = []
        for node in ep.graph.nodes:
            if node.op == "call_function":
                self.convert(node)
            elif node.op == "output":
                results, written = self.outputs(node, names)
        self.insert(func.ReturnOp(*results))

        function = func.FuncOp(
            "forward",
            ([a.type for a in block.args], [r.type for r in results]),
            Region(block),
        )
        if written:
            function.attributes[contract.WRITES] = ArrayAttr([StringAttr(n) for n in written])
        for name, count in sorted(self.fallbacks.items()):
            self.notes.append(f"{name}: no named npu op, kept as npu.generic on the CPU (x{count})")
        return ImportedProgram(
            ModuleOp([function]),
            function,
            [n.name for n in inputs],
            [names[name] for name in used_weights],
            {names[name]: self.captured.tensors[name] for name in used_weights},
            self.notes,
        )

    def outputs(self, node: Node, names: dict[str, str]) -> tuple[list[SSAValue], list[str]]:
        """The function's results: the model's outputs, then the new value of every
        buffer or input the graph mutates; and the argument each of those is written to."""
        specs = self.captured.exported.graph_signature.output_specs
        outputs, mutations, written = [], [], []
        for spec, value in zip(specs, node.args[0], strict=True):
            if spec.kind == OutputKind.BUFFER_MUTATION:
                canonical = self.captured.tied_map.get(spec.target, spec.target)
                mutations.append(self.value(value))
                written.append(names.get(canonical, valid_name(canonical)))
            elif spec.kind == OutputKind.USER_INPUT_MUTATION:
                mutations.append(self.value(value))
                written.append(spec.target)
            elif is_tensor_node(value):
                outputs.append(self.value(value))
        return outputs + mutations, written

    def convert(self, node: Node) -> None:
        if node.target is operator.getitem:
            source = self.values[node.args[0]]
            assert isinstance(source, tuple)
            self.values[node] = source[node.args[1]]
            return
        converter = CONVERTERS.get(node.target)
        op = converter(self, node) if converter is not None else None
        if op is None:
            op = self.generic(node)
        self.bind(node, op)

    def bind(self, node: Node, op: Operation) -> None:
        val = node.meta.get("val")
        if isinstance(val, list | tuple):
            self.values[node] = tuple(op.results)
        elif op.results:
            self.values[node] = op.results[0]

    # ------------------------------------------------------------- generic

    def generic(self, node: Node) -> Operation:
        opcode = str(node.target)
        self.fallbacks[opcode] += 1
        operands: list[SSAValue] = []

        def encode(arg: Any) -> Attribute:
            if isinstance(arg, Node):
                if not is_tensor_node(arg):
                    raise UnsupportedGraph(
                        f"{opcode}: symbolic size '{arg}' (a dynamic shape) is not supported "
                        "by the importer yet; capture with static shapes"
                    )
                operands.append(self.value(arg))
                return npu.OperandRefAttr(len(operands) - 1)
            if isinstance(arg, list | tuple):
                return ArrayAttr([encode(a) for a in arg])
            if arg is None:
                return UnitAttr()
            if isinstance(arg, bool | int | float):
                return scalar_attr(arg)
            if isinstance(arg, torch.dtype):
                return element_type(arg)
            if isinstance(arg, str):
                return StringAttr(arg)
            if isinstance(arg, torch.device):
                # Forge IR is device-agnostic: placement decides. A model built on the
                # meta device (for graph-level work) still describes a CPU computation.
                return StringAttr("cpu" if arg.type in ("cpu", "meta") else str(arg))
            if isinstance(arg, torch.layout | torch.memory_format):
                return StringAttr(str(arg).removeprefix("torch."))
            raise UnsupportedGraph(f"{opcode}: cannot encode argument {arg!r}")

        args = [encode(a) for a in node.args]
        kwargs = {k: encode(v) for k, v in node.kwargs.items()}
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            result_types = [tensor_type(val)]
        elif isinstance(val, list | tuple):
            result_types = [tensor_type(v) for v in val]
        else:
            result_types = []
        side_effects = not result_types or "assert" in opcode
        op = npu.GenericOp(opcode, operands, args, result_types, kwargs, side_effects)
        return self.insert(op)


# ----------------------------------------------------------------- converters

UNARY: dict[Any, type[npu.UnaryOp]] = {
    aten.neg.default: npu.NegOp,
    aten.abs.default: npu.AbsOp,
    aten.exp.default: npu.ExpOp,
    aten.log.default: npu.LogOp,
    aten.sqrt.default: npu.SqrtOp,
    aten.rsqrt.default: npu.RsqrtOp,
    aten.reciprocal.default: npu.ReciprocalOp,
    aten.tanh.default: npu.TanhOp,
    aten.sin.default: npu.SinOp,
    aten.cos.default: npu.CosOp,
    aten.erf.default: npu.ErfOp,
    aten.relu.default: npu.ReluOp,
    aten.sigmoid.default: npu.SigmoidOp,
    aten.silu.default: npu.SiluOp,
}


@converts(*UNARY)
def convert_unary(im: FxImporter, node: Node) -> Operation:
    return im.insert(UNARY[node.target](im.value(node.args[0])))


@converts(aten.gelu.default)
def convert_gelu(im: FxImporter, node: Node) -> Operation:
    approximate = node.kwargs.get("approximate", "none")
    props = {} if approximate == "none" else {"approximate": StringAttr(approximate)}
    return im.insert(npu.GeluOp(im.value(node.args[0]), props))


@converts(aten.contiguous.default)
def convert_contiguous(im: FxImporter, node: Node) -> Operation | None:
    fmt = im.arg(node, 1, "memory_format", torch.contiguous_format)
    if fmt != torch.contiguous_format:
        return None
    return im.insert(npu.ContiguousOp(im.value(node.args[0])))


@converts(aten.dropout.default)
def convert_dropout(im: FxImporter, node: Node) -> Operation:
    props: dict[str, Attribute] = {"p": FloatAttr(float(node.args[1]), f64)}
    if im.arg(node, 2, "train", False):
        props["train"] = UnitAttr()
    return im.insert(npu.DropoutOp(im.value(node.args[0]), props))


BINARY: dict[Any, type[npu.BinaryOp]] = {
    aten.add.Tensor: npu.AddOp,
    aten.add.Scalar: npu.AddOp,
    aten.sub.Tensor: npu.SubOp,
    aten.sub.Scalar: npu.SubOp,
    aten.mul.Tensor: npu.MulOp,
    aten.mul.Scalar: npu.MulOp,
    aten.div.Tensor: npu.DivOp,
    aten.div.Scalar: npu.DivOp,
    aten.pow.Tensor_Scalar: npu.PowOp,
    aten.pow.Tensor_Tensor: npu.PowOp,
    aten.maximum.default: npu.MaximumOp,
    aten.minimum.default: npu.MinimumOp,
    aten.eq.Tensor: npu.EqOp,
    aten.eq.Scalar: npu.EqOp,
    aten.ne.Tensor: npu.NeOp,
    aten.ne.Scalar: npu.NeOp,
    aten.lt.Tensor: npu.LtOp,
    aten.lt.Scalar: npu.LtOp,
    aten.le.Tensor: npu.LeOp,
    aten.le.Scalar: npu.LeOp,
    aten.gt.Tensor: npu.GtOp,
    aten.gt.Scalar: npu.GtOp,
    aten.ge.Tensor: npu.GeOp,
    aten.ge.Scalar: npu.GeOp,
    aten.logical_and.default: npu.AndOp,
    aten.__and__.Tensor: npu.AndOp,
    aten.bitwise_and.Tensor: npu.AndOp,
    aten.logical_or.default: npu.OrOp,
    aten.__or__.Tensor: npu.OrOp,
    aten.bitwise_or.Tensor: npu.OrOp,
}


@converts(*BINARY)
def convert_binary(im: FxImporter, node: Node) -> Operation | None:
    op_class = BINARY[node.target]
    lhs, rhs = node.args[0], node.args[1]
    if node.kwargs.get("alpha", 1) != 1 or node.kwargs.get("rounding_mode") is not None:
        return None
    if not is_tensor_node(lhs):
        return None
    if issubclass(op_class, npu.LogicalOp) and not all(
        is_tensor_node(a) and a.meta["val"].dtype == torch.bool for a in (lhs, rhs)
    ):
        return None
    result_type = im.result_type(node)
    if is_tensor_node(rhs):
        op = op_class.create(operands=[im.value(lhs), im.value(rhs)], result_types=[result_type])
    elif isinstance(rhs, int | float) and not isinstance(rhs, bool):
        op = op_class.create(
            operands=[im.value(lhs)],
            result_types=[result_type],
            properties={"scalar": scalar_attr(rhs)},
        )
    else:
        return None
    return im.insert(op)


@converts(aten.where.self, aten.where.ScalarOther)
def convert_where(im: FxImporter, node: Node) -> Operation | None:
    cond, on_true, on_false = node.args[:3]
    if not (is_tensor_node(cond) and is_tensor_node(on_true)):
        return None
    operands = [im.value(cond), im.value(on_true)]
    props: dict[str, Attribute] = {}
    if is_tensor_node(on_false):
        operands.append(im.value(on_false))
    elif isinstance(on_false, int | float) and not isinstance(on_false, bool):
        props["scalar"] = scalar_attr(on_false)
    else:
        return None
    return im.insert(
        npu.WhereOp.create(operands=operands, result_types=[im.result_type(node)], properties=props)
    )


@converts(aten.to.dtype, aten.to.dtype_layout, aten.to.device, aten._to_copy.default)
def convert_cast(im: FxImporter, node: Node) -> Operation | None:
    layout = node.kwargs.get("layout", torch.strided)
    device = node.kwargs.get("device", torch.device("cpu"))
    if node.target is aten.to.device:
        device = node.args[1]
    if layout not in (None, torch.strided) or torch.device(device or "cpu").type != "cpu":
        return None
    if node.kwargs.get("memory_format") not in (None, torch.preserve_format):
        return None
    return im.insert(
        npu.CastOp.create(operands=[im.value(node.args[0])], result_types=[im.result_type(node)])
    )


@converts(aten.matmul.default, aten.bmm.default, aten.mm.default)
def convert_matmul(im: FxImporter, node: Node) -> Operation | None:
    lhs, rhs = node.args[:2]
    if lhs.meta["val"].dim() < 2 or rhs.meta["val"].dim() < 2:
        return None
    return im.insert(
        npu.MatmulOp.create(
            operands=[im.value(lhs), im.value(rhs)], result_types=[im.result_type(node)]
        )
    )


@converts(aten.linear.default)
def convert_linear(im: FxImporter, node: Node) -> Operation:
    bias = im.arg(node, 2, "bias")
    operands = [im.value(node.args[0]), im.value(node.args[1])]
    if bias is not None:
        operands.append(im.value(bias))
    return im.insert(npu.LinearOp.create(operands=operands, result_types=[im.result_type(node)]))


@converts(aten.addmm.default)
def convert_addmm(im: FxImporter, node: Node) -> Operation | None:
    if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
        return None
    operands = [im.value(a) for a in node.args[:3]]
    return im.insert(npu.AddmmOp.create(operands=operands, result_types=[im.result_type(node)]))


@converts(aten.scaled_dot_product_attention.default)
def convert_sdpa(im: FxImporter, node: Node) -> Operation | None:
    q, k, v = node.args[:3]
    mask = im.arg(node, 3, "attn_mask")
    if im.arg(node, 4, "dropout_p", 0.0) != 0.0:
        return None
    operands = [im.value(q), im.value(k), im.value(v)]
    if mask is not None:
        operands.append(im.value(mask))
    props: dict[str, Attribute] = {}
    if im.arg(node, 5, "is_causal", False):
        props["is_causal"] = UnitAttr()
    if (scale := node.kwargs.get("scale")) is not None:
        props["scale"] = FloatAttr(float(scale), f64)
    return im.insert(
        npu.SDPAOp.create(operands=operands, result_types=[im.result_type(node)], properties=props)
    )


@converts(aten.softmax.int, aten._softmax.default)
def convert_softmax(im: FxImporter, node: Node) -> Operation | None:
    dtype = im.arg(node, 2, "dtype") if node.target is aten.softmax.int else None
    if dtype is not None and dtype != node.args[0].meta["val"].dtype:
        return None
    if node.target is aten._softmax.default and node.args[2]:
        return None
    return im.insert(
        npu.SoftmaxOp.create(
            operands=[im.value(node.args[0])],
            result_types=[im.result_type(node)],
            properties={"dim": i64_attr(node.args[1])},
        )
    )


@converts(aten.layer_norm.default)
def convert_layer_norm(im: FxImporter, node: Node) -> Operation:
    weight, bias = im.arg(node, 2, "weight"), im.arg(node, 3, "bias")
    op = npu.LayerNormOp.create(
        operands=[
            im.value(node.args[0]),
            *([im.value(weight)] if weight is not None else []),
            *([im.value(bias)] if bias is not None else []),
        ],
        result_types=[im.result_type(node)],
        properties={
            "normalized_shape": i64s(node.args[1]),
            "eps": FloatAttr(float(im.arg(node, 4, "eps", 1e-5)), f64),
            "operandSegmentSizes": DenseArrayBase.from_list(
                IntegerType(32), [1, int(weight is not None), int(bias is not None)]
            ),
        },
    )
    return im.insert(op)


@converts(aten.rms_norm.default)
def convert_rms_norm(im: FxImporter, node: Node) -> Operation:
    x = node.args[0]
    weight = im.arg(node, 2, "weight")
    eps = im.arg(node, 3, "eps")
    if eps is None:
        eps = torch.finfo(x.meta["val"].dtype).eps
    op = npu.RMSNormOp.create(
        operands=[im.value(x), *([im.value(weight)] if weight is not None else [])],
        result_types=[im.result_type(node)],
        properties={"normalized_shape": i64s(node.args[1]), "eps": FloatAttr(float(eps), f64)},
    )
    return im.insert(op)


@converts(aten.mean.dim, aten.sum.dim_IntList)
def convert_reduce(im: FxImporter, node: Node) -> Operation | None:
    if im.arg(node, 3, "dtype") is not None:
        return None
    op_class = npu.MeanOp if node.target is aten.mean.dim else npu.SumOp
    dims = im.arg(node, 1, "dim") or []
    props: dict[str, Attribute] = {"dims": i64s(dims)}
    if im.arg(node, 2, "keepdim", False):
        props["keepdim"] = UnitAttr()
    return im.insert(
        op_class.create(
            operands=[im.value(node.args[0])],
            result_types=[im.result_type(node)],
            properties=props,
        )
    )


@converts(aten.embedding.default)
def convert_embedding(im: FxImporter, node: Node) -> Operation:
    return im.insert(
        npu.EmbeddingOp.create(
            operands=[im.value(node.args[0]), im.value(node.args[1])],
            result_types=[im.result_type(node)],
        )
    )


@converts(aten.index.Tensor)
def convert_index(im: FxImporter, node: Node) -> Operation | None:
    """`x[:, ..., idx]` with one 1-D index tensor after leading unit dims (transformers'
    `hidden[:, logits_to_keep]`, a prefill keeping one row): a row gather, i.e. a view
    to [rows, features], `npu.embedding` and a view back, so that the gather stays in the
    graph. Anything else stays generic (on the CPU)."""
    source, indices = node.args[0], node.args[1]
    x = tuple(source.meta["val"].shape) if is_tensor_node(source) else ()
    given = [i for i, index in enumerate(indices) if index is not None]
    if len(given) != 1 or not all(isinstance(d, int) for d in x):
        return None
    dim, index = given[0], indices[given[0]]
    shape = tuple(index.meta["val"].shape) if is_tensor_node(index) else ()
    if len(shape) != 1 or any(d != 1 for d in x[:dim]) or dim >= len(x):
        return None
    if index.meta["val"].dtype not in (torch.int64, torch.int32):
        return None
    result = im.result_type(node)
    element = result.element_type
    features = math.prod(x[dim + 1 :])
    table = im.insert(
        npu.ViewOp.create(
            operands=[im.value(source)], result_types=[TensorType(element, [x[dim], features])]
        )
    ).results[0]
    rows = im.insert(
        npu.EmbeddingOp.create(
            operands=[table, im.value(index)],
            result_types=[TensorType(element, [shape[0], features])],
        )
    ).results[0]
    return im.insert(npu.ViewOp.create(operands=[rows], result_types=[result]))


def _shape_op(
    op_class: type[npu.ShapeOp], props: Callable[[Node], dict[str, Attribute]] | None = None
) -> Converter:
    def convert(im: FxImporter, node: Node) -> Operation:
        return im.insert(
            op_class.create(
                operands=[im.value(node.args[0])],
                result_types=[im.result_type(node)],
                properties=props(node) if props else {},
            )
        )

    return convert


def _int_prop(**positions: int) -> Callable[[Node], dict[str, Attribute]]:
    return lambda node: {k: i64_attr(node.args[i]) for k, i in positions.items()}


converts(aten.view.default, aten._unsafe_view.default)(_shape_op(npu.ViewOp))
converts(aten.reshape.default)(_shape_op(npu.ReshapeOp))
converts(aten.expand.default)(_shape_op(npu.ExpandOp))
converts(aten.transpose.int)(_shape_op(npu.TransposeOp, _int_prop(dim0=1, dim1=2)))
converts(aten.unsqueeze.default)(_shape_op(npu.UnsqueezeOp, _int_prop(dim=1)))
converts(aten.squeeze.dim)(_shape_op(npu.SqueezeOp, _int_prop(dim=1)))
converts(aten.permute.default)(_shape_op(npu.PermuteOp, lambda n: {"dims": i64s(n.args[1])}))


@converts(aten.slice.Tensor)
def convert_slice(im: FxImporter, node: Node) -> Operation | None:
    dim = im.arg(node, 1, "dim", 0)
    start = im.arg(node, 2, "start", 0)
    end = im.arg(node, 3, "end", 2**63 - 1)
    step = im.arg(node, 4, "step", 1)
    values = (dim, start if start is not None else 0, end if end is not None else 2**63 - 1, step)
    if not all(isinstance(v, int) for v in values):
        return None
    props = dict(zip(("dim", "start", "end", "step"), values, strict=True))
    return _shape_op(npu.SliceOp, lambda _: {k: i64_attr(v) for k, v in props.items()})(im, node)


@converts(aten.cat.default)
def convert_cat(im: FxImporter, node: Node) -> Operation | None:
    rank = node.meta["val"].dim()
    # torch.cat skips 1-D empty tensors whatever the rank of the others (a legacy rule
    # that KV-cache code relies on); the npu op requires equal ranks, so drop them here.
    tensors = [t for t in node.args[0] if rank == 1 or tuple(t.meta["val"].shape) != (0,)]
    if not tensors or rank == 0:
        return None
    return im.insert(
        npu.CatOp.create(
            operands=[im.value(t) for t in tensors],
            result_types=[im.result_type(node)],
            properties={"dim": i64_attr(im.arg(node, 1, "dim", 0))},
        )
    )


@converts(aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default)
def convert_split(im: FxImporter, node: Node) -> Operation | None:
    pieces = node.meta["val"]
    dim = im.arg(node, 2, "dim", 0)
    rank = node.args[0].meta["val"].dim()
    sizes = [p.shape[dim % rank] for p in pieces]
    if not all(isinstance(s, int) for s in sizes):
        return None
    return im.insert(
        npu.SplitOp.create(
            operands=[im.value(node.args[0])],
            result_types=[tensor_type(p) for p in pieces],
            properties={"dim": i64_attr(dim), "split_sizes": i64s(sizes)},
        )
    )


def import_program(captured: Captured) -> ImportedProgram:
    """Build the `npu` module of a captured program (see module docstring).

    The collector is paused, as for `plan()`: right after torch.export the process
    holds the model's and the exporter's objects (`forge.support.collector`)."""
    import time

    start = time.perf_counter()
    with collector_paused():
        program = FxImporter(captured).run()
    program.import_seconds = time.perf_counter() - start
    return program


__all__ = ["ImportedProgram", "UnsupportedGraph", "import_program"]
