"""npu-fuse-operators on real graphs: linear layers absorb their activations, numerics hold."""

from __future__ import annotations

import pytest
from conftest import load_tiny

from forge.dialects import npu
from forge.support.diagnostics import ForgeError
from forge.transforms import run_pipeline
from forge.transforms.npu_fuse_operators import NpuFuseOperatorsPass
from forge.transforms.pattern_pass import count_ops

# Fused linears expected per tiny model: GPT-2 fuses c_fc with its decomposed tanh-GELU
# in each of its 2 layers; the SwiGLU models fuse the gate projection with its silu in
# every layer (LFM2's 4 layers all have a SwiGLU feed-forward).
EXPECTED_FUSED = {
    "gpt2": 2,
    "granite-350m": 2,
    "qwen2-0.5b": 2,
    "llama-3.2-1b": 2,
    "lfm2-2.6b": 4,
    "llama-3.1-8b": 2,
}


def ops_of(module, kind: type) -> list:
    return [op for op in module.walk() if isinstance(op, kind)]


@pytest.mark.parametrize("name", list(EXPECTED_FUSED))
def test_fusion_preserves_numerics(name: str) -> None:
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    records = run_pipeline(module, "npu-dce,npu-fuse-operators")
    fuse = records[-1]
    assert fuse.name == "npu-fuse-operators" and fuse.rewrites > 0
    assert fuse.ops_after < fuse.ops_before
    fused = ops_of(module, npu.FusedLinearOp)
    assert len(fused) == EXPECTED_FUSED[name]
    expected_activation = "gelu_tanh" if name == "gpt2" else "silu"
    assert {op.activation.data for op in fused} == {expected_activation}
    # Every activation that followed a linear is gone; GPT-2's tanh only lived in its gelu.
    assert not ops_of(module, npu.SiluOp)
    if name == "gpt2":
        assert not ops_of(module, npu.TanhOp) and not ops_of(module, npu.GeluOp)
    agreement = tiny.agreement(module)
    assert agreement.max_abs <= 1e-5 and agreement.top1 == 1.0


@pytest.mark.parametrize("name", list(EXPECTED_FUSED))
def test_alpha_zero_makes_no_rewrite(name: str) -> None:
    module = load_tiny(name).fresh_module()
    run_pipeline(module, "npu-dce")
    before = count_ops(module)
    records = run_pipeline(module, "npu-fuse-operators{alpha=0}")
    assert records[0].rewrites == 0 and count_ops(module) == before
    assert not ops_of(module, npu.FusedLinearOp)


@pytest.mark.parametrize(
    ("alpha", "fused", "gelus"),
    [
        (0.2, 0, 0),  # GPT-2's gelu is decomposed: nothing a simple epilogue can take
        (0.4, 0, 0),
        (0.6, 0, 2),  # formula recognized; a view still separates it from the addmm
        (0.8, 2, 0),  # fused through the view
        (1.0, 2, 0),
    ],
)
def test_gpt2_alpha_ladder(alpha: float, fused: int, gelus: int) -> None:
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    run_pipeline(module, f"npu-dce,npu-fuse-operators{{alpha={alpha}}}")
    assert len(ops_of(module, npu.FusedLinearOp)) == fused
    assert len(ops_of(module, npu.GeluOp)) == gelus
    agreement = tiny.agreement(module)
    assert agreement.max_abs <= 1e-5 and agreement.top1 == 1.0


def test_rewrites_grow_with_alpha() -> None:
    """Monotone: raising alpha never removes a rewrite (summed over all six models)."""
    counts = []
    for alpha in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0):
        total = 0
        for name in EXPECTED_FUSED:
            module = load_tiny(name).fresh_module()
            records = run_pipeline(module, f"npu-dce,npu-fuse-operators{{alpha={alpha}}}")
            total += records[-1].rewrites
        counts.append(total)
    assert counts[0] == 0
    assert counts == sorted(counts) and counts[-1] > 0


def test_fusion_is_idempotent() -> None:
    module = load_tiny("gpt2").fresh_module()
    run_pipeline(module, "npu-dce,npu-fuse-operators")
    again = run_pipeline(module, "npu-fuse-operators")
    assert again[0].rewrites == 0


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_alpha_out_of_range_is_rejected(alpha: float) -> None:
    with pytest.raises(ValueError, match=r"alpha must lie in \[0, 1\]"):
        NpuFuseOperatorsPass(alpha=alpha)


def test_alpha_out_of_range_in_a_pipeline_is_one_forge_error() -> None:
    module = load_tiny("gpt2").fresh_module()
    with pytest.raises(ForgeError, match=r"alpha must lie in \[0, 1\], got 2"):
        run_pipeline(module, "npu-fuse-operators{alpha=2}")


def test_integer_alpha_spellings_are_accepted() -> None:
    module = load_tiny("llama-3.2-1b").fresh_module()
    assert run_pipeline(module, "npu-fuse-operators{alpha=1}")[0].rewrites > 0
    assert NpuFuseOperatorsPass(alpha=0).alpha == 0.0
