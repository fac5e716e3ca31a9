"""Phi-3's rotary embedding on the whole head concatenates an empty slice
(`cat(rotated, x[..., 16:])`): Phase 2 drops it, so the whole graph runs in NNFactory
segments (before, NNFactory refused the empty slice and every NPU op fell back to the
CPU) and `--precision int8` really changes the result."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from forge.runtime.compile import compile_model  # noqa: E402


def _phi3() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    config = transformers.Phi3Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
        partial_rotary_factor=1.0,
        pad_token_id=0,
    )
    model = transformers.Phi3ForCausalLM(config).eval()
    return model, torch.randint(0, 256, (1, 16), generator=torch.Generator().manual_seed(1))


def test_partial_rotary_runs_fully_in_nnfactory_and_int8_applies() -> None:
    model, ids = _phi3()
    with torch.no_grad():
        expected = model(ids, use_cache=False).logits
    results = {}
    for precision in ("fp32", "int8"):
        executor, report = compile_model(model, (ids,), {"use_cache": False}, precision)
        assert executor.fallback_ops == 0, report.notes
        assert executor.npu_ops == report.plan.placement.npu_ops > 90
        (results[precision],) = executor(ids)
    assert (results["fp32"] - expected).abs().max() <= 1e-5
    int8_error = float((results["int8"] - expected).abs().max())
    assert 1e-4 < int8_error < 0.1  # int8 weights are in use, and still close
