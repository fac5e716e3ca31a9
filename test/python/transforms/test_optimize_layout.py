"""npu-optimize-layout on the six tiny models: numerics unchanged, a fixed point, and a
contiguity analysis that agrees with the strides ATen actually produces."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch
from conftest import load_tiny
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue

from forge.dialects import npu
from forge.dialects.context import entry_function
from forge.frontend.loading import ordered_inputs
from forge.target.cpu_kernels import cpu_kernel
from forge.transforms import run_pipeline
from forge.transforms.matchers import swapped_last_two_dims
from forge.transforms.npu_optimize_layout import (
    ATEN_VIEW_OPCODES,
    CONTIGUOUS,
    Contiguity,
    NpuOptimizeLayoutPass,
    SharedContiguity,
    expand_strides,
    preferred_layouts,
    view_root,
    view_strides,
)

MODELS = ("gpt2", "granite-350m", "qwen2-0.5b", "llama-3.2-1b", "lfm2-2.6b", "llama-3.1-8b")
LAYOUTS = ("auto", "contiguous")


def optimized(name: str, layout: str) -> ModuleOp:
    module = load_tiny(name).fresh_module()
    run_pipeline(module, f"npu-dce,npu-optimize-layout{{layout={layout}}}")
    return module


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", MODELS)
def test_numerics_unchanged(name: str, layout: str) -> None:
    agreement = load_tiny(name).agreement(optimized(name, layout))
    assert agreement.max_abs <= 1e-5
    assert agreement.top1 == 1.0


@pytest.mark.parametrize("layout", (*LAYOUTS, "channels-last"))
@pytest.mark.parametrize("name", MODELS)
def test_idempotent(name: str, layout: str) -> None:
    module = optimized(name, layout)
    text = str(module)
    records = run_pipeline(module, f"npu-optimize-layout{{layout={layout}}}")
    assert [r.rewrites for r in records] == [0]
    assert str(module) == text


@pytest.mark.parametrize("name", MODELS)
def test_channels_last_is_auto_without_convolutions(name: str) -> None:
    assert str(optimized(name, "channels-last")) == str(optimized(name, "auto"))


def runtime_values(name: str, module: ModuleOp) -> dict[SSAValue, Any]:
    """Every SSA value of `module`, computed op by op with the ATen kernels."""
    tiny = load_tiny(name)
    function = entry_function(module)
    args = function.body.block.args
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, tiny.program.input_names)
    env: dict[SSAValue, Any] = dict(zip(args, inputs, strict=False))
    for arg in args[len(inputs) :]:
        env[arg] = tiny.program.weights[arg.name_hint]
    with torch.no_grad():
        for op in function.body.block.ops:
            if isinstance(op, func.ReturnOp):
                continue
            result = cpu_kernel(op)(*[env[v] for v in op.operands])
            outs = result if len(op.results) > 1 else (result,)
            env.update(zip(op.results, outs, strict=False))
    return env


@pytest.mark.parametrize("spec", ("npu-dce", "npu-dce,npu-optimize-layout"))
@pytest.mark.parametrize("name", MODELS)
def test_analysis_matches_aten_strides(name: str, spec: str) -> None:
    """Whatever the analysis calls dense (by ATen's rules) is dense when run, and the
    strides it derives are the ones ATen produces (size-1 dims aside)."""
    module = load_tiny(name).fresh_module()
    run_pipeline(module, spec)
    env = runtime_values(name, module)
    for value, tensor in env.items():
        if not isinstance(tensor, torch.Tensor):
            continue
        analysis = Contiguity(aten=True)
        if analysis.is_contiguous(value):
            assert tensor.is_contiguous(), value
        strides = analysis.strides(value)
        if strides is not None:
            for size, expected, actual in zip(tensor.shape, strides, tensor.stride(), strict=True):
                assert size == 1 or expected == actual, (value, strides, tensor.stride())


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", MODELS)
def test_npu_operands_are_dense_at_run_time(name: str, layout: str) -> None:
    """After the pass every operand the table marks contiguous is dense when run, except
    under layout=auto: there the rhs of a transposed-B matmul has a dense source instead,
    and views of NPU-computed values stay views (the NNFactory graph absorbs them)."""
    module = optimized(name, layout)
    env = runtime_values(name, module)
    checked = 0
    for op in entry_function(module).body.block.ops:
        for index, (operand, want) in enumerate(
            zip(op.operands, preferred_layouts(op), strict=True)
        ):
            if want != CONTIGUOUS:
                continue
            if layout == "auto" and not isinstance(view_root(operand).owner, Block):
                continue
            transposed = swapped_last_two_dims(operand) if isinstance(op, npu.MatmulOp) else None
            if layout == "auto" and index == 1 and transposed is not None:
                assert env[transposed[1]].is_contiguous(), op
                continue
            assert env[operand].is_contiguous(), (op, index)
            checked += 1
    assert checked > 0


def test_inserts_where_needed() -> None:
    """GPT-2 without attention fusion: q, v and k's heads are strided views of the fused
    qkv projection. layout=contiguous copies each once per layer; layout=auto copies none,
    since those views are computed inside the NNFactory graph, and never copies an
    embedding's (dense) result."""
    tiny = load_tiny("gpt2")
    layers = tiny.model.config.n_layer
    counts = {}
    for layout in ("contiguous", "auto"):
        module = tiny.fresh_module()
        before = sum(isinstance(op, npu.ContiguousOp) for op in module.walk())
        run_pipeline(module, f"npu-dce,npu-optimize-layout{{layout={layout}}}")
        copies = [op for op in module.walk() if isinstance(op, npu.ContiguousOp)]
        assert all(not isinstance(c.input.owner, npu.EmbeddingOp) for c in copies)
        counts[layout] = len(copies) - before
    assert counts == {"contiguous": 3 * layers, "auto": 0}


def test_auto_copies_strided_views_of_arguments() -> None:
    """A transposed weight entering from torch is copied under auto: NNFactory reads
    argument buffers as they are."""
    from forge.dialects.context import parse_module

    module = parse_module(
        "func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>) -> tensor<4x8xf32> {\n"
        "  %t = npu.transpose %w {dim0 = 0 : i64, dim1 = 1 : i64}"
        " : tensor<8x4xf32> -> tensor<4x8xf32>\n"
        "  %y = npu.add %x, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>\n"
        "  func.return %y : tensor<4x8xf32>\n}\n"
    )
    run_pipeline(module, "npu-optimize-layout")
    assert sum(isinstance(op, npu.ContiguousOp) for op in module.walk()) == 1


def test_rejects_unknown_layout() -> None:
    with pytest.raises(ValueError, match="layout must be one of auto, contiguous, channels-last"):
        NpuOptimizeLayoutPass(layout="nchw")


def test_view_opcodes_are_views_in_torch() -> None:
    for opcode in ATEN_VIEW_OPCODES:
        _, name, overload = opcode.split(".")
        schema = getattr(getattr(torch.ops.aten, name), overload)._schema
        assert any(r.alias_info is not None for r in schema.returns), opcode


# ------------------------------------------------------- stride helpers against torch

shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(shape=shapes, data=st.data())
def test_view_strides_match_torch(shape: list[int], data: st.DataObject) -> None:
    base = torch.empty(shape)
    perm = data.draw(st.permutations(range(len(shape))))
    x = base.permute(*perm)
    numel = x.numel()
    divisors = [d for d in range(1, numel + 1) if numel % d == 0]
    first = data.draw(st.sampled_from(divisors))
    rest = numel // first
    second = data.draw(st.sampled_from([d for d in divisors if rest % d == 0]))
    new = [first, second, rest // second]
    expected: tuple[int, ...] | None
    try:
        expected = tuple(x.view(new).stride())
    except RuntimeError:
        expected = None
    actual = view_strides(tuple(x.shape), tuple(x.stride()), new)
    if expected is None or actual is None:
        assert actual == expected
    else:
        assert all(s == 1 or a == e for s, a, e in zip(new, actual, expected, strict=True))


@pytest.mark.parametrize(
    ("old", "new"), [((1, 4), (3, 4)), ((4,), (2, 3, 4)), ((2, 1, 3), (2, 5, 3)), ((1,), (1, 1))]
)
def test_expand_strides_match_torch(old: tuple[int, ...], new: tuple[int, ...]) -> None:
    x = torch.empty(old)
    expected = x.expand(new).stride()
    actual = expand_strides(old, x.stride(), new)
    for size, a, e in itertools.zip_longest(new, actual, expected):
        assert size == 1 or a == e


class _FreshPerQuery(SharedContiguity):
    """The analyses rebuilt for every query: the reference the shared memo must match."""

    @property
    def npu(self) -> Contiguity:
        return Contiguity()

    @property
    def aten(self) -> Contiguity:
        return Contiguity(aten=True)


@pytest.mark.parametrize("layout", (*LAYOUTS, "channels-last"))
@pytest.mark.parametrize("name", ["gpt2", "llama-3.2-1b", "lfm2-2.6b"])
def test_shared_analyses_rewrite_as_fresh_ones_do(
    name: str, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass run's patterns share one memoized analysis, dropped at each rewrite: the
    IR they produce is the IR of an analysis built anew for every query."""
    shared = optimized(name, layout)
    monkeypatch.setattr("forge.transforms.npu_optimize_layout.SharedContiguity", _FreshPerQuery)
    fresh = optimized(name, layout)
    assert str(shared) == str(fresh)


def test_a_rewrite_drops_the_shared_memo() -> None:
    """After a copy is inserted the memo is gone, so later queries see the new IR."""
    analyses = SharedContiguity()
    first = analyses.npu
    assert analyses.npu is first
    analyses.changed()
    assert analyses.npu is not first
