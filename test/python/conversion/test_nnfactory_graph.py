"""NNFactory segment lowering: every op against the CPU reference, the graph cache, and
whole tiny models run as NPU segments interleaved with CPU kernels.

With no NPU here, NNFactory compiles for OpenVINO's CPU plugin: the numbers are real.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest
import torch
from conftest import load_tiny
from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from forge.conversion.graph_call import quantize_int8
from forge.conversion.kernel_choice import BuildOptions, linear_kernel
from forge.conversion.nnfactory_graph import (
    STATS,
    NoNpuLowering,
    Segment,
    build_segment,
    segment_boundary,
)
from forge.devtools.numerics import compare
from forge.dialects.context import entry_function, parse_module
from forge.runtime.reference import ReferenceExecutor
from forge.support.diagnostics import ForgeError
from forge.target.cpu_kernels import cpu_kernel, torch_dtype
from forge.transforms.forge_pipeline import plan
from forge.transforms.npu_assign_precision import record_precision

FP32_ABS = 1e-4
FP16_REL = 2e-2


def body_ops(function: func.FuncOp) -> list[Operation]:
    return [op for op in function.body.block.ops if not isinstance(op, func.ReturnOp)]


def random_inputs(
    function: func.FuncOp, seed: int, positive: bool, high: int
) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for arg in function.body.block.args:
        shape, dtype = arg.type.get_shape(), torch_dtype(arg.type.get_element_type())
        if dtype.is_floating_point:
            t = torch.randn(shape, generator=generator)
            tensors.append((t.abs() + 0.5 if positive else t).to(dtype))
        else:
            tensors.append(torch.randint(0, high, shape, generator=generator, dtype=dtype))
    return tensors


def lower_and_compare(
    text: str, precision: str = "fp32", positive: bool = False, high: int = 8
) -> tuple[float, Segment]:
    """Lower the function body as one segment; return its worst error against the CPU
    reference (absolute for fp32, relative to the output's magnitude for fp16)."""
    function = entry_function(parse_module(text))
    record_precision(function, precision)  # the IR states it, as after the pipeline
    segment = build_segment(body_ops(function))
    tensors = random_inputs(function, 0, positive, high)
    by_arg = dict(zip(function.body.block.args, tensors, strict=True))
    expected = ReferenceExecutor(function, {}, len(tensors))(*tensors)
    actual = dict(zip(segment.outputs, segment(*[by_arg[v] for v in segment.inputs]), strict=True))
    returned = function.body.block.last_op.operands
    worst = 0.0
    for value, e in zip(returned, expected, strict=True):
        a = actual[value]
        assert a.dtype == e.dtype and a.shape == e.shape
        error = float((a.double() - e.double()).abs().max())
        if precision == "fp16":
            error /= max(1.0, float(e.double().abs().max()))
        worst = max(worst, error)
    return worst, segment


def fn(args: str, results: str, body: str) -> str:
    return f"func.func @f({args}) -> ({results}) {{\n{body}\n}}"


def T(shape: str, element: str = "f32") -> str:
    return f"tensor<{shape}x{element}>" if shape else f"tensor<{element}>"


def unary(name: str, attrs: str = "") -> str:
    t = T("2x3x8")
    return fn(f"%x: {t}", t, f"%0 = npu.{name} %x {attrs} : {t}\nfunc.return %0 : {t}")


def binary(name: str, rhs_shape: str = "3x8", scalar: str | None = None) -> str:
    t, r = T("2x3x8"), T(rhs_shape)
    if scalar is not None:
        line = f"%0 = npu.{name} %x {{scalar = {scalar}}} : ({t}) -> {t}"
        return fn(f"%x: {t}", t, f"{line}\nfunc.return %0 : {t}")
    line = f"%0 = npu.{name} %x, %y : ({t}, {r}) -> {t}"
    return fn(f"%x: {t}, %y: {r}", t, f"{line}\nfunc.return %0 : {t}")


def fused(activation: str, in_out: bool) -> str:
    x, w, b, y = T("2x5x16"), T("16x12" if in_out else "12x16"), T("12"), T("2x5x12")
    flag = ", weight_in_out" if in_out else ""
    return fn(
        f"%x: {x}, %w: {w}, %b: {b}",
        y,
        f'%0 = npu.fused_linear %x, %w, %b {{activation = "{activation}"{flag}}} '
        f": ({x}, {w}, {b}) -> {y}\nfunc.return %0 : {y}",
    )


def sdpa(hq: int, hk: int, attrs: str = "", mask: str | None = None) -> str:
    q, kv, out = T(f"2x{hq}x6x8"), T(f"2x{hk}x7x8"), T(f"2x{hq}x6x8")
    operands, types, args = "%q, %k, %v", f"{q}, {kv}, {kv}", f"%q: {q}, %k: {kv}, %v: {kv}"
    if mask is not None:
        operands, types, args = f"{operands}, %m", f"{types}, {T(mask)}", f"{args}, %m: {T(mask)}"
    line = f"%0 = npu.sdpa {operands} {attrs} : ({types}) -> {out}"
    return fn(args, out, f"{line}\nfunc.return %0 : {out}")


def sdpa_row(hq: int, hk: int, value_select: bool = True, attrs: str = "") -> str:
    """Attention over keys (and values) given as `cache * keep + row * at`, the form
    npu-attend-before-write gives a decode step's: the lowering folds the row in
    (conversion/attention.py). Random `keep`/`at`: the fold holds for any columns."""
    q, cache, row, column = T(f"2x{hq}x1x8"), T(f"2x{hk}x7x8"), T(f"2x{hk}x1x8"), T("7x1")
    args = f"%q: {q}, %kc: {cache}, %kr: {row}, %vc: {cache}, %vr: {row}, %keep: {column}"
    args += f", %at: {column}, %m: {T('1x1x1x7')}"
    lines = []
    for x in ("k", "v") if value_select else ("k",):
        lines += [
            f"%{x}0 = npu.mul %{x}c, %keep : ({cache}, {column}) -> {cache}",
            f"%{x}1 = npu.mul %{x}r, %at : ({row}, {column}) -> {cache}",
            f"%{x} = npu.add %{x}0, %{x}1 : ({cache}, {cache}) -> {cache}",
        ]
    value = "%v" if value_select else "%vc"
    out = q
    lines.append(
        f"%0 = npu.sdpa %q, %k, {value}, %m {attrs} : ({q}, {cache}, {cache}, {T('1x1x1x7')})"
        f" -> {out}"
    )
    return fn(args, out, "\n".join(lines) + f"\nfunc.return %0 : {out}")


def shape_op(name: str, src: str, dst: str, attrs: str = "") -> str:
    s, d = T(src), T(dst)
    return fn(f"%x: {s}", d, f"%0 = npu.{name} %x {attrs} : {s} -> {d}\nfunc.return %0 : {d}")


LN = "{normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64}"
X, W8 = T("2x3x8"), T("8")

CASES: dict[str, tuple[str, dict]] = {
    # elementwise, native nodes
    **{name: (unary(name), {}) for name in ["neg", "abs", "exp", "tanh", "sin", "cos", "erf"]},
    **{name: (unary(name), {}) for name in ["relu", "sigmoid", "silu"]},
    **{name: (unary(name), {"positive": True}) for name in ["log", "sqrt"]},
    "gelu": (unary("gelu"), {}),
    "gelu_tanh": (unary("gelu", '{approximate = "tanh"}'), {}),
    # elementwise, composed
    "rsqrt": (unary("rsqrt"), {"positive": True}),
    "reciprocal": (unary("reciprocal"), {"positive": True}),
    "add": (binary("add"), {}),
    "sub": (binary("sub", "2x1x8"), {}),
    "mul": (binary("mul", "8"), {}),
    "div": (binary("div"), {"positive": True}),
    "pow": (binary("pow"), {"positive": True}),
    "maximum": (binary("maximum"), {}),
    "minimum": (binary("minimum", "1x8"), {}),
    "add_scalar": (binary("add", scalar="1.5 : f64"), {}),
    "mul_scalar": (binary("mul", scalar="-2 : i64"), {}),
    "div_scalar": (binary("div", scalar="4.0 : f64"), {}),
    "pow_scalar_negative_base": (binary("pow", scalar="2.0 : f64"), {}),
    "pow_cube": (binary("pow", scalar="3.0 : f64"), {}),
    # contractions
    "matmul": (
        fn(
            f"%a: {T('2x3x4')}, %b: {T('4x5')}",
            T("2x3x5"),
            f"%0 = npu.matmul %a, %b : ({T('2x3x4')}, {T('4x5')}) -> {T('2x3x5')}\n"
            f"func.return %0 : {T('2x3x5')}",
        ),
        {},
    ),
    "matmul_transposed_b": (
        fn(
            f"%a: {T('2x3x4')}, %b: {T('2x5x4')}",
            T("2x3x5"),
            f"%t = npu.transpose %b {{dim0 = -1 : i64, dim1 = -2 : i64}} : {T('2x5x4')} -> "
            f"{T('2x4x5')}\n"
            f"%0 = npu.matmul %a, %t : ({T('2x3x4')}, {T('2x4x5')}) -> {T('2x3x5')}\n"
            f"func.return %0 : {T('2x3x5')}",
        ),
        {},
    ),
    "linear": (
        fn(
            f"%x: {T('3x16')}, %w: {T('6x16')}, %b: {T('6')}",
            T("3x6"),
            f"%0 = npu.linear %x, %w, %b : ({T('3x16')}, {T('6x16')}, {T('6')}) -> {T('3x6')}\n"
            f"func.return %0 : {T('3x6')}",
        ),
        {},
    ),
    "linear_no_bias": (
        fn(
            f"%x: {T('2x3x16')}, %w: {T('6x16')}",
            T("2x3x6"),
            f"%0 = npu.linear %x, %w : ({T('2x3x16')}, {T('6x16')}) -> {T('2x3x6')}\n"
            f"func.return %0 : {T('2x3x6')}",
        ),
        {},
    ),
    "addmm": (
        fn(
            f"%b: {T('6')}, %x: {T('3x16')}, %w: {T('16x6')}",
            T("3x6"),
            f"%0 = npu.addmm %b, %x, %w : ({T('6')}, {T('3x16')}, {T('16x6')}) -> {T('3x6')}\n"
            f"func.return %0 : {T('3x6')}",
        ),
        {},
    ),
    **{
        f"fused_linear_{act}{'_in_out' if in_out else ''}": (fused(act, in_out), {})
        for act in ["none", "relu", "gelu", "gelu_tanh", "silu", "sigmoid"]
        for in_out in (False, True)
    },
    # attention
    "sdpa": (sdpa(4, 4), {}),
    "sdpa_scale_mask": (sdpa(4, 4, "{scale = 3.000000e-01 : f64}", "2x1x6x7"), {}),
    "sdpa_causal": (sdpa(4, 4, "{is_causal}"), {}),
    "sdpa_gqa": (sdpa(4, 2), {}),
    "sdpa_gqa_scale_mask": (sdpa(6, 2, "{scale = 2.000000e-01 : f64}", "1x1x6x7"), {}),
    "sdpa_gqa_head_mask_causal": (sdpa(4, 2, "{is_causal}", "2x4x6x7"), {}),
    "sdpa_row": (sdpa_row(4, 4, attrs="{scale = 3.000000e-01 : f64}"), {}),
    "sdpa_row_gqa": (sdpa_row(6, 2), {}),
    "sdpa_row_keys_only": (sdpa_row(4, 2, value_select=False), {}),
    # normalization and reductions
    "softmax": (
        fn(f"%x: {X}", X, f"%0 = npu.softmax %x {{dim = 1 : i64}} : {X}\nfunc.return %0 : {X}"),
        {},
    ),
    "layer_norm": (
        fn(
            f"%x: {X}, %w: {W8}, %b: {W8}",
            X,
            f"%0 = npu.layer_norm %x weight %w : {W8} bias %b : {W8} {LN} : {X} -> {X}\n"
            f"func.return %0 : {X}",
        ),
        {},
    ),
    "layer_norm_2d_no_affine": (
        fn(
            f"%x: {X}",
            X,
            "%0 = npu.layer_norm %x {normalized_shape = array<i64: 3, 8>, eps = 1.0e-05 : f64}"
            f" : {X} -> {X}\nfunc.return %0 : {X}",
        ),
        {},
    ),
    "rms_norm": (
        fn(
            f"%x: {X}, %w: {W8}",
            X,
            "%0 = npu.rms_norm %x weight %w : "
            f"{W8} {{normalized_shape = array<i64: 8>, eps = 1.0e-06 : f64}} : {X} -> {X}\n"
            f"func.return %0 : {X}",
        ),
        {},
    ),
    "mean_keepdim": (shape_op("mean", "2x3x8", "2x3x1", "{dims = array<i64: -1>, keepdim}"), {}),
    "mean_dims": (shape_op("mean", "2x3x8", "3", "{dims = array<i64: 0, 2>}"), {}),
    "sum_all": (shape_op("sum", "2x3x8", "", "{dims = array<i64>}"), {}),
    # data movement
    "view": (shape_op("view", "2x3x8", "6x2x4"), {}),
    "reshape": (shape_op("reshape", "2x3x8", "48"), {}),
    "transpose": (shape_op("transpose", "2x3x8", "8x3x2", "{dim0 = 0 : i64, dim1 = -1 : i64}"), {}),
    "permute": (shape_op("permute", "2x3x8", "8x2x3", "{dims = array<i64: 2, 0, 1>}"), {}),
    "unsqueeze": (shape_op("unsqueeze", "2x3x8", "2x3x1x8", "{dim = -2 : i64}"), {}),
    "squeeze": (shape_op("squeeze", "2x1x8", "2x8", "{dim = 1 : i64}"), {}),
    "slice": (
        shape_op(
            "slice",
            "2x7x8",
            "2x3x8",
            "{dim = 1 : i64, start = 1 : i64, end = 9223372036854775807 : i64, step = 2 : i64}",
        ),
        {},
    ),
    "slice_negative": (
        shape_op(
            "slice",
            "2x7x8",
            "2x7x3",
            "{dim = -1 : i64, start = -5 : i64, end = -2 : i64, step = 1 : i64}",
        ),
        {},
    ),
    "slice_to_the_end": (
        shape_op(
            "slice",
            "2x7x8",
            "2x7x5",
            "{dim = 2 : i64, start = 3 : i64, end = 9223372036854775807 : i64, step = 1 : i64}",
        ),
        {},
    ),
    "slice_first_dim": (
        shape_op(
            "slice",
            "4x7x8",
            "2x7x8",
            "{dim = 0 : i64, start = 1 : i64, end = 3 : i64, step = 1 : i64}",
        ),
        {},
    ),
    "expand": (shape_op("expand", "3x1", "2x3x4"), {}),
    "contiguous": (
        fn(
            f"%x: {X}",
            X,
            f"%t = npu.exp %x : {X}\n%0 = npu.contiguous %t : {X}\nfunc.return %0 : {X}",
        ),
        {},
    ),
    "dropout_eval": (unary("dropout", "{p = 1.000000e-01 : f64}"), {}),
    "cat": (
        fn(
            f"%a: {T('2x3')}, %b: {T('2x1')}, %c: {T('2x4')}",
            T("2x8"),
            f"%0 = npu.cat %a, %b, %c, %a {{dim = -1 : i64}} : "
            f"({T('2x3')}, {T('2x1')}, {T('2x4')}, {T('2x3')}) -> {T('2x11')}\n"
            "%1 = npu.slice %0 {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 1 : i64}"
            f" : {T('2x11')} -> {T('2x8')}\n"
            f"func.return %1 : {T('2x8')}",
        ),
        {},
    ),
    "split": (
        fn(
            f"%x: {T('3x6')}",
            f"{T('3x2')}, {T('3x4')}",
            "%0, %1 = npu.split %x {dim = 1 : i64, split_sizes = array<i64: 2, 4>} : "
            f"{T('3x6')} -> {T('3x2')}, {T('3x4')}\n"
            f"func.return %0, %1 : {T('3x2')}, {T('3x4')}",
        ),
        {},
    ),
    # constants, casts, gathers
    "constant": (
        fn(
            f"%x: {T('2x3')}",
            T("2x3"),
            f"%c = npu.constant dense<[1.5, -2.0, 3.25]> : {T('3')}\n"
            f"%s = npu.constant dense<2.0> : {T('2x3')}\n"
            f"%0 = npu.add %x, %c : ({T('2x3')}, {T('3')}) -> {T('2x3')}\n"
            f"%1 = npu.mul %0, %s : ({T('2x3')}, {T('2x3')}) -> {T('2x3')}\n"
            f"func.return %1 : {T('2x3')}",
        ),
        {},
    ),
    "embedding": (
        fn(
            f"%w: {T('10x4')}, %i: {T('2x3', 'i64')}",
            T("2x3x4"),
            f"%0 = npu.embedding %w, %i : ({T('10x4')}, {T('2x3', 'i64')}) -> {T('2x3x4')}\n"
            f"func.return %0 : {T('2x3x4')}",
        ),
        {"high": 10},
    ),
}

CAST_F16 = fn(
    f"%x: {X}",
    f"{T('2x3x8', 'f16')}, {X}",
    f"%0 = npu.cast %x : {X} -> {T('2x3x8', 'f16')}\n"
    f"%1 = npu.exp %0 : {T('2x3x8', 'f16')}\n"
    f"%2 = npu.cast %1 : {T('2x3x8', 'f16')} -> {X}\n"
    f"func.return %1, %2 : {T('2x3x8', 'f16')}, {X}",
)


@pytest.mark.parametrize("name", list(CASES))
def test_op_fp32(name: str) -> None:
    text, options = CASES[name]
    error, _ = lower_and_compare(text, "fp32", **options)
    print(f"{name} fp32 max-abs {error:.2e}")
    assert error <= FP32_ABS, f"{name}: max abs error {error:.2e}"


FP16_CASES = ["exp", "gelu_tanh", "sub", "pow_scalar_negative_base", "matmul_transposed_b"]
FP16_CASES += ["linear", "fused_linear_silu_in_out", "sdpa_scale_mask", "sdpa_gqa_scale_mask"]
FP16_CASES += ["softmax", "layer_norm", "rms_norm", "mean_dims", "expand", "split", "embedding"]


@pytest.mark.parametrize("name", FP16_CASES)
def test_op_fp16(name: str) -> None:
    text, options = CASES[name]
    error, _ = lower_and_compare(text, "fp16", **options)
    print(f"{name} fp16 max-rel {error:.2e}")
    assert error <= FP16_REL, f"{name}: relative error {error:.2e}"


def test_cast_between_floats_runs_at_graph_precision() -> None:
    """Float casts are the identity inside a graph; the boundary converts to the IR
    types, so an f16 result comes back as float16 and within f16 rounding."""
    error, segment = lower_and_compare(CAST_F16, "fp32")
    assert segment.output_dtypes == [torch.float16, torch.float32]
    assert error <= 2e-2


def test_unlowerable_ops_raise_naming_the_op() -> None:
    t, b = T("2x3"), T("2x3", "i1")
    for text, name in [
        (
            fn(
                f"%x: {t}",
                t,
                f'%0 = npu.generic "aten.cumsum.default"(%x, 1 : i64) : ({t}) -> '
                f"{t}\nfunc.return %0 : {t}",
            ),
            "npu.generic",
        ),
        (
            fn(
                f"%x: {t}, %y: {t}",
                b,
                f"%0 = npu.lt %x, %y : ({t}, {t}) -> {b}\nfunc.return %0 : {b}",
            ),
            "npu.lt",
        ),
        (unary("dropout", "{p = 1.000000e-01 : f64, train}"), "npu.dropout"),
    ]:
        function = entry_function(parse_module(text))
        with pytest.raises(NoNpuLowering, match=name):
            build_segment(body_ops(function))


def test_boundary_inputs_in_first_use_order_and_outputs_used_outside() -> None:
    t = T("2x3")
    text = fn(
        f"%a: {t}, %b: {t}, %c: {t}",
        f"{t}, {t}",
        f"%0 = npu.mul %b, %a : ({t}, {t}) -> {t}\n"
        f"%1 = npu.exp %0 : {t}\n"
        f"%2 = npu.add %1, %c : ({t}, {t}) -> {t}\n"
        f"%3 = npu.neg %2 : {t}\n"
        f"%4 = npu.sub %3, %0 : ({t}, {t}) -> {t}\n"
        f"func.return %4, %1 : {t}, {t}",
    )
    function = entry_function(parse_module(text))
    ops = body_ops(function)
    a, b, c = function.body.block.args
    # The segment stops before %4: %3 leaves it; %1 is used inside and returned.
    inputs, outputs = segment_boundary(ops[:4])
    assert inputs == [b, a, c]
    assert outputs == [ops[0].results[0], ops[1].results[0], ops[3].results[0]]
    error, _ = lower_and_compare(text)
    assert error <= FP32_ABS


def test_identical_segments_compile_once() -> None:
    text, _ = CASES["layer_norm"]
    before = STATS.compiles, STATS.hits
    first = build_segment(body_ops(entry_function(parse_module(text))))
    second = build_segment(body_ops(entry_function(parse_module(text))))
    assert second.graph is first.graph and second.cached
    assert STATS.compiles - before[0] == (0 if first.cached else 1)
    assert STATS.hits - before[1] == (2 if first.cached else 1)
    fp16_function = entry_function(parse_module(text))
    record_precision(fp16_function, "fp16")
    fp16 = build_segment(body_ops(fp16_function))
    other_eps = build_segment(body_ops(entry_function(parse_module(text.replace("e-05", "e-06")))))
    assert len({id(s.graph) for s in (first, fp16, other_eps)}) == 3


ACTIVATION_MLP = """
func.func @mlp(%x: tensor<ROWSx32xf32>, %w: tensor<64x32xf32>, %b: tensor<64xf32>)
    -> tensor<ROWSx64xf32> {
  %0 = npu.fused_linear %x, %w, %b {activation = "ACT"}
      : (tensor<ROWSx32xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<ROWSx64xf32>
  func.return %0 : tensor<ROWSx64xf32>
}
"""


@pytest.mark.parametrize("activation", ["gelu", "silu", "relu", "sigmoid"])
@pytest.mark.parametrize("rows", [1, 8])
def test_activation_apart_is_bit_identical(activation: str, rows: int) -> None:
    """max(y, y) before the activation changes OpenVINO's kernel, not one bit of the
    result, and it is a graph of its own."""
    text = ACTIVATION_MLP.replace("ROWS", str(rows)).replace("ACT", activation)
    generator = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 32, generator=generator) * 4
    w, b = torch.randn(64, 32, generator=generator), torch.randn(64, generator=generator)
    fused = build_segment(body_ops(entry_function(parse_module(text))))
    apart = build_segment(
        body_ops(entry_function(parse_module(text))),
        options=BuildOptions(linear_kernels=((rows, "apart"),)),
    )
    assert apart.graph is not fused.graph
    (want,) = fused(x, w, b)
    (got,) = apart(x, w, b)
    assert torch.equal(got, want)


@pytest.mark.parametrize("activation", ["gelu", "silu"])
def test_int8_activation_apart_follows_the_int8_rule(
    activation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the int8 rule, an int8-weight linear's activation is computed after the
    FullyConnected (bit for bit the same int8 product), and the fp32 rule does not
    touch int8 weights."""
    from forge.conversion import nnfactory_graph

    barriers: list[object] = []
    barrier = nnfactory_graph._fusion_barrier
    monkeypatch.setattr(
        nnfactory_graph, "_fusion_barrier", lambda b, y: barriers.append(y) or barrier(b, y)
    )
    rows = 8
    text = ACTIVATION_MLP.replace("ROWS", str(rows)).replace("ACT", activation)
    generator = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 32, generator=generator) * 4
    w, b = torch.randn(64, 32, generator=generator), torch.randn(64, generator=generator)
    function = entry_function(parse_module(text))
    record_precision(function, "int8")
    ops = body_ops(function)
    fused = build_segment(ops)
    build_segment(ops, BuildOptions(linear_kernels=((rows, "apart"),)))  # the fp32 rule
    assert barriers == []
    apart = build_segment(ops, BuildOptions(int8_kernels=((rows, "apart"),)))
    assert len(barriers) == 1
    (want,) = fused(x, w, b)
    (got,) = apart(x, w, b)
    assert torch.equal(got, want)
    with pytest.raises(ForgeError, match="unknown linear kernel"):
        BuildOptions(int8_kernels=((1, "x"),))


@pytest.mark.parametrize("rows", [1, 8])
def test_gelu_tanh_apart_is_the_sigmoid_form(rows: int) -> None:
    """Apart, the tanh GELU is x * sigmoid(2z): within a few fp32 roundings of ATen's
    0.5 * x * (1 + tanh(z)), and at 0, +-inf, NaN and +-1e20 what OpenVINO's fused Gelu
    gives (both NaN at +inf, where ATen says inf)."""
    text = ACTIVATION_MLP.replace("ROWS", str(rows)).replace("ACT", "gelu_tanh")
    generator = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 32, generator=generator) * 4
    w, b = torch.randn(64, 32, generator=generator), torch.randn(64, generator=generator)
    apart = build_segment(
        body_ops(entry_function(parse_module(text))),
        options=BuildOptions(linear_kernels=((rows, "apart"),)),
    )
    (got,) = apart(x, w, b)
    want = torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b), approximate="tanh")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)

    special = torch.tensor([0.0, float("inf"), -float("inf"), float("nan"), -1e20, 1e20, -30.0])
    rows_in = special[:, None] * torch.eye(32)[: len(special)]  # special[i] at column i
    text = ACTIVATION_MLP.replace("ROWS", str(len(special))).replace("ACT", "gelu_tanh")
    diagonals = []
    for kernel in ("fused", "apart"):
        options = BuildOptions(linear_kernels=((len(special), kernel),))
        segment = build_segment(body_ops(entry_function(parse_module(text))), options=options)
        (got,) = segment(rows_in, torch.eye(64, 32), torch.zeros(64))
        diagonals.append(got[torch.arange(len(special)), torch.arange(len(special))])
    fused, apart_values = diagonals
    torch.testing.assert_close(apart_values, fused, equal_nan=True)
    finite = torch.isfinite(special)
    want = torch.nn.functional.gelu(special[finite], approximate="tanh")
    torch.testing.assert_close(apart_values[finite], want)


LINEAR = """
func.func @f(%x: tensor<ROWSx32xf32>, %w: tensor<64x32xf32>, %b: tensor<64xf32>)
    -> tensor<ROWSx64xf32> {
  %0 = npu.linear %x, %w, %b
      : (tensor<ROWSx32xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<ROWSx64xf32>
  func.return %0 : tensor<ROWSx64xf32>
}
"""


@pytest.mark.parametrize("rows", [1, 16])
def test_onednn_switch_keeps_every_value(rows: int) -> None:
    """PRelu(y, 1) after a plain linear moves it to oneDNN's kernel (another summation
    order than MLAS: equal within fp32 rounding) and keeps NaN and infinities."""
    text = LINEAR.replace("ROWS", str(rows))
    generator = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 32, generator=generator) * 4
    w, b = torch.randn(64, 32, generator=generator), torch.randn(64, generator=generator)
    x[0, 0] = float("nan")
    if rows > 1:
        x[1, 0], x[2, :] = float("inf"), 3e38
    mlas = build_segment(body_ops(entry_function(parse_module(text))))
    onednn = build_segment(
        body_ops(entry_function(parse_module(text))),
        options=BuildOptions(linear_kernels=((rows, "onednn"),)),
    )
    assert onednn.graph is not mlas.graph
    (want,) = mlas(x, w, b)
    (got,) = onednn(x, w, b)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
    assert bool(got.isnan()[0].all()) and (rows == 1 or bool(got.isinf()[1:3].all()))
    finite = want.isfinite()
    assert torch.equal(got[~finite].isposinf(), want[~finite].isposinf())
    torch.testing.assert_close(got[finite], want[finite], rtol=1e-5, atol=1e-4)
    assert torch.allclose(got[finite], torch.nn.functional.linear(x, w, b)[finite], atol=1e-3)


def test_linear_kernel_takes_the_nearest_measured_rows() -> None:
    rule = ((1, "apart"), (128, "onednn"))
    assert [linear_kernel(rule, rows) for rows in (1, 4, 11, 12, 100, 4096)] == [
        "apart",
        "apart",
        "apart",
        "onednn",
        "onednn",
        "onednn",
    ]
    assert linear_kernel((), 1) == "fused"
    with pytest.raises(ForgeError, match="unknown linear kernel"):
        BuildOptions(linear_kernels=((1, "x"),))


# ------------------------------------------------------------------ end to end


def device_of(op: Operation) -> str:
    device = op.attributes.get("device")
    return device.data if device is not None else "cpu"  # type: ignore[attr-defined]


class MixedExecutor:
    """The placed function run as NNFactory segments (maximal runs of NPU ops)
    interleaved with CPU kernels, in schedule order."""

    def __init__(
        self,
        function: func.FuncOp,
        weights: Mapping[str, torch.Tensor],
        num_inputs: int,
        precision: str = "fp32",
    ):
        args = function.body.block.args
        self.inputs = list(args[:num_inputs])
        self.weights = {a: weights[a.name_hint] for a in args[num_inputs:]}
        self.steps: list[tuple[Callable, Sequence[SSAValue], Sequence[SSAValue]]] = []
        self.segments: list[Segment] = []
        record_precision(function, precision)  # the IR states it
        for device, group in itertools.groupby(body_ops(function), key=device_of):
            ops = list(group)
            if device == "npu":
                segment = build_segment(ops)
                self.segments.append(segment)
                self.steps.append((segment, segment.inputs, segment.outputs))
            else:
                for op in ops:
                    kernel = cpu_kernel(op)
                    if len(op.results) == 1:
                        kernel = (lambda k: lambda *xs: (k(*xs),))(kernel)
                    self.steps.append((kernel, op.operands, op.results))
        self.results = function.body.block.last_op.operands

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        env: dict[SSAValue, torch.Tensor] = dict(self.weights)
        env.update(zip(self.inputs, inputs, strict=True))
        with torch.no_grad():
            for run, ins, outs in self.steps:
                env.update(zip(outs, run(*[env[v] for v in ins]), strict=True))
        return tuple(env[v] for v in self.results)


@pytest.mark.parametrize("name", ["gpt2", "llama-3.2-1b"])
def test_tiny_model_end_to_end_fp32(name: str) -> None:
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    plan(module)
    function = entry_function(module)
    program = tiny.program
    executor = MixedExecutor(function, program.weights, len(program.input_names))
    npu_ops = sum(len(s.ops) for s in executor.segments)
    assert executor.segments and npu_ops > len(body_ops(function)) // 2
    agreement = compare(
        tiny.model, executor, tiny.args, tiny.kwargs, program.input_names, num_inputs=2
    )
    seconds = sum(s.compile_seconds for s in executor.segments)
    print(
        f"{name}: {len(executor.segments)} segment(s), {npu_ops} NPU ops, compile "
        f"{seconds:.2f} s, max-abs vs eager {agreement.max_abs:.2e}, top1 {agreement.top1}"
    )
    assert agreement.max_abs <= FP32_ABS
    assert agreement.top1 == 1.0


def test_pass_through_outputs_and_input_free_segments() -> None:
    """Outputs that are inputs unchanged skip the graph; constants need no inputs."""
    t = T("2x3")
    text = fn(
        f"%x: {t}",
        f"{t}, {t}, {t}",
        f"%0 = npu.contiguous %x : {t}\n"
        f"%c = npu.constant dense<2.0> : {t}\n"
        f"%1 = npu.dropout %0 {{p = 1.000000e-01 : f64}} : {t}\n"
        f"func.return %0, %1, %c : {t}, {t}, {t}",
    )
    ops = body_ops(entry_function(parse_module(text)))
    x = torch.randn(2, 3)
    passed, constant, dropped = build_segment(ops)(x)
    assert torch.equal(passed, x) and torch.equal(dropped, x)
    assert torch.equal(constant, torch.full((2, 3), 2.0))
    alone = build_segment(ops[1:2])
    assert alone.inputs == [] and torch.equal(alone()[0], constant)


def test_transposed_b_folds_into_matmul(tmp_path) -> None:
    """matmul(a, transpose(b, -1, -2)) becomes one MatMul with transpose_b; the
    Transpose node drops out of the graph."""
    _, segment = lower_and_compare(CASES["matmul_transposed_b"][0])
    path = tmp_path / "segment.xml"
    segment.graph.factory.save(str(path))
    xml = path.read_text()
    assert 'type="Transpose"' not in xml
    assert 'transpose_b="true"' in xml


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_baked_weights_outlive_the_callers_tensors(precision: str) -> None:
    """Weights baked in as constants share memory with arrays the graph keeps alive:
    dropping every reference the caller had, and churning the allocator, changes
    nothing."""
    import gc

    text = fn(
        "%x: tensor<4x8xf32>, %w: tensor<16x8xf32>",
        "tensor<4x16xf32>",
        "%0 = npu.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>\n"
        "func.return %0 : tensor<4x16xf32>",
    )
    function = entry_function(parse_module(text))
    _, w = function.body.block.args
    weight = torch.randn(16, 8, generator=torch.Generator().manual_seed(3))
    probe = torch.randn(4, 8, generator=torch.Generator().manual_seed(4))
    reference = weight
    if precision == "int8":
        q, scale = quantize_int8(weight, 1, np.dtype(np.float32))
        reference = torch.from_numpy(q).float() * torch.from_numpy(scale)
    expected = probe @ reference.T
    record_precision(function, precision)
    segment = build_segment(body_ops(function), constants={w: weight.clone()})
    assert segment.graph is not None and segment.graph.keepalive
    gc.collect()
    _ = [torch.full((16, 8), 7.0) for _ in range(64)]  # reuse freed memory if any
    (actual,) = segment(probe, weight)
    assert float((actual - expected).abs().max()) <= 1e-4


def test_a_cached_graph_is_not_taken_for_a_tensor_that_took_a_dead_ones_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The graph cache names baked tensors by id and address; a tensor made after one
    died can have both (CPython and the allocator reuse them). Forced here by a key that
    ignores the tensors: the live tensor hits, a new one after the first died does not
    get the dead one's weights."""
    import gc

    from forge.conversion import nnfactory_graph

    text = fn(
        "%x: tensor<2x4xf32>, %w: tensor<3x4xf32>",
        "tensor<2x3xf32>",
        "%0 = npu.linear %x, %w : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>\n"
        "func.return %0 : tensor<2x3xf32>",
    )
    function = entry_function(parse_module(text))
    ops, (_, w) = body_ops(function), function.body.block.args
    monkeypatch.setattr(nnfactory_graph, "baked_key", lambda tensors: ("same",))
    probe = torch.randn(2, 4, generator=torch.Generator().manual_seed(1))
    first = torch.randn(3, 4, generator=torch.Generator().manual_seed(2))
    segment = build_segment(ops, constants={w: first})
    assert build_segment(ops, constants={w: first}).graph is segment.graph  # the same tensor
    del first
    gc.collect()
    second = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    again = build_segment(ops, constants={w: second})
    assert again.graph is not segment.graph
    (actual,) = again(probe, second)
    assert torch.allclose(actual, probe @ second.T, atol=1e-5)


def test_result_pool_reuses_only_what_nobody_holds() -> None:
    from forge.conversion.graph_call import ResultPool

    pool = ResultPool()
    first = pool.take(0, (4,), torch.float32)
    assert pool.take(0, (4,), torch.float32) is not first  # the caller still holds it
    del first
    released = pool.take(0, (4,), torch.float32)
    address = released.data_ptr()
    del released
    reused = pool.take(0, (4,), torch.float32)
    assert reused.data_ptr() == address
    view = reused[:2]
    del reused
    assert pool.take(0, (4,), torch.float32).data_ptr() != address  # a view holds it
    assert view.shape == (2,)
    assert pool.take(0, (8,), torch.float32).shape == (8,)


@pytest.mark.parametrize("shape", ["1x4x4x2", "1x4x4x4", "1x4x4x8", "1x4x8x2"])
def test_sdpa_then_heads_sequence_transpose(shape: str) -> None:
    """OpenVINO 2024.4's CPU snippets fuse this into one MHA kernel that computes
    garbage when heads == sequence length (found by forge fuzz-models); such graphs are
    compiled with snippets off (`BuildOptions.snippets_for`)."""
    t = T(shape)
    text = fn(
        f"%q: {t}, %k: {t}, %v: {t}",
        t if shape != "1x4x8x2" else T("1x8x4x2"),
        f"%0 = npu.sdpa %q, %k, %v : ({t}, {t}, {t}) -> {t}\n"
        f"%1 = npu.transpose %0 {{dim0 = 1 : i64, dim1 = 2 : i64}} : {t} -> "
        f"{t if shape != '1x4x8x2' else T('1x8x4x2')}\n"
        f"func.return %1 : {t if shape != '1x4x8x2' else T('1x8x4x2')}",
    )
    error, _ = lower_and_compare(text)
    assert error <= 1e-5


def test_snippets_mode_is_off_by_default_and_always_for_ambiguous_attention(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def ops_of(shape: str) -> list[Operation]:
        t = T(shape)
        text = fn(
            f"%q: {t}, %k: {t}, %v: {t}",
            t,
            f"%0 = npu.sdpa %q, %k, %v : ({t}, {t}, {t}) -> {t}\nfunc.return %0 : {t}",
        )
        return body_ops(entry_function(parse_module(text)))

    assert BuildOptions().snippets_for(ops_of("1x12x128x64")) == os.environ.get(
        "NNFACTORY_SNIPPETS_MODE", "DISABLE"
    )
    monkeypatch.setenv("NNFACTORY_SNIPPETS_MODE", "ENABLE")
    users = BuildOptions()  # the user's variable, read when the options are made
    assert users.snippets_for(ops_of("1x12x128x64")) == "ENABLE"  # the user's choice
    assert users.snippets_for(ops_of("1x4x4x8")) == "DISABLE"  # except where it is wrong


def test_snippets_follow_the_measured_rule_by_rows() -> None:
    """Without the variable, a graph's snippets are what the host profile measured for
    the row count nearest its largest linear's; off for graphs the profile did not time
    (not fp32 throughout), for graphs without a linear, and with no rule."""

    def linear_of(rows: int) -> list[Operation]:
        x, w, y = T(f"{rows}x8"), T("4x8"), T(f"{rows}x4")
        text = fn(
            f"%x: {x}, %w: {w}",
            y,
            f"%0 = npu.linear %x, %w : ({x}, {w}) -> {y}\nfunc.return %0 : {y}",
        )
        return body_ops(entry_function(parse_module(text)))

    t = T("4x4")
    relu = fn(f"%x: {t}", t, f"%0 = npu.relu %x : {t}\nfunc.return %0 : {t}")
    relu_ops = body_ops(entry_function(parse_module(relu)))
    if "NNFACTORY_SNIPPETS_MODE" in os.environ:
        pytest.skip("NNFACTORY_SNIPPETS_MODE is set: the user's choice wins")
    assert BuildOptions().snippets_for(linear_of(128)) == "DISABLE"
    measured = BuildOptions(snippets=((1, False), (128, True)))
    assert measured.snippets_for(linear_of(100)) == "ENABLE"
    assert measured.snippets_for(linear_of(2)) == "DISABLE"
    assert measured.snippets_for(linear_of(100), measured=False) == "DISABLE"
    assert measured.snippets_for(relu_ops) == "DISABLE"
    assert BuildOptions(snippets=((1, True),)).snippets_for(linear_of(1)) == "ENABLE"
    users = BuildOptions(snippets=((1, True),), snippets_mode="DISABLE")
    assert users.snippets_for(linear_of(1)) == "DISABLE"  # the user's choice wins


def _values_by_name(text: str) -> dict[str, SSAValue]:
    function = entry_function(parse_module(text))
    values: dict[str, SSAValue] = {}
    for arg in function.body.block.args:
        values[arg.name_hint or ""] = arg
    for op in function.walk():
        for result in op.results:
            values[result.name_hint or ""] = result
    return values


def test_row_select_matches_cache_times_column_plus_row_times_column() -> None:
    """The attention lowering folds a key/value operand into its MatMuls only when it is
    `cache * column + row * column` over the rows, with every part in the graph."""
    from types import SimpleNamespace

    from forge.conversion.attention import row_select

    values = _values_by_name(sdpa_row(4, 4))
    graph = SimpleNamespace(values=dict.fromkeys(values.values()))
    select = row_select(graph, values["k"])  # type: ignore[arg-type]
    assert select is not None
    assert (select.cache, select.keep, select.row, select.at) == tuple(
        values[name] for name in ("kc", "keep", "kr", "at")
    )
    assert row_select(graph, values["q"]) is None  # type: ignore[arg-type]
    inputs = SimpleNamespace(values={values["k"]: None})  # the select is a graph input
    assert row_select(inputs, values["k"]) is None  # type: ignore[arg-type]

    cache, full = T("2x4x7x8"), T("7x8")  # a [rows, 8] factor is not a column
    body = (
        f"%a = npu.mul %c, %w : ({cache}, {full}) -> {cache}\n"
        f"%b = npu.mul %c, %w : ({cache}, {full}) -> {cache}\n"
        f"%s = npu.add %a, %b : ({cache}, {cache}) -> {cache}\n"
        f"func.return %s : {cache}"
    )
    values = _values_by_name(fn(f"%c: {cache}, %w: {full}", cache, body))
    graph = SimpleNamespace(values=dict.fromkeys(values.values()))
    assert row_select(graph, values["s"]) is None  # type: ignore[arg-type]


def test_bound_addresses_follow_every_call_of_a_shared_graph() -> None:
    """A graph's inputs and outputs are set only when their address changes: a buffer
    changed in place between calls (a KV cache) is read anew, and two segments that
    share one compiled graph (same key) each get their own inputs and outputs."""
    text = LINEAR.replace("ROWS", "4")
    first = build_segment(body_ops(entry_function(parse_module(text))))
    second = build_segment(body_ops(entry_function(parse_module(text))))
    assert second.graph is first.graph
    generator = torch.Generator().manual_seed(0)
    x, w, b = (
        torch.randn(4, 32, generator=generator),
        torch.randn(64, 32, generator=generator),
        torch.randn(64, generator=generator),
    )
    other = torch.randn(4, 32, generator=generator)
    expected = torch.nn.functional.linear
    results = []
    for segment, given in ((first, x), (second, other), (first, x), (second, other)):
        (y,) = segment(given, w, b)
        torch.testing.assert_close(y, expected(given, w, b), rtol=1e-5, atol=1e-4)
        results.append(y)
    assert results[0].data_ptr() != results[1].data_ptr()  # both kept: fresh storage
    x.mul_(2)  # in place: same address, new values
    (y,) = first(x, w, b)
    torch.testing.assert_close(y, expected(x, w, b), rtol=1e-5, atol=1e-4)


def test_frozen_inputs_stay_bound_and_small_inputs_are_staged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call rebinds only what changed: a frozen weight is bound once while its graph's
    last call was its own, and again when a segment sharing the graph bound another;
    a small input is copied into memory the graph stays bound to, so a new tensor at
    every call (a decode step's token) costs no `set_input_tensor`. Values follow every
    change: new tensors, in-place writes, the other segment's weights."""
    text = LINEAR.replace("ROWS", "4")
    first = build_segment(body_ops(entry_function(parse_module(text))))
    second = build_segment(body_ops(entry_function(parse_module(text))))
    assert second.graph is first.graph
    generator = torch.Generator().manual_seed(0)
    w1, w2 = torch.randn(64, 32, generator=generator), torch.randn(64, 32, generator=generator)
    b = torch.randn(64, generator=generator)
    first.freeze(1, w1)
    second.freeze(1, w2)
    factory = first.graph.factory
    bound: list[int] = []
    original = factory.set_input_tensor

    def recording(array: np.ndarray, index: int) -> None:
        bound.append(index)
        original(array, index)

    monkeypatch.setattr(factory, "set_input_tensor", recording)
    linear = torch.nn.functional.linear
    for step in range(4):
        x = torch.randn(4, 32, generator=generator)  # a new tensor every call
        (y,) = first(x, w1, b)
        torch.testing.assert_close(y, linear(x, w1, b), rtol=1e-5, atol=1e-4)
        if step > 0:  # the first call binds what the graph does not hold yet
            assert bound == [], f"call {step} rebound {bound}"
        bound.clear()
    x.mul_(3)  # in place: the staged copy is refreshed
    (y,) = first(x, w1, b)
    torch.testing.assert_close(y, linear(x, w1, b), rtol=1e-5, atol=1e-4)
    (y,) = second(x, w2, b)  # the shared graph now binds w2
    torch.testing.assert_close(y, linear(x, w2, b), rtol=1e-5, atol=1e-4)
    assert 1 in bound
    bound.clear()
    (y,) = first(x, w1, b)  # and w1 again
    torch.testing.assert_close(y, linear(x, w1, b), rtol=1e-5, atol=1e-4)
    assert 1 in bound


def test_rotate_half_lowers_in_the_form_openvino_fuses(tmp_path: object) -> None:
    """Llama's rotate_half lowers as transformers' export spells it, the form OpenVINO's
    RoPE fusion (RoPEFusionGPTNEOX) matches: slices of the last dim as StridedSlices
    with the other axes masked, the negation as a Multiply, the Concat on axis -1 (the
    compiled graph then runs one RoPE node per query and key: docs/generation.md)."""
    import warnings
    import xml.etree.ElementTree as ElementTree
    from pathlib import Path

    from forge.frontend import models
    from forge.runtime.generate import compile_lm

    # Without paged attention: OpenVINO's IR reader cannot read that node back.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = compile_lm(
            models.build_model("llama-3.2-1b", tiny=True),
            capacity=32,
            prompt_capacity=8,
            pipeline={"skip": ("npu-fuse-cached-attention",)},
        )
    (segment,) = lm.prefill.executor.segments
    path = Path(str(tmp_path)) / "prefill.xml"
    segment.graph.factory.save(str(path))
    root = ElementTree.parse(path).getroot()
    kinds = {layer.get("id"): layer.get("type") for layer in root.iter("layer")}
    data = {layer.get("id"): layer.find("data") for layer in root.iter("layer")}
    sources: dict[str, list[str]] = {}
    for edge in sorted(root.iter("edge"), key=lambda e: int(e.get("to-port", "0"))):
        sources.setdefault(edge.get("to-layer", ""), []).append(kinds[edge.get("from-layer")])
    rotations = 2 * lm.attention_layers  # the queries' and the keys'
    halves = [
        i
        for i, kind in kinds.items()
        if kind == "Concat" and sources[i] == ["Multiply", "StridedSlice"]
    ]
    assert len(halves) == rotations
    assert all(data[i].get("axis") == "-1" for i in halves)
    slices = [data[i] for i, kind in kinds.items() if kind == "StridedSlice"]
    assert len(slices) == 2 * rotations
    assert all(d.get("begin_mask") == d.get("end_mask") == "1, 1, 1, 0" for d in slices)
