"""npu-dce and npu-cse on real graphs: fewer ops, identical numerics."""

from __future__ import annotations

import pytest
from conftest import load_tiny

from forge.dialects import npu
from forge.frontend.models import SPECS
from forge.transforms import run_pipeline
from forge.transforms.pattern_pass import count_ops


@pytest.mark.parametrize("name", list(SPECS))
def test_dce_cse_preserve_numerics(name: str) -> None:
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    before = count_ops(module)
    records = run_pipeline(module, "npu-dce,npu-cse")
    assert [r.name for r in records] == ["npu-dce", "npu-cse"]
    assert records[0].rewrites > 0 and count_ops(module) < before
    assert records[-1].ops_after == count_ops(module)
    ops = list(module.walk())
    assert not any(isinstance(op, npu.DropoutOp) for op in ops)
    agreement = tiny.agreement(module)
    assert agreement.max_abs <= 1e-5 and agreement.top1 == 1.0


def test_dce_is_idempotent() -> None:
    module = load_tiny("gpt2").fresh_module()
    run_pipeline(module, "npu-dce")
    again = run_pipeline(module, "npu-dce")
    assert again[0].rewrites == 0
