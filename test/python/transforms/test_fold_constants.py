"""npu-fold-constants on the six tiny models: fewer ops, same numbers as eager PyTorch."""

from __future__ import annotations

import pytest
from conftest import load_tiny

from forge.dialects import npu
from forge.dialects.context import parse_module
from forge.transforms import run_pipeline
from forge.transforms.pattern_pass import count_ops

MODELS = ["gpt2", "granite-350m", "qwen2-0.5b", "llama-3.2-1b", "lfm2-2.6b", "llama-3.1-8b"]
PIPELINE = "npu-dce,npu-fold-constants,npu-dce"


@pytest.mark.parametrize("name", MODELS)
def test_folds_and_agrees(name: str) -> None:
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    before = count_ops(module)
    records = run_pipeline(module, PIPELINE)
    fold = next(r for r in records if r.name == "npu-fold-constants")
    assert fold.rewrites > 0
    assert fold.ops_after < fold.ops_before
    assert count_ops(module) < before
    agreement = tiny.agreement(module)
    assert agreement.max_abs <= 1e-5
    assert agreement.top1 == 1.0


@pytest.mark.parametrize("name", ["gpt2", "llama-3.2-1b"])
def test_causal_mask_is_constant_and_round_trips(name: str) -> None:
    """The mask's arange/unsqueeze/le chain becomes constants; the folded IR prints and
    parses back to the same text."""
    module = load_tiny(name).fresh_module()
    run_pipeline(module, PIPELINE)
    text = str(module)
    assert '"aten.arange.default"' not in text
    assert '"aten.new_ones.default"' not in text
    assert '"aten.alias.default"' not in text
    assert "npu.constant" in text
    assert str(parse_module(text)) == text


def test_fixed_point() -> None:
    """A second run finds nothing left to fold."""
    module = load_tiny("gpt2").fresh_module()
    run_pipeline(module, PIPELINE)
    (record,) = run_pipeline(module, "npu-fold-constants")
    assert record.rewrites == 0


def test_max_elements_bounds_materialized_constants() -> None:
    """With a tiny bound, no folded constant exceeds it (weights never become constants)."""
    module = load_tiny("gpt2").fresh_module()
    run_pipeline(module, "npu-dce,npu-fold-constants{max_elements=8},npu-dce")
    sizes = [len(op.value.get_values()) for op in module.walk() if isinstance(op, npu.ConstantOp)]
    assert sizes and max(sizes) <= 8
