"""npu-fuse-attention on real graphs: one npu.sdpa per attention layer, same numerics."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import load_tiny

from forge.dialects import npu
from forge.dialects.context import entry_function, parse_module
from forge.dialects.shapes import element_type, is_bool, shape_of
from forge.frontend.models import SPECS
from forge.runtime.reference import ReferenceExecutor
from forge.transforms import run_pipeline

MODELS = ["gpt2", "granite-350m", "qwen2-0.5b", "llama-3.2-1b", "lfm2-2.6b", "llama-3.1-8b"]


def _count(module, op_type) -> int:
    return sum(1 for op in module.walk() if isinstance(op, op_type))


@pytest.mark.parametrize("name", MODELS)
def test_fuse_attention_preserves_numerics(name: str) -> None:
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    records = run_pipeline(module, "npu-dce,npu-fuse-attention")
    assert [r.name for r in records] == ["npu-dce", "npu-fuse-attention"]
    layers = SPECS[name].attention_layers(tiny=True)
    assert _count(module, npu.SDPAOp) == layers
    assert _count(module, npu.SoftmaxOp) == 0
    for sdpa in (op for op in module.walk() if isinstance(op, npu.SDPAOp)):
        assert sdpa.scale is not None and sdpa.mask is not None
    agreement = tiny.agreement(module)
    assert agreement.max_abs <= 1e-5 and agreement.top1 == 1.0


@pytest.mark.parametrize("name", MODELS)
def test_rewrite_count_is_sdpa_count(name: str) -> None:
    module = load_tiny(name).fresh_module()
    records = run_pipeline(module, "npu-dce,npu-fuse-attention")
    fuse = records[-1]
    assert fuse.rewrites == _count(module, npu.SDPAOp) > 0
    assert fuse.ops_after < fuse.ops_before


@pytest.mark.parametrize("name", ["llama-3.2-1b", "qwen2-0.5b", "llama-3.1-8b"])
def test_gqa_feeds_unrepeated_kv(name: str) -> None:
    module = load_tiny(name).fresh_module()
    run_pipeline(module, "npu-dce,npu-fuse-attention")
    sdpas = [op for op in module.walk() if isinstance(op, npu.SDPAOp)]
    assert sdpas
    for sdpa in sdpas:
        q_heads = sdpa.query.type.get_shape()[-3]
        kv_heads = sdpa.key.type.get_shape()[-3]
        assert kv_heads == sdpa.value.type.get_shape()[-3]
        assert kv_heads < q_heads  # repeat_kv was unwrapped: the kernel does GQA
    # The rank-5 repeat_kv expansions are gone (the mask's own expand stays).
    expands = [op for op in module.walk() if isinstance(op, npu.ExpandOp)]
    assert all(len(op.result.type.get_shape()) < 5 for op in expands)


def test_granite_multiplier_is_the_scale() -> None:
    tiny = load_tiny("granite-350m")
    module = tiny.fresh_module()
    run_pipeline(module, "npu-dce,npu-fuse-attention")
    multiplier = tiny.model.config.attention_multiplier
    head_dim = tiny.model.config.hidden_size // tiny.model.config.num_attention_heads
    assert multiplier != pytest.approx(head_dim**-0.5)  # not sdpa's default
    scales = [op.scale.value.data for op in module.walk() if isinstance(op, npu.SDPAOp)]
    assert scales and all(scale == pytest.approx(multiplier) for scale in scales)


def test_fuse_attention_needs_dce_for_asserts_and_is_idempotent() -> None:
    module = load_tiny("gpt2").fresh_module()
    # Without npu-dce the softmax result also feeds an `_assert_tensor_metadata`: no fusion.
    alone = run_pipeline(module, "npu-fuse-attention")
    assert alone[0].rewrites == 0 and _count(module, npu.SDPAOp) == 0
    run_pipeline(module, "npu-dce,npu-fuse-attention")
    again = run_pipeline(module, "npu-fuse-attention")
    assert again[0].rewrites == 0


LIT_FILE = Path(__file__).resolve().parents[2] / "transforms" / "npu-fuse-attention.mlir"
POSITIVES = [c for c in LIT_FILE.read_text().split("// -----") if "// Positive" in c]


def _random_inputs(function) -> list[torch.Tensor]:
    inputs = []
    for arg in function.body.block.args:
        shape = shape_of(arg.type)
        if is_bool(element_type(arg.type)):
            keep = torch.rand(shape) > 0.5
            keep[..., 0, :] = False  # a fully masked row: where the mask encodings differ
            inputs.append(keep)
        elif arg.name_hint in ("mask", "full"):
            minimum = torch.finfo(torch.float32).min
            inputs.append(torch.where(torch.rand(shape) > 0.3, 0.0, minimum))
        else:
            inputs.append(torch.randn(shape))
    return inputs


@pytest.mark.parametrize("index", range(len(POSITIVES)))
def test_lit_positives_match_unfused(index: int) -> None:
    """The hand-written positive cases compute what the unfused chain computes, fully
    masked rows included (the boolean `where` becomes an additive mask)."""
    torch.manual_seed(index)
    module = parse_module(POSITIVES[index])
    function = entry_function(module)
    inputs = _random_inputs(function)
    expected = ReferenceExecutor(function, {}, len(inputs))(*inputs)
    fused = module.clone()
    assert run_pipeline(fused, "npu-fuse-attention")[0].rewrites == 1
    actual = ReferenceExecutor(entry_function(fused), {}, len(inputs))(*inputs)
    for e, a in zip(expected, actual, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
